"""Replay: find the transcripts, read their calls, decide each through the gate.

Every call is decided by :class:`guard.gate.Gate` with the chosen agent, no audit
sink (the user's audit log is never written) and no mode lookup (no session state
is read or written), against the cwd the call had, and with the confiner the live
hook has for the call's host (:class:`guard.sandbox.confiner.ShellConfiner` for a
host that can rewrite a call: a shell command the hook ran confined replays as
``allow_confined``; :class:`guard.sandbox.direct.GrammarConfiner` for one that can only
allow or refuse: guard's grammar, else the confined form). A cwd that no longer
exists is still used as the call's cwd
(paths resolve through its nearest existing ancestor, as guard canonicalises any
path) and the result says so in ``resolved``; with ``cwd=DIR`` every call is
re-rooted instead: its cwd becomes DIR, and paths in its input under the old cwd
move with it. Calls come out in time order across every transcript.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from guard.decide import Guard
from guard.effects import GuardError, ToolCall
from guard.gate import Confiner, Gate
from guard.hooks import adapter_for
from guard.planning.runtime import plan_refusal
from guard.replay.model import (
    ReplayCall,
    ReplayResult,
    TranscriptError,
    first_record,
    load_document,
)
from guard.replay.readers import HOSTS, READERS
from guard.sandbox.confiner import ShellConfiner
from guard.sandbox.direct import GrammarConfiner

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


def can_rewrite(host: str) -> bool:
    """Whether the live hook of ``host`` can run a call confined (the hook's confiner)."""
    return hook_confiner(host) == "rewrite"


def hook_confiner(host: str) -> str:
    """The live hook's confiner for ``host``: ``rewrite`` (it runs plan-mode shell calls
    confined), ``grammar`` (it can only allow or refuse: guard's grammar, else the confined
    form), ``none`` (a transcript kind with no hook: guard's audit log)."""
    try:
        return "rewrite" if adapter_for(host).can_rewrite else "grammar"
    except GuardError:
        return "none"


def reroot(value: object, old: str, new: str) -> object:
    """``value`` with every string that is ``old`` or lies under it moved under ``new``."""
    if isinstance(value, str):
        if value == old:
            return new
        if value.startswith(old.rstrip("/") + "/"):
            return new.rstrip("/") + value[len(old.rstrip("/")):]
        return value
    if isinstance(value, dict):
        return {k: reroot(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [reroot(v, old, new) for v in value]
    return value


def _when(call: ReplayCall) -> datetime | None:
    t = call.time
    if not t:
        return None
    try:
        if t.replace(".", "", 1).isdigit():  # epoch seconds or milliseconds
            n = float(t)
            return datetime.fromtimestamp(n / 1000 if n > 1e11 else n, UTC)
        when = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def in_time_order(found: Iterable[ReplayCall]) -> list[ReplayCall]:
    """The calls of every transcript in time order; a call without a time keeps the time
    of the call before it in its file (stable: equal times keep their order)."""
    keyed: list[tuple[datetime, int, ReplayCall]] = []
    last: dict[str, datetime] = {}
    floor = datetime.min.replace(tzinfo=UTC)
    for n, call in enumerate(found):
        when = _when(call) or last.get(call.file, floor)
        last[call.file] = when
        keyed.append((when, n, call))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [c for _, _, c in keyed]


@dataclass
class Replayer:
    """Decides replayed calls: one policy load and one gate per cwd (and confiner)."""

    agent: str = "plan"
    policy: str | None = None
    #: Verdicts of identical calls (same tool, input and cwd) decided before: a replay reads
    #: the disk as it is now, so the same call gets the same verdict. Bounded (LRU).
    cache_size: int = 4096
    #: replay every call against this directory (its cwd re-rooted here), not its own
    cwd: str | None = None
    _gates: dict[tuple[str | None, str], tuple[Gate, str | None]] = field(default_factory=dict)
    _told: dict[str | None, str] = field(default_factory=dict)
    _seen: OrderedDict[tuple[str, str, str, str | None, str], ReplayResult] = field(
        default_factory=OrderedDict
    )
    #: cwds of the transcripts that do not exist here (their paths were re-rooted)
    missing: set[str] = field(default_factory=set)

    def _gate(self, cwd: str | None, confine: str) -> tuple[Gate, str | None]:
        found = self._gates.get((cwd, confine))
        if found is None:
            resolved = None
            if cwd is not None and not os.path.isdir(cwd):
                resolved = (f"cwd {cwd} no longer exists: paths resolved through"
                            f" {nearest_existing(cwd)}, its nearest existing ancestor")
            g: Guard = Guard.load(self.policy, cwd=cwd)
            g.agent(self.agent)  # an unknown agent: bad input, before any call
            confiner: Confiner | None = None
            if confine == "rewrite":  # as the live hook of a host that can rewrite a call
                confiner = ShellConfiner(build=False)  # the decision; nothing made
            elif confine == "grammar":  # as the live hook of a host that can only refuse
                confiner = GrammarConfiner()
            gate = Gate(guard=g, agent=self.agent, env={}, sessions=False, sink=None,
                        confiner=confiner, source="replay", refusal=self._refusal)
            found = (gate, resolved)
            self._gates[(cwd, confine)] = found
        return found

    def _refusal(self, call: ToolCall) -> str:
        """Where a plan goes, for a replayed refusal: the plan directory of the call's cwd.

        A past session's state is not today's, so no live session is consulted; the
        sentence is the same for every call of one cwd, so it is worked out once.
        """
        told = self._told.get(call.cwd)
        if told is None:
            told = self._told[call.cwd] = plan_refusal(call.cwd, no_session=True)
        return told

    def decide(self, index: int, call: ReplayCall) -> ReplayResult:
        key = (call.dialect, call.tool, json.dumps(call.input, sort_keys=True), call.cwd,
               call.host)
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
        cwd, tool_input, note = call.cwd, call.input, None
        if self.cwd is not None:
            if cwd is not None and cwd != self.cwd:
                moved = reroot(dict(call.input), cwd, self.cwd)
                tool_input = moved if isinstance(moved, dict) else call.input
                note = f"re-rooted: {cwd} -> {self.cwd} (--cwd)"
            cwd = self.cwd
        gate, resolved = self._gate(cwd, hook_confiner(call.host))
        if resolved is not None and cwd is not None:
            self.missing.add(cwd)
        verdict = gate.decide(ToolCall(call.dialect, call.tool, tool_input, cwd))
        return ReplayResult(index, call, verdict.action.value, verdict.reason, verdict.rule,
                            [e.to_json() for e in verdict.effects], note or resolved)


def replay(
    paths: Iterable[Path],
    *,
    host: str = "auto",
    agent: str = "plan",
    policy: str | None = None,
    progress: Callable[[ReplayCall], None] | None = None,
    cache_size: int = 4096,
    cwd: str | None = None,
    replayer: Replayer | None = None,
) -> Iterator[ReplayResult]:
    """Decide every call of ``paths``, in time order across the transcripts (every call is
    read first); ``cwd``: replay them against that directory (see :class:`Replayer`)."""
    r = replayer if replayer is not None else Replayer(agent, policy, cache_size, cwd)
    ordered = []
    for call in calls(paths, host):
        if progress is not None:
            progress(call)
        ordered.append(call)
    for i, call in enumerate(in_time_order(ordered), 1):
        yield r.decide(i, call)
