"""Guard across a fleet of machines (docs/fleet.md).

* :mod:`guard.fleet.records`: the fields every audit record carries so that records of
  many machines can be told apart and joined (audit schema version 1);
* :mod:`guard.fleet.hostinfo`: which host agent, and which version, started a hook;
* :mod:`guard.fleet.syslog`: RFC 5424 framing, the bounded spool and the shipper that
  sends records to ``[audit] syslog`` without a decision ever waiting for it;
* :mod:`guard.fleet.report`: ``guard review --fleet``, over central JSON lines or audit logs,
  each record verified before it counts; :mod:`guard.fleet.pages` renders it;
* :mod:`guard.fleet.ocsf`: a record as an OCSF API Activity event.
"""
