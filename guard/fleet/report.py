"""``guard review --fleet PATH``: what a fleet's records say, streamed with bounded memory.

PATH is a file of JSON lines (what the central rsyslog writes, docs/fleet.md) or a
directory of them (guard's audit logs, ``*.jsonl`` and rotated ``*.jsonl.N``, at any
depth). Records are read line by line and folded into counters whose size depends on
the fleet (machines, sessions, rules, policy digests, minutes of the period), never on
the number of records. A record seen twice (RELP resends after an outage) is counted
once when its ``record_id`` is among the last :data:`DEDUP_WINDOW` ids of its reader.
Large inputs are split between worker processes (one per CPU), each folding its share.

The report: machines (records, sessions, the policy digest each runs last, guard and
host agent versions), decisions by host agent, by agent and by rule, machines running a
policy digest other than the fleet's current one (the digest most machines run last),
machines where the monitor saw changes a hook should have refused (a skipped or bypassed
hook), and confinement unavailable (notices). Renderings: JSON (:meth:`FleetReport.to_json`),
a text table and one self-contained HTML page with charts (:mod:`guard.fleet.pages`).

**Each record is verified before it counts.** A record without chain keys (unless it is
a shipper's notice carrying guard's signature), with malformed ones, or, with the keys of
the machines given (``--key``), whose MAC does not match, is *unverifiable*: it is
reported (per machine, with its place) and counts for nothing else, so a forged record
cannot move a machine's policy digest, decisions or findings. A shipped record carries
its chain keys (:func:`guard.audit.verify.check_shipped`); a line of a local audit log is
checked against the line before it. The records of each chain (machine, user, log) are
checked for numbers missing between the first and the last received. Without keys the
MACs are not checked (the report says how many records that leaves unchecked).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from guard.audit.verify import check_notice, check_shipped, malformed, notice_of
from guard.effects import GuardError

try:  # a faster parser when installed (the ``fleet`` extra); the same values
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads

DEDUP_WINDOW = 100_000
SPLIT_BYTES = 64 << 20  # inputs larger than this are split between processes
DECISIONS = ("allow", "allow_confined", "ask", "deny")
#: the fields the report reads: each a string or missing
_TEXT_FIELDS = (
    "record_id", "hostname", "session", "session_id", "ts", "policy_digest", "guard_version",
    "host_agent", "host_agent_version", "type", "decision", "agent", "rule", "source",
)  # fmt: skip


@dataclass
class Machine:
    records: int = 0
    sessions: set[str] = field(default_factory=set)
    last_ts: str = ""
    digest: str | None = None  # the policy digest of its latest record
    digests: dict[str, int] = field(default_factory=dict)
    versions: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)
    violations: int = 0
    unconfined: int = 0
    unverifiable: int = 0

    def merge(self, o: Machine) -> None:
        self.records += o.records
        self.sessions |= o.sessions
        if o.last_ts > self.last_ts:
            self.last_ts, self.digest = o.last_ts, o.digest
        for d, n in o.digests.items():
            self.digests[d] = self.digests.get(d, 0) + n
        self.versions |= o.versions
        self.agents |= o.agents
        self.violations += o.violations
        self.unconfined += o.unconfined
        self.unverifiable += o.unverifiable


@dataclass
class FleetReport:
    """The folded records."""

    records: int = 0
    duplicates: int = 0
    unreadable: int = 0
    machines: dict[str, Machine] = field(default_factory=dict)
    #: (host agent, agent, decision, rule of a deny or ask) -> verdicts: one count per record
    verdicts: dict[tuple[str, str, str, str | None], int] = field(default_factory=dict)
    per_minute: dict[tuple[str, str], int] = field(default_factory=dict)  # (minute, decision)
    unconfined: list[dict[str, Any]] = field(default_factory=list)
    first_error: str | None = None
    #: the keys the MACs are checked with (none: not checked, only the chain keys' form)
    keys: tuple[bytes, ...] = field(default=(), repr=False)
    #: records that do not verify (counted for nothing else), the first ones with where
    unverifiable: int = 0
    unverifiable_records: list[dict[str, Any]] = field(default_factory=list)
    #: records whose MAC was not checked: no key given, or the line before out of reach
    unchecked: int = 0
    #: (machine, uid, log) -> [records, lowest number, highest number] of each chain
    chains: dict[tuple[str, Any, str], list[int]] = field(default_factory=dict)
    _ids: set[str] = field(default_factory=set, repr=False)
    _ring: deque[str] = field(default_factory=lambda: deque(maxlen=DEDUP_WINDOW), repr=False)

    # -- folding ---------------------------------------------------------------------

    def seen(self, rid: str) -> bool:
        """Whether ``rid`` is among the last :data:`DEDUP_WINDOW` ids (and remember it)."""
        ids = self._ids
        if rid in ids:
            return True
        ring = self._ring
        if len(ring) == DEDUP_WINDOW:
            ids.discard(ring[0])
        ring.append(rid)
        ids.add(rid)
        return False

    def add(self, r: dict[str, Any], where: str = "",
            before: Mapping[str, Any] | None = None, log: str = "") -> None:
        """Fold one record in; TypeError (and nothing counted) for a field of the wrong kind.
        ``where`` names its place; for a line of a local audit log ``log``, ``before`` is
        the record of the line before it (None: out of reach)."""
        get = r.get
        for name in _TEXT_FIELDS:
            value = get(name)
            if value is not None and type(value) is not str:
                raise TypeError(f"{name} is not a string")
        rid = get("record_id")
        if rid is not None and self.seen(rid):
            self.duplicates += 1
            return
        host = get("hostname") or "(unknown)"
        m = self.machines.get(host)
        if m is None:
            m = self.machines[host] = Machine()
        problem = self.verify(r, host, before, log)
        if problem is not None:
            self.unverifiable += 1
            m.unverifiable += 1
            if len(self.unverifiable_records) < 100:
                self.unverifiable_records.append(
                    {"hostname": host, "where": where, "problem": problem})
            return
        self.records += 1
        m.records += 1
        session = get("session") or get("session_id")
        if session:
            m.sessions.add(session)
        ts = get("ts") or ""
        digest = get("policy_digest")
        if digest is not None:
            m.digests[digest] = m.digests.get(digest, 0) + 1
            if ts >= m.last_ts:
                m.last_ts, m.digest = ts, digest
        elif ts > m.last_ts:
            m.last_ts = ts
        version = get("guard_version")
        if version is not None and version not in m.versions:
            m.versions.add(version)
        agent_host = get("host_agent")
        if agent_host:
            v = get("host_agent_version")
            m.agents.add(f"{agent_host} {v}" if v else agent_host)
        kind = get("type")
        if kind == "verdict":
            decision = str(get("decision"))
            rule = (get("rule") or "?") if decision == "deny" or decision == "ask" else None
            key = (agent_host or get("source") or "?", get("agent") or "?", decision, rule)
            verdicts = self.verdicts
            verdicts[key] = verdicts.get(key, 0) + 1
            minute = (ts[:16], decision)
            self.per_minute[minute] = self.per_minute.get(minute, 0) + 1
        elif kind == "violation":
            m.violations += 1
        elif kind == "notice" and _unconfined(r):
            m.unconfined += 1
            if len(self.unconfined) < 100:
                self.unconfined.append({"hostname": host, "ts": ts, "event": get("event"),
                                        "message": get("message")})

    def verify(self, r: dict[str, Any], host: str, before: Mapping[str, Any] | None,
               log: str) -> str | None:
        """Why ``r`` does not verify (it counts for nothing), None when it counts."""
        reach = True  # the MAC can be checked (the line it continues is known)
        if "chain_prev" in r:
            pass  # a shipped record: it carries what its MAC continues from
        elif notice_of(r):
            if not self.keys and isinstance(r.get("notice_mac"), str):
                self.unchecked += 1
                return None
            return check_notice(r, list(self.keys))
        elif log and "chain_log" not in r and ("chain_seq" in r or "chain" in r):
            # a local log's line: it continues the line before it (same machine and user)
            seq = r.get("chain_seq")
            link = _link(before) if before is not None else None
            prev = "" if seq == 1 else (
                link[1] if link is not None and type(seq) is int and link[0] == seq - 1
                and link[2:] == (r.get("hostname"), r.get("uid")) else None)
            reach = prev is not None
            r = {**r, "chain_prev": prev if prev is not None else "0" * 64, "chain_log": log}
        problem = malformed(r)
        if problem is not None:
            return problem
        seq, log = r["chain_seq"], r["chain_log"]
        if not self.keys or not reach:
            self.unchecked += 1
        else:
            problem = check_shipped(r, list(self.keys))[1]
            if problem is not None:
                return problem
        chain = self.chains.get((host, r.get("uid"), log))
        if chain is None:
            self.chains[(host, r.get("uid"), log)] = [1, seq, seq]
        else:
            chain[0] += 1
            chain[1], chain[2] = min(chain[1], seq), max(chain[2], seq)
        return None

    def gaps(self) -> list[dict[str, Any]]:
        """The chains with numbers missing between the first and the last record received."""
        return [{"hostname": h, "uid": uid, "log": log, "received": n, "first": lo,
                 "last": hi, "missing": hi - lo + 1 - n}
                for (h, uid, log), (n, lo, hi) in sorted(self.chains.items(), key=str)
                if hi - lo + 1 > n]

    def merge(self, o: FleetReport) -> None:
        self.records += o.records
        self.unverifiable += o.unverifiable
        self.unchecked += o.unchecked
        self.unverifiable_records = (self.unverifiable_records + o.unverifiable_records)[:100]
        for key, (n, lo, hi) in o.chains.items():
            chain = self.chains.get(key)
            if chain is None:
                self.chains[key] = [n, lo, hi]
            else:
                chain[0] += n
                chain[1], chain[2] = min(chain[1], lo), max(chain[2], hi)
        self.duplicates += o.duplicates
        self.unreadable += o.unreadable
        self.first_error = self.first_error or o.first_error
        for host, m in o.machines.items():
            if host in self.machines:
                self.machines[host].merge(m)
            else:
                self.machines[host] = m
        for k, n in o.verdicts.items():
            self.verdicts[k] = self.verdicts.get(k, 0) + n
        for mk, n in o.per_minute.items():
            self.per_minute[mk] = self.per_minute.get(mk, 0) + n
        self.unconfined = (self.unconfined + o.unconfined)[:100]

    # -- what it says ----------------------------------------------------------------

    def _by(self, index: int) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for key, n in self.verdicts.items():
            out[(str(key[index]), key[2])] += n
        return out

    @property
    def by_host_agent(self) -> Counter[tuple[str, str]]:
        return self._by(0)

    @property
    def by_agent(self) -> Counter[tuple[str, str]]:
        return self._by(1)

    @property
    def by_rule(self) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for key, n in self.verdicts.items():
            if key[3] is not None:
                out[(key[3], key[2])] += n
        return out

    @property
    def current_digest(self) -> str | None:
        """The policy digest most machines run last (ties: the latest seen)."""
        votes = Counter(m.digest for m in self.machines.values() if m.digest)
        if not votes:
            return None
        top = max(votes.values())
        tied = [d for d, n in votes.items() if n == top]
        latest = {m.digest: m.last_ts for m in self.machines.values() if m.digest in tied}
        return max(tied, key=lambda d: latest.get(d, ""))

    def stale(self) -> list[str]:
        current = self.current_digest
        return sorted(h for h, m in self.machines.items() if m.digest and m.digest != current)

    def skipped(self) -> list[str]:
        return sorted(h for h, m in self.machines.items() if m.violations)

    def unconfined_hosts(self) -> list[str]:
        return sorted(h for h, m in self.machines.items() if m.unconfined)

    def unverifiable_hosts(self) -> list[str]:
        return sorted(h for h, m in self.machines.items() if m.unverifiable)

    def findings(self) -> bool:
        return bool(self.stale() or self.skipped() or self.unconfined_hosts()
                    or self.unverifiable or self.gaps())

    def sessions(self) -> int:
        return sum(len(m.sessions) for m in self.machines.values())

    def to_json(self) -> dict[str, Any]:
        current = self.current_digest
        return {
            "records": self.records,
            "duplicates": self.duplicates,
            "unreadable_lines": self.unreadable,
            "machines": [
                {"hostname": h, "records": m.records, "sessions": len(m.sessions),
                 "last_seen": m.last_ts, "policy_digest": m.digest,
                 "stale_policy": bool(m.digest and m.digest != current),
                 "policy_digests": dict(m.digests), "guard_versions": sorted(m.versions),
                 "host_agents": sorted(m.agents), "monitor_violations": m.violations,
                 "confinement_unavailable": m.unconfined,
                 "unverifiable_records": m.unverifiable}
                for h, m in sorted(self.machines.items())
            ],
            "sessions": self.sessions(),
            "current_policy_digest": current,
            "stale_policy": self.stale(),
            "hooks_skipped": self.skipped(),
            "confinement_unavailable": self.unconfined_hosts(),
            "unconfined_notices": self.unconfined,
            "macs_checked": bool(self.keys),
            "unchecked_records": self.unchecked,
            "unverifiable_records": self.unverifiable,
            "unverifiable_hosts": self.unverifiable_hosts(),
            "unverifiable": self.unverifiable_records,
            "chain_gaps": self.gaps(),
            "decisions_by_host_agent": _nest(self.by_host_agent),
            "decisions_by_agent": _nest(self.by_agent),
            "top_rules": [{"rule": rule, "decision": d, "count": n}
                          for (rule, d), n in self.by_rule.most_common(20)],
            "decisions_over_time": [{"start": start, **counts}
                                    for start, counts in self.timeline()],
        }

    def timeline(self, bars: int = 48) -> list[tuple[str, dict[str, int]]]:
        """The per-minute counts folded into at most ``bars`` equal periods."""
        minutes = sorted({m for m, _ in self.per_minute})
        if not minutes:
            return []
        step = max(1, -(-len(minutes) // bars))
        out: list[tuple[str, dict[str, int]]] = []
        for i in range(0, len(minutes), step):
            chunk = minutes[i : i + step]
            counts = {d: sum(self.per_minute.get((m, d), 0) for m in chunk) for d in DECISIONS}
            out.append((chunk[0], counts))
        return out


def _unconfined(r: dict[str, Any]) -> bool:
    event = str(r.get("event") or "")
    message = str(r.get("message") or "").lower()
    return "unconfined" in event or ("landlock" in message and "unavailable" in message)


def _nest(c: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (key, decision), n in sorted(c.items()):
        out.setdefault(key, {})[decision] = n
    return out


# -- reading ---------------------------------------------------------------------------


def inputs(path: Path) -> list[Path]:
    """The files to read: ``path`` itself, or every JSON-lines log below it."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise GuardError(f"--fleet {path}: no such file or directory; give the central"
                         " rsyslog's JSON lines or a directory of audit logs")
    found = [p for p in path.rglob("*") if p.is_file() and (p.suffix == ".jsonl" or (
        ".jsonl." in p.name and p.name.rsplit(".", 1)[1].isdigit()))]
    if not found:
        raise GuardError(f"--fleet {path}: no *.jsonl files in it")
    return sorted(found)


#: bytes before a share's start whose record ids seed its duplicate window (a resent record
#: lands soon after the first copy: nothing is written while the collector is down)
SEED_BYTES = 16 << 20


def _seed(report: FleetReport, f: IO[bytes], start: int) -> dict[str, Any] | None:
    """Remember the ids of the records just before ``start`` (read by the share before);
    the record of the last line before it (what a local log's next line continues)."""
    f.seek(max(0, start - SEED_BYTES))
    if f.tell():
        f.readline()
    pos = f.tell()
    last = None
    for line in f:
        if pos >= start:
            break
        pos += len(line)
        try:
            r = _loads(line)
            rid = r.get("record_id")
        except (ValueError, AttributeError):
            last = None
            continue
        last = r
        if isinstance(rid, str):
            report.seen(rid)
    return last


#: A line's own number and MAC in its log's chain, and the machine and user that wrote it.
Link = tuple[int, str, Any, Any]


def _link(r: Mapping[str, Any]) -> Link | None:
    """A line's :data:`Link`, None when it has none."""
    seq, mac = r.get("chain_seq"), r.get("chain")
    if type(seq) is not int or not isinstance(mac, str):
        return None
    return seq, mac, r.get("hostname"), r.get("uid")


def _log_name(path: str) -> str:
    """The chain a local log's file belongs to: its name less a rotation suffix (.N)."""
    name = os.path.basename(path)
    base, _, tail = name.rpartition(".")
    return base if tail.isdigit() and base.endswith(".jsonl") else name


def _fold(report: FleetReport, f: IO[bytes], start: int, end: int, name: str) -> None:
    before = _seed(report, f, start) if start else None
    if start:  # a line is read by the share it starts in
        f.seek(start - 1)
        f.readline()
    log = _log_name(name)
    pos = f.tell()
    for line in f:
        if pos >= end:
            break
        at, pos = pos, pos + len(line)
        if len(line) < 3 and not line.strip():  # a blank line (no copy of a long one)
            continue
        try:
            r = _loads(line)
            if not isinstance(r, dict):
                raise ValueError("not an object")
        except ValueError:
            report.unreadable += 1
            report.first_error = report.first_error or (
                f"{name}: the line at byte {at} is not a JSON record; fix or remove it")
            before = None
            continue
        try:
            report.add(r, f"{name}: byte {at}", before, log)
        except (TypeError, ValueError, AttributeError):  # a field of the wrong kind
            report.unreadable += 1
            report.first_error = report.first_error or (
                f"{name}: the record at byte {at} has a field of the wrong kind; fix or remove it")
        before = r


def _shares(files: list[Path], workers: int) -> list[list[tuple[Path, int, int]]]:
    """Each worker's (file, start, end) pieces: big files split by bytes, others whole."""
    pieces: list[tuple[Path, int, int]] = []
    for p in files:
        size = p.stat().st_size
        n = workers if size > SPLIT_BYTES else 1
        step = -(-size // n) if size else 0
        pieces += [(p, i * step, min(size, (i + 1) * step)) for i in range(n)] if size else []
    shares: list[list[tuple[Path, int, int]]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for piece in sorted(pieces, key=lambda x: x[1] - x[2]):
        i = loads.index(min(loads))
        shares[i].append(piece)
        loads[i] += piece[2] - piece[1]
    return [s for s in shares if s]


def _run_share(share: list[tuple[Path, int, int]], keys: tuple[bytes, ...] = ()
               ) -> FleetReport:
    report = FleetReport(keys=keys)
    for path, start, end in share:
        with open(path, "rb") as f:
            _fold(report, f, start, end, str(path))
    return report


def build(path: Path, workers: int | None = None, keys: tuple[bytes, ...] = ()
          ) -> FleetReport:
    """Read ``path`` (see :func:`inputs`) into one :class:`FleetReport`, checking MACs with
    ``keys`` (the machines' audit keys; none: only the chain keys' form is checked)."""
    files = inputs(path)
    workers = workers or min(os.cpu_count() or 1, 8)
    total = sum(p.stat().st_size for p in files)
    shares = _shares(files, workers if total > SPLIT_BYTES else 1)
    if len(shares) <= 1:
        return _run_share(shares[0], keys) if shares else FleetReport(keys=keys)

    with multiprocessing.get_context("fork").Pool(len(shares)) as pool:
        parts = pool.starmap(_run_share, [(share, keys) for share in shares])
    out = parts[0]
    for p in parts[1:]:
        out.merge(p)
    return out


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of ``path`` (see :func:`inputs`), in file order (tests, exports)."""
    for p in inputs(path):
        with open(p, "rb") as f:
            for line in f:
                if line.strip():
                    r = _loads(line)
                    if isinstance(r, dict):
                        yield r
