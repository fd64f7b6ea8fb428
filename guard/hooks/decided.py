"""Finding guard's pre-tool decision for a tool call in the audit log (for
:mod:`guard.hooks.missed`), believing only records guard's writer chained.

A call that ran is paired with exactly one decision under which it could run: an
``allow`` or ``allow_confined`` the host was told (or an ``ask``, which the user may
approve in the host), never a ``deny``. It is matched by host, host session id and
``tool_use_id`` where the host gives one (the id is the call's own); else (Gemini CLI
sends none) by tool name and :func:`input_digest` of its input (``input_sha256`` in the
verdict record), and then each decision pairs with one call only: the call *claims* the
record (a file created with ``O_EXCL`` under the host session's directory in
``<data>/missed``, no lock), so a repeated call with the same input whose pre-tool hook
did not run finds no unclaimed decision and is reported. Records are looked for within
the last :data:`TAIL` bytes of the project's log (and of other projects' recent logs).
A matching record counts only when its chain MAC verifies under the installation key
(:func:`untrusted`); the others are kept in :class:`Trust` to be reported as tampering.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard.audit import AuditError
from guard.audit.chain import _CHAIN, _chain_of, _mac, load_key
from guard.audit.logfile import rotated

#: The kind of the violation record of a tool that ran without guard's decision.
KIND = "hook_missed"
#: How much of the end of the audit log is searched for a call's decision record.
TAIL = 2 << 20


def input_digest(tool_input: Mapping[str, Any]) -> str:
    """A digest of a tool input, independent of key order and JSON spacing."""
    text = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _tail(path: Path, size: int = TAIL) -> bytes:
    """The last ``size`` bytes of the log (with the end of its last rotated part if short)."""
    out = b""
    for part in [*rotated(path)[-1:], path]:
        try:
            with open(part, "rb") as f:
                f.seek(0, os.SEEK_END)
                end = f.tell()
                f.seek(max(0, end - size))
                out = (out + f.read())[-size:]
        except FileNotFoundError:
            continue
    return out


class Trust:
    """The installation's audit key for one check, and the records it could not trust.

    A record counts as guard's decision only when its chain MAC verifies under the key
    (:func:`untrusted`): the audit log is in guard's data directory, but a record written
    there by anything else (a forged ``allow`` or ``hook_missed``) must not stand in for
    a decision. Records that would have counted and do not are kept in :attr:`forged`
    (their line's start, and why), to be reported as tampering."""

    def __init__(self) -> None:
        self.key: bytes | None
        self.why_no_key = ""
        try:
            self.key = load_key(create=False)
        except AuditError as exc:
            self.key, self.why_no_key = None, str(exc)
        self.forged: list[dict[str, Any]] = []

    def note(self, log: Path, rec: Mapping[str, Any], why: str) -> None:
        if len(self.forged) < 20:
            self.forged.append({"log": str(log), "record_id": rec.get("record_id"),
                                "decision": rec.get("decision"), "kind": rec.get("kind"),
                                "chain_seq": rec.get("chain_seq"), "problem": why})


def untrusted(data: bytes, start: int, end: int, key: bytes | None) -> str | None:
    """Why the line ``data[start:end]`` is not a record guard's writer chained under
    ``key``; None when its MAC verifies. Only this line and the end of the one before it
    (whose MAC this one continues, or none for record 1) are read: no walk of the log."""
    found = _chain_of(data[start:end])
    if found is None:
        return "no chain MAC: guard's writer did not write it"
    seq, mac, body = found
    prev = b""
    if seq > 1:
        if start == 0:
            return f"record {seq - 1}, which it continues, is not before it"
        pstart = data.rfind(b"\n", 0, start - 1) + 1
        before = _CHAIN.search(data, pstart, start - 1)  # a cut first line keeps its end
        if before is None or int(before.group(1)) != seq - 1:
            return f"record {seq - 1}, which it continues, is not before it"
        prev = before.group(2)
    if key is None:
        return "no audit key to check it with"

    if not hmac.compare_digest(_mac(key, seq, prev, body), mac):
        return "the MAC does not match: forged or edited"
    return None


def _lines_with(data: bytes, needle: bytes) -> list[tuple[dict[str, Any], int, int]]:
    found: list[tuple[dict[str, Any], int, int]] = []
    at = data.find(needle)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        try:
            rec = json.loads(data[start:end])
        except ValueError:
            rec = None
        if isinstance(rec, dict):
            found.append((rec, start, end))
        at = data.find(needle, end)
    return found


#: What a host was told when a call could run after it (``answered``, else ``decision``):
#: an ``ask`` runs when the user approves it in the host; a ``deny`` never pairs with a
#: call that ran.
RAN = frozenset({"allow", "allow_confined", "ask"})


def could_run(rec: Mapping[str, Any]) -> bool:
    """Whether a hook record stands for a call that ran: a decision the host was told that
    lets it run, or a ``hook_missed`` record of it (it is reported once)."""
    if rec.get("kind") == KIND:
        return True
    told = rec.get("answered") if rec.get("answered") is not None else rec.get("decision")
    return told in RAN


def claim(claims: Path, line: bytes) -> bool:
    """Claim the decision record ``line`` for one call (False: another call has it)."""
    claims.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = hashlib.sha256(line).hexdigest()[:40]
    try:
        fd = os.open(claims / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _needle(key: str, value: str) -> bytes:
    return f'"{key}": {json.dumps(value, ensure_ascii=False)}'.encode("utf-8", "surrogateescape")


#: Other projects' logs searched when the call's own holds no record (a call whose cwd
#: was in another repository was recorded there): written to within this many seconds.
OTHER_LOGS_AGE = 24 * 3600
OTHER_LOGS_MAX = 8


def decided(
    log: Path,
    host: str,
    session: str | None,
    tool_use_id: str | None,
    tool_name: str,
    tool_input: Mapping[str, Any] | None,
    trust: Trust | None = None,
    claims: Path | None = None,
) -> bool:
    """Whether the log (else another project's recent log) holds guard's pre-tool decision
    under which this call could run, or already a ``hook_missed`` record of it (each is
    reported once). Only records whose chain MAC verifies count; the others that would
    have are noted in ``trust`` (:class:`Trust`). Without a ``tool_use_id`` a decision
    pairs with one call: it is claimed in ``claims`` (the host session's directory; None:
    matched by input alone, as a look that changes nothing)."""
    trust = trust if trust is not None else Trust()
    if _decided_in(log, host, session, tool_use_id, tool_name, tool_input, trust, claims):
        return True
    try:
        others = [(e.stat().st_mtime, Path(e.path)) for e in os.scandir(log.parent)
                  if e.name.endswith(".jsonl") and e.path != str(log)]
    except OSError:
        return False
    recent = sorted((o for o in others if o[0] > time.time() - OTHER_LOGS_AGE), reverse=True)
    return any(_decided_in(p, host, session, tool_use_id, tool_name, tool_input, trust, claims)
               for _, p in recent[:OTHER_LOGS_MAX])


def _decided_in(
    log: Path,
    host: str,
    session: str | None,
    tool_use_id: str | None,
    tool_name: str,
    tool_input: Mapping[str, Any] | None,
    trust: Trust,
    claims: Path | None = None,
) -> bool:
    data = _tail(log)
    if not data:
        return False

    def ours(rec: Mapping[str, Any]) -> bool:
        # a decision that let the call run, or this call already reported as missed (by the
        # other way of seeing it); a deny is never the decision of a call that ran
        return ((rec.get("type") == "verdict" or rec.get("kind") == KIND)
                and rec.get("source") == "hook" and rec.get("host") == host
                and rec.get("session_id") == session and could_run(rec))

    def paired(start: int, end: int) -> bool:
        # matched by input alone: the decision pairs with this call only if no other has it
        return claims is None or claim(claims, data[start:end])

    forged: list[tuple[dict[str, Any], str]] = []

    def trusted(rec: dict[str, Any], start: int, end: int) -> bool:
        # checked only for the records that would count: one HMAC each, no walk of the log
        why = untrusted(data, start, end, trust.key)
        if why is None:
            return True
        forged.append((rec, why if trust.key is not None or not trust.why_no_key
                       else f"{why} ({trust.why_no_key})"))
        return False

    def result(found: bool) -> bool:
        # a forged record is reported when it was all that claimed the decision (then the
        # genuine hook_missed record written with the report answers the next look)
        if not found:
            for rec, why in forged:
                trust.note(log, rec, why)
        return found

    if tool_use_id:
        return result(any([ours(r) and trusted(r, a, b)
                           for r, a, b in _lines_with(data, _needle("tool_use_id", tool_use_id))]))
    if tool_input is None:
        return False
    digest = input_digest(tool_input)
    # the newest first: the decision made just before this call ran
    for r, a, b in reversed(_lines_with(data, _needle("input_sha256", digest))):
        if ours(r) and r.get("tool_name") == tool_name and trusted(r, a, b) and paired(a, b):
            return result(True)
    # a call guard ran confined: the host reports the rewritten input
    for rec, a, b in reversed(_lines_with(data, b'"updated_input": ')):
        updated = rec.get("updated_input")
        if (ours(rec) and rec.get("tool_name") == tool_name and isinstance(updated, dict)
                and all(tool_input.get(k) == v for k, v in updated.items())
                and trusted(rec, a, b) and paired(a, b)):
            return result(True)
    return result(False)
