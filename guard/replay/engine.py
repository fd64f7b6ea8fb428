"""Replay: find the transcripts, read their calls, decide each through the gate.

Every call is decided by :class:`guard.gate.Gate` with the chosen agent, no audit
sink (the user's audit log is never written) and no mode lookup (no session state
is read or written), against the cwd the call had. A cwd that no longer exists is
still used as the call's cwd (paths resolve through its nearest existing ancestor,
as guard canonicalises any path) and the result says so in ``resolved``.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from guard.replay.model import (
    ReplayCall,
    ReplayResult,
    TranscriptError,
    first_record,
    load_document,
)
from guard.replay.readers import HOSTS, READERS

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.effects import ToolCall
    from guard.gate import Gate

#: Names of transcript files looked for under a directory argument.
PATTERNS = ("*.jsonl", "*.json")


def transcripts(args: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files to replay: each file given, and every *.jsonl / *.json under a directory."""
    out: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found = sorted({f for pat in PATTERNS for f in p.rglob(pat) if f.is_file()})
            if not found:
                raise TranscriptError(f"{p}: no transcript (*.jsonl, *.json) under it")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        elif p.exists():
            raise TranscriptError(f"{p}: not a file or a directory")
        else:
            raise TranscriptError(f"{p}: no such file or directory")
    return out


def _first(path: Path) -> dict[str, object] | None:
    """The first JSON object of a JSONL file, or the whole document of a .json file."""
    try:
        with path.open(encoding="utf-8") as f:
            head = f.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"{path}: cannot read it: {exc}") from None
    if head.strip() in ("{", "[") or path.suffix == ".json":
        _, doc = load_document(path)
        return doc if isinstance(doc, dict) else None
    return first_record(path)


def detect(path: Path) -> str:
    """The host whose transcript ``path`` is, by its first record."""
    first = _first(path)
    if first is None:
        raise TranscriptError(f"{path}:1: empty: no record to recognise the format by")
    for host, reader in READERS.items():
        if reader.sniff(path, first):
            return host
    raise TranscriptError(
        f"{path}:1: unknown transcript format (expected one of: {', '.join(HOSTS)});"
        " name it with --host"
    )


def check_host(host: str) -> None:
    """Refuse a ``--host`` no reader has (raises TranscriptError)."""
    if host != "auto" and host not in READERS:
        raise TranscriptError(f"--host {host!r}: use auto or one of {', '.join(HOSTS)}")


def calls(paths: Iterable[Path], host: str = "auto") -> Iterator[ReplayCall]:
    """Every tool call of every transcript, in order, one line at a time."""
    check_host(host)
    for path in paths:
        yield from READERS[detect(path) if host == "auto" else host].read(path)


def nearest_existing(path: str) -> str:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return str(p)


@dataclass
class Replayer:
    """Decides replayed calls: one policy load and one gate per cwd."""

    agent: str = "plan"
    policy: str | None = None
    #: Verdicts of identical calls (same tool, input and cwd) decided before: a replay reads
    #: the disk as it is now, so the same call gets the same verdict. Bounded (LRU).
    cache_size: int = 4096
    _gates: dict[str | None, tuple[Gate, str | None]] = field(default_factory=dict)
    _told: dict[str | None, str] = field(default_factory=dict)
    _seen: OrderedDict[tuple[str, str, str, str | None], ReplayResult] = field(
        default_factory=OrderedDict
    )

    def _gate(self, cwd: str | None) -> tuple[Gate, str | None]:
        found = self._gates.get(cwd)
        if found is None:
            from guard.decide import Guard
            from guard.gate import Gate

            resolved = None
            if cwd is not None and not os.path.isdir(cwd):
                resolved = (f"cwd {cwd} no longer exists: paths resolved through"
                            f" {nearest_existing(cwd)}, its nearest existing ancestor")
            g: Guard = Guard.load(self.policy, cwd=cwd)
            g.agent(self.agent)  # an unknown agent: bad input, before any call
            found = (Gate(guard=g, agent=self.agent, env={}, mode=None, sink=None,
                          source="replay", refusal=self._refusal), resolved)
            self._gates[cwd] = found
        return found

    def _refusal(self, call: ToolCall) -> str:
        """Where a plan goes, for a replayed refusal: the plan directory of the call's cwd.

        A past session's state is not today's, so no live session is consulted; the
        sentence is the same for every call of one cwd, so it is worked out once.
        """
        told = self._told.get(call.cwd)
        if told is None:
            from guard.planning.runtime import plan_refusal

            told = self._told[call.cwd] = plan_refusal(call.cwd, no_session=True)
        return told

    def decide(self, index: int, call: ReplayCall) -> ReplayResult:
        key = (call.dialect, call.tool, json.dumps(call.input, sort_keys=True), call.cwd)
        before = self._seen.get(key) if self.cache_size else None
        if before is not None:
            self._seen.move_to_end(key)
            return replace(before, index=index, call=call)
        result = self._decide(index, call)
        if self.cache_size:
            self._seen[key] = result
            if len(self._seen) > self.cache_size:
                self._seen.popitem(last=False)
        return result

    def _decide(self, index: int, call: ReplayCall) -> ReplayResult:
        from guard.effects import ToolCall

        gate, resolved = self._gate(call.cwd)
        verdict = gate.decide(ToolCall(call.dialect, call.tool, call.input, call.cwd))
        return ReplayResult(index, call, verdict.action.value, verdict.reason, verdict.rule,
                            [e.to_json() for e in verdict.effects], resolved)


def replay(
    paths: Iterable[Path],
    *,
    host: str = "auto",
    agent: str = "plan",
    policy: str | None = None,
    progress: Callable[[ReplayCall], None] | None = None,
    cache_size: int = 4096,
) -> Iterator[ReplayResult]:
    """Decide every call of ``paths``; results stream out as the lines are read."""
    r = Replayer(agent, policy, cache_size)
    for i, call in enumerate(calls(paths, host), 1):
        if progress is not None:
            progress(call)
        yield r.decide(i, call)
