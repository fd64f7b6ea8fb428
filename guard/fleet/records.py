"""The fleet envelope of an audit record (audit schema version 1, docs/fleet.md).

:func:`stamp` adds, where a record is made, what a security team needs to join records
of many machines: a record id unique across machines (UUIDv7: 48 bits of milliseconds,
74 random bits), the host name, the user, the session, guard's version, the digest of the
policy in force and of each of its files, and the host agent (and its version) where
known. Stamping is cheap (a few microseconds): the process's identity is read once.
"""

from __future__ import annotations

import os
import pwd
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from guard.audit.logfile import now_iso
from guard.sha import sha256
from guard.version import __version__

if TYPE_CHECKING:
    from guard.decide import Guard

AUDIT_SCHEMA = 1

#: every record carries these keys (None where a value is not known)
FLEET_KEYS = (
    "audit_schema", "record_id", "hostname", "user", "uid", "session", "guard_version",
    "policy_digest", "policy_files", "host_agent", "host_agent_version",
)  # fmt: skip

_identity: dict[str, Any] | None = None


def identity() -> dict[str, Any]:
    """This process's host name, user and guard version (read once per process)."""
    global _identity
    if _identity is None:
        uid = os.getuid()
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)
        _identity = {"hostname": os.uname().nodename, "user": user, "uid": uid,
                     "guard_version": __version__}
    return _identity


def record_id() -> str:
    """A UUIDv7 (RFC 9562): time-ordered, unique across machines."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def policy_fields(g: Guard | None) -> dict[str, Any]:
    """The digest of the policy in force and of each file it was read from (kept on the
    Guard: computed once per loaded policy)."""
    if g is None:
        return {"policy_digest": None, "policy_files": []}
    cached = g.fleet_fields
    if cached is None:
        files = [
            {"file": name, "layer": "policy",
             "sha256": sha256(g.loaded.texts.get(name, "").encode()).hexdigest()}
            for name in g.loaded.files
        ]
        if g.managed is not None:
            files += [{"file": name, "layer": "managed", "sha256": digest}
                      for name, digest in g.managed.file_digests()]
        cached = {"policy_digest": "sha256:" + g.digest, "policy_files": files}
        g.fleet_fields = cached
    return {"policy_digest": cached["policy_digest"],
            "policy_files": [dict(f) for f in cached["policy_files"]]}


def stamp(
    record: dict[str, Any],
    g: Guard | None,
    *,
    session: str | None = None,
    host_agent: str | None = None,
    host_agent_version: str | None = None,
) -> dict[str, Any]:
    """Add the fleet fields to ``record`` (in place; returned). Values the record already
    has for ``ts``, ``session``, ``host_agent`` and ``host_agent_version`` are kept."""
    record.setdefault("ts", now_iso())
    record["audit_schema"] = AUDIT_SCHEMA
    record["record_id"] = record_id()
    record.update(identity())
    if record.get("session") is None:
        record["session"] = session
    record["guard_version"] = identity()["guard_version"]
    record.update(policy_fields(g))
    if record.get("host_agent") is None:
        record["host_agent"] = host_agent
    if record.get("host_agent_version") is None:
        record["host_agent_version"] = host_agent_version
    return record


def missing(record: Mapping[str, Any]) -> list[str]:
    """The fleet keys ``record`` lacks (a test's and the report's check)."""
    return [k for k in FLEET_KEYS if k not in record]
