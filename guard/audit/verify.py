"""Checking the audit chain: a local audit log (every record's MAC against the one before
it, wherever that stands) and the records a collector received (`guard audit verify
--shipped`). Writing the chain is guard.audit.chain's and guard.audit.logfile's; this
module only reads."""

from __future__ import annotations

import hmac
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guard.audit import AuditError
from guard.audit.chain import NOTICE_MAC, SHIPPED_CHAIN_KEYS, _chain_of, _mac, notice_mac
from guard.audit.logfile import _open_parts, encode, rotated


@dataclass
class Finding:
    """A line of a log that breaks the chain (or, as a note, one that needs no alarm)."""

    path: Path
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}" if self.line else (
            f"{self.path}: {self.problem}"
        )


@dataclass
class Verification:
    """What :func:`verify` found: the records read, the breaks, the notes, the head."""

    records: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    head: tuple[int, str] | None = None  # the last record's number and MAC

    @property
    def intact(self) -> bool:
        return not self.findings


def parse_head(text: str) -> tuple[int, str]:
    """``N:MAC`` (what ``guard audit verify`` prints as the head) as (N, MAC)."""
    number, _, mac = text.strip().partition(":")
    if not number.isdigit() or int(number) < 1 or not re.fullmatch(r"[0-9a-f]{64}", mac):
        raise AuditError(
            f"{text!r} is not a head: give RECORD:MAC as `guard audit verify` printed it,"
            " e.g. 42:3f1c...(64 hex digits)"
        )
    return int(number), mac


def _lines(handle: Any) -> Iterator[tuple[int, bytes | None]]:
    """(line number, the line without its newline, or None for an incomplete last line)."""
    handle.seek(0)
    for number, raw in enumerate(handle, start=1):
        yield number, (raw[:-1] if raw.endswith(b"\n") else None)


def verify(path: Path, key: bytes, anchor: tuple[int, str] | None = None) -> Verification:
    """Check the chain of the log at ``path`` (rotated parts first) with ``key``.

    Each finding names its file and line: a record whose MAC does not match (edited or
    forged), a line without the chain (not written by guard's writer), records missing
    before a line (removed), a record out of its place (moved or repeated), a chain that
    starts again after a chained record. Each record's MAC is checked against its
    predecessor wherever that stands in the log, so a moved record is named once, as
    moved. ``anchor`` (a head printed by an earlier run): the log must still hold that
    record with that MAC, so that records cut from its end are found too. Raises
    :class:`AuditError` when the log cannot be read.
    """
    if not path.exists() and not rotated(path):
        raise AuditError(
            f"no audit log at {path} (nor rotated parts {path.name}.N); a project's log is"
            " <data>/audit/<project>.jsonl, and `guard doctor` names this project's"
        )
    out = Verification()
    handles = _open_parts(path)
    try:
        # first pass: every chained record's MAC, by (chain, number): a writer starts a new
        # chain (at record 1) after a last line that is not chained
        macs: dict[tuple[int, int], bytes] = {}
        chain, last = 0, 0
        for _part, handle in handles:
            for _number, line in _lines(handle):
                found = None if line is None else _chain_of(line)
                if found is not None:
                    if found[0] == 1 and last:
                        chain += 1
                    macs.setdefault((chain, found[0]), found[1])
                    last = found[0]
        chain, last = 0, 0  # last: the previous chained record's number (0: none yet)
        started = unchained = False
        for part, handle in handles:
            for number, line in _lines(handle):
                if line is None:
                    out.notes.append(Finding(part, number, "an incomplete last line (a writer"
                                             " killed inside its write; the next record"
                                             " removes it)"))  # fmt: skip
                    continue
                out.records += 1
                found = _chain_of(line)
                if found is None:
                    out.findings.append(Finding(part, number, "no chain MAC: guard's writer did"
                                                " not write this line (forged, or written"
                                                " before records were chained)"))  # fmt: skip
                    started = unchained = True
                    continue
                seq, mac, body = found
                problems = []
                restart = seq == 1 and last > 0
                if restart:
                    chain += 1
                if restart:
                    if not unchained:  # the writer starts again only after such a line
                        problems.append(
                            f"the chain starts again here after record {last}: the"
                            " records before it were cut or replaced"
                        )
                elif seq <= last:
                    problems.append(
                        f"record {seq} comes after record {last}: records were moved or"
                        " repeated"
                    )
                elif seq > last + 1:
                    if seq - last - 1 > len(macs):  # they cannot all be elsewhere in the log
                        gone = [last + 1, seq - 1]
                    else:
                        gone = [k for k in range(last + 1, seq) if (chain, k) not in macs]
                    if gone:
                        which = (
                            f"record {gone[0]} is" if len(gone) == 1
                            else f"records {gone[0]} to {gone[-1]} are"
                        )  # fmt: skip
                        where = "at the start of the log" if not started else "before this line"
                        problems.append(
                            f"{which} missing {where} (removed, or a rotated part deleted)"
                        )
                pred = b"" if seq == 1 else macs.get((chain, seq - 1))
                if pred is not None and not hmac.compare_digest(_mac(key, seq, pred, body), mac):
                    problems.append(
                        "the MAC does not match: the record was edited or forged"
                    )
                elif pred is None and not problems:
                    problems.append(f"record {seq - 1}, which this one follows, is missing")
                for problem in problems:
                    out.findings.append(Finding(part, number, problem))
                if anchor is not None and seq == anchor[0] and mac.decode() != anchor[1]:
                    out.findings.append(Finding(part, number, f"record {seq} does not carry"
                                                " the anchored MAC: the log was replaced"))
                last = 1 if seq == 1 else max(last, seq)
                started, unchained = True, False
                out.head = (seq, mac.decode())
    except OSError as exc:
        raise AuditError(f"cannot read audit log {path}: {exc.strerror or exc}") from exc
    finally:
        for _, handle in handles:
            handle.close()
    if anchor is not None and (chain, anchor[0]) not in macs:
        ends = out.head[0] if out.head else 0
        out.findings.append(Finding(
            path, 0, f"the anchored head {anchor[0]}:{anchor[1][:12]}... is not in the log (it"
            f" ends at record {ends}): records were cut from its end, or it was replaced",
        ))  # fmt: skip
    return out


_HEX64 = re.compile(r"[0-9a-f]{64}")


def shipped_record(line: bytes) -> dict[str, Any] | None:
    """The record a collector received, from one line of its file: the JSON object alone
    (``%msg%``), or a whole RFC 5424 message whose body is it. None when the line holds
    no JSON object."""
    start = line.find(b"{")
    if start < 0:
        return None
    try:
        value = json.loads(line[start:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def malformed(record: Mapping[str, Any]) -> str | None:
    """Why a shipped record's chain keys cannot be checked (missing or malformed: forged),
    None when they are well formed (its MAC is still to be checked: :func:`check_shipped`)."""
    get = record.get  # one call per record of a fleet report: kept cheap
    seq, mac, prev, log = get("chain_seq"), get("chain"), get("chain_prev"), get("chain_log")
    if seq is None and mac is None and prev is None and log is None:
        return ("no chain keys: guard's writer did not write this record (forged, or"
                " shipped by a guard that did not chain records)")  # fmt: skip
    if (type(seq) is not int or seq < 1
            or type(mac) is not str or len(mac) != 64 or not _HEX64.fullmatch(mac)
            or type(prev) is not str
            or not (prev == "" if seq == 1 else len(prev) == 64 and _HEX64.fullmatch(prev))
            or type(log) is not str or not log):
        return "malformed chain keys (chain_seq, chain, chain_prev, chain_log): forged"
    return None


def check_shipped(
    record: dict[str, Any], keys: list[bytes]
) -> tuple[tuple[Any, Any, str, int, str, str] | None, str | None]:
    """Check one shipped record's MAC with any of ``keys``.

    Returns ``(link, None)`` when it verifies, where ``link`` is (host, uid, log, number,
    MAC, previous MAC); ``(None, problem)`` when it does not (or carries no chain)."""
    problem = malformed(record)
    if problem is not None:
        return None, problem
    seq, mac, prev, log = (record[k] for k in SHIPPED_CHAIN_KEYS)
    rest = {k: v for k, v in record.items() if k not in SHIPPED_CHAIN_KEYS}
    if "truncated" in rest:
        return None, ("shipped shortened (over the message limit): its MAC covers the whole"
                      " record, which only the local log keeps; check it there")  # fmt: skip
    body = encode(rest)[:-1]
    for key in keys:
        if hmac.compare_digest(_mac(key, seq, prev.encode(), body), mac.encode()):
            return (record.get("hostname"), record.get("uid"), log, seq, mac, prev), None
    return None, ("the MAC does not match: the record was edited or forged (or the key of"
                  " the machine and user that wrote it was not given)")  # fmt: skip


def notice_of(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` claims to be a shipper's notice (no chain keys, ``source: ship``):
    it counts only when its signature verifies (:func:`check_notice`)."""
    return record.get("source") == "ship" and all(k not in record for k in SHIPPED_CHAIN_KEYS)


def check_notice(record: Mapping[str, Any], keys: list[bytes]) -> str | None:
    """None when a shipper's notice carries guard's signature under one of ``keys``; else
    why it does not count (a record with no chain keys that is not guard's own notice)."""
    mac = record.get(NOTICE_MAC)
    if not isinstance(mac, str) or not _HEX64.fullmatch(mac):
        return ("no chain keys and no notice signature: guard's writer did not write this"
                " record, nor did guard's shipper sign it (forged)")
    if any(hmac.compare_digest(notice_mac(key, record), mac) for key in keys):
        return None
    return ("a shipper's notice whose signature does not match: forged or edited (or the"
            " key of the machine and user that sent it was not given)")


def verify_shipped(
    path: Path, keys: list[bytes], host: str | None = None
) -> Verification:
    """Check the records a collector received (``path``: one record a line, as the
    rsyslog configuration of docs/fleet.md writes them) with ``keys``.

    Each shipped record carries its local line's chain keys plus the MAC it continues
    from and its log's name (:data:`SHIPPED_CHAIN_KEYS`), so each is checked on its own
    (edited or forged records are named), then each chain (machine, user, log) is
    checked for records missing between those received, records that do not continue
    their predecessor, and a chain that started again. Records received twice (a
    resend) are a note. ``host``: check that machine's records only. Raises
    :class:`AuditError` when the file cannot be read.
    """
    out = Verification()
    chains: dict[tuple[Any, Any, str], dict[int, tuple[str, str, int]]] = {}
    skipped = resent = 0
    claimed: dict[tuple[Any, Any, str], set[int]] = {}  # numbers of records named as bad
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise AuditError(f"cannot read shipped records {path}: {exc.strerror or exc}") from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            record = shipped_record(line)
            if record is None:
                out.findings.append(Finding(path, number, "not a JSON record"))
                continue
            if host is not None and record.get("hostname") != host:
                skipped += 1
                continue
            out.records += 1
            if notice_of(record):
                problem = check_notice(record, keys)
                if problem is None:
                    out.notes.append(Finding(path, number, "a shipper's notice (made by the"
                                             " shipper, in no local log, so not chained;"
                                             " its signature verifies)"))
                else:
                    out.findings.append(Finding(path, number, problem))
                continue
            link, problem = check_shipped(record, keys)
            if link is None:
                out.findings.append(Finding(path, number, str(problem)))
                seq, log = record.get("chain_seq"), record.get("chain_log")
                if isinstance(seq, int) and isinstance(log, str):  # named here, not "missing"
                    claimed.setdefault((record.get("hostname"), record.get("uid"), log),
                                       set()).add(seq)
                continue
            h, uid, log, seq, mac, prev = link
            seen = chains.setdefault((h, uid, log), {})
            before = seen.get(seq)
            if before is not None:
                if before[0] == mac:
                    resent += 1
                    continue
                out.findings.append(Finding(path, number, (
                    f"a second record {seq} of {log} on {h} (the first is line {before[2]}):"
                    " its chain started again, so its local log was removed or replaced")))
                continue
            seen[seq] = (mac, prev, number)
    for (h, uid, log), seen in chains.items():
        numbers = sorted(seen)
        if numbers[0] > 1:
            out.notes.append(Finding(path, seen[numbers[0]][2], (
                f"{log} on {h} (uid {uid}) starts at record {numbers[0]}: earlier records"
                " were received elsewhere (or before this file)")))
        for a, b in itertools.pairwise(numbers):
            if b > a + 1:
                # the numbers between, less those of records already named as bad
                named = sorted(n for n in claimed.get((h, uid, log), ()) if a < n < b)
                low = a + 1
                for n in [*named, b]:
                    if n > low:
                        which = f"record {low}" if n == low + 1 else f"records {low} to {n - 1}"
                        out.findings.append(Finding(path, seen[b][2], (
                            f"{which} of {log} on {h} (uid {uid}) missing before this line:"
                            " not received (not shipped, lost, or removed)")))
                    low = n + 1
            elif seen[b][1] != seen[a][0]:
                out.findings.append(Finding(path, seen[b][2], (
                    f"record {b} of {log} on {h} does not continue record {a} (line"
                    f" {seen[a][2]}): one of them is from another chain")))
    if resent:
        out.notes.append(Finding(path, 0, f"{resent} records received more than once (a"
                                 " resend after a lost connection: identical, same MAC)"))
    if skipped:
        out.notes.append(Finding(path, 0, f"{skipped} records of other machines not checked"))
    return out
