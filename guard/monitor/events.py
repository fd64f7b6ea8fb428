"""The monitor's records (violations, notices, pending writes) and what an event did.

The inotify backend's plumbing (watchdog's observer, told about trouble) is
:mod:`guard.monitor.inotify`, loaded only when that backend runs."""

# Lazy imports: traceback only to describe a thread a stop could not wait for (rare).

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from guard.effects import EffectKind

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent

    from guard.decide import Guard
    from guard.monitor.entries import Sig


class FsEvent(NamedTuple):
    """A change as the fanotify backend hands it on: the fields the monitor reads of the
    watchdog event the inotify backend gives (a monitor on fanotify never loads watchdog)."""

    event_type: str  # created, deleted, modified, attrib, closed, moved
    src_path: str
    dest_path: str = ""  # moves only
    is_directory: bool = False


if TYPE_CHECKING:
    #: an event from either backend
    AnyEvent = FsEvent | FileSystemEvent


def plan_ancestors(plans: str, roots: list[Path]) -> set[str]:
    """The plan directory and its ancestors inside the watched roots (created to hold plans)."""
    out: set[str] = set()
    p = plans
    while any(_is_under(p, str(root)) and p != str(root) for root in roots):
        out.add(p)
        p = os.path.dirname(p)
    return out


class _Sink(Protocol):
    """What the handler calls: the monitor's event entry point (a Monitor, or anything
    with its ``on_fs_event``)."""

    def on_fs_event(self, ev: AnyEvent) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Violation:
    """A change the agent's policy does not allow, and what the monitor did about it."""

    timestamp: str
    session: str
    agent: str
    event: str  # created | modified | closed-after-write | attrib | deleted | moved-from | ...
    path: str
    rule: str
    reason: str
    action_taken: str
    effect: str = "write"  # the effect the event maps to: write | delete
    detail: str = ""  # e.g. the other end of a move
    # who made the change (fanotify backend only; None with inotify, or when unknown)
    pid: int | None = None
    exe: str | None = None
    in_guarded_tree: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "violation", "source": "monitor", **asdict(self)}


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user must know that is not a violation (overflow, scan result, error)."""

    timestamp: str
    session: str
    event: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "notice", "source": "monitor", **asdict(self)}


def new_session_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + os.urandom(3).hex()


def default_roots(guard: Guard) -> list[Path]:
    """The worktree and an outside plan directory; without a worktree (outside version
    control: :func:`guard.paths.no_worktree_note`) the plan directory alone, as
    ``guard check`` and ``guard run`` see no worktree there either."""
    r = guard.roots
    if r.worktree is None:
        return [r.plans]
    out = [r.worktree]
    if not _is_under(str(r.plans), str(r.worktree)):
        out.append(r.plans)
    return out


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class _Pending:
    """A violating write to a regular file, waiting for the writer to finish (restore mode)."""

    __slots__ = ("detail", "event", "first", "sig", "since", "writing")

    def __init__(self, event: str, detail: str, first: float, since: float, sig: Sig | None,
                 writing: bool) -> None:
        self.event = event
        self.detail = detail
        self.first = first
        self.since = since
        self.sig = sig
        self.writing = writing  # a create/modify was seen and no close-after-write since


#: a file whose last write was followed by a close is settled once it stays the same this long
SETTLE_QUIET = 0.1
#: without a close (a writer may still hold it open), it must stay the same this long
SETTLE_OPEN_QUIET = 2.0
#: and no file waits longer than this: a writer holding it open forever is not waited for
SETTLE_MAX = 30.0
_WRITING_EVENTS = ("created", "modified")


#: What a watchdog event the monitor acts on did to its path, by (event type, directory?):
#: the effect, the event's name in a violation, and its name among the changes made while
#: the baseline ran. Moves name two paths (see :func:`early_names`); a DirModifiedEvent is
#: watchdog's echo of a child's event, and opens and read-only closes change nothing.
CHANGES: dict[tuple[str, bool], tuple[EffectKind, str, str]] = {
    ("created", False): (EffectKind.WRITE, "created", "created"),
    ("created", True): (EffectKind.WRITE, "created", "created"),
    ("modified", False): (EffectKind.WRITE, "modified", "modified"),
    ("closed", False): (EffectKind.WRITE, "closed-after-write", "modified"),
    ("attrib", False): (EffectKind.WRITE, "attrib", "attrib"),
    ("attrib", True): (EffectKind.WRITE, "attrib", "attrib"),
    ("deleted", False): (EffectKind.DELETE, "deleted", "deleted"),
    ("deleted", True): (EffectKind.DELETE, "deleted", "deleted"),
}


def early_names(ev: AnyEvent) -> list[tuple[str, str]]:
    """The paths an event names and what happened to each (for changes during the baseline)."""
    src = os.fsdecode(ev.src_path)
    if ev.event_type == "moved":
        return [(src, "moved-from"), (os.fsdecode(ev.dest_path), "moved-to")]
    change = CHANGES.get((ev.event_type, ev.is_directory))
    return [(src, change[2])] if change is not None else []


def join_within(timeout: float, threads: list[threading.Thread]) -> list[str]:
    """Join ``threads`` within ``timeout`` seconds in all; describe each still running
    (its name and the innermost frames it stands in), so that a stop that could not
    wait for it says what held it instead of hanging."""
    deadline = time.monotonic() + timeout
    for t in threads:
        if t.ident is not None:
            t.join(max(0.0, deadline - time.monotonic()))
    frames = sys._current_frames()
    stuck = []
    for t in threads:
        if t.is_alive():
            import traceback

            frame = frames.get(t.ident) if t.ident is not None else None
            where = ", ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                              for f in traceback.extract_stack(frame)[-4:]) if frame else "?"
            stuck.append(f"{t.name} (at {where})")
    return stuck
