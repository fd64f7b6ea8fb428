"""The monitor's records and its inotify plumbing (watchdog's observer, told about trouble)."""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.inotify import InotifyFullEmitter, InotifyWatchGroup
from watchdog.observers.inotify_c import InotifyEvent, InotifyFD, Mask, Watch

from guard.effects import EffectKind

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.monitor.entries import Sig


def plan_ancestors(plans: str, roots: list[Path]) -> set[str]:
    """The plan directory and its ancestors inside the watched roots (created to hold plans)."""
    out: set[str] = set()
    p = plans
    while any(_is_under(p, str(root)) and p != str(root) for root in roots):
        out.add(p)
        p = os.path.dirname(p)
    return out


class _Sink:
    """What the handler calls: the monitor's event entry point."""

    def on_fs_event(self, ev: FileSystemEvent) -> None:  # pragma: no cover - overridden
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
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class _FD(InotifyFD):
    """watchdog's inotify reader, telling us about overflows and watch errors.

    watchdog 7 handles ``IN_Q_OVERFLOW`` itself (it rebuilds its watches) and
    only logs it; a watch-limit error while adding a new directory's watch
    would end its reader thread. Here both reach the monitor instead.
    """

    def __init__(self, trouble: Callable[[str, str], None]) -> None:
        super().__init__()
        self._trouble = trouble
        #: while the first watches are added: the watch limit ends that at once
        #: (:class:`WatchLimit`) instead of leaving the rest of the tree unwatched
        self.starting = False

    def handle_event(self, event: InotifyEvent) -> None:
        try:
            super().handle_event(event)
        except OSError as exc:
            kind = "watch-limit" if exc.errno in (errno.ENOSPC, errno.EMFILE) else "watch-error"
            self._trouble(kind, f"inotify could not add a watch: {exc.strerror or exc}")
            return
        if event.is_queue_overflow:
            self._trouble("overflow", "the kernel's inotify queue overflowed: events were lost")


    def _get_or_create_watch(self, path: bytes, mask: Mask) -> Watch:
        # watchdog swallows errors on subdirectories (they may vanish while being
        # walked); a watch limit is not such a case: the directory stays unwatched.
        try:
            return super()._get_or_create_watch(path, mask)
        except OSError as exc:
            if exc.errno == errno.ENOSPC and self.starting:
                raise WatchLimit(os.fsdecode(path), len(self._watch_for_wd)) from exc
            if exc.errno in (errno.ENOSPC, errno.EMFILE):
                self._trouble(
                    "watch-limit",
                    f"inotify could not watch {os.fsdecode(path)}: {exc.strerror or exc}"
                    " (raise fs.inotify.max_user_watches)",
                )
            raise


class WatchLimit(Exception):
    """inotify ran out of watches (``fs.inotify.max_user_watches``) while the first
    watches were added. Not an OSError: watchdog skips those for subdirectories."""

    def __init__(self, path: str, added: int) -> None:
        super().__init__(path, added)
        self.path = path
        self.added = added


#: the events the monitor acts on. Without a filter watchdog asks inotify for opens,
#: reads and read-only closes as well: adding the watches (which opens every directory)
#: then floods the queue, and each overflow makes watchdog walk the tree again.
WANTED_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent, DirCreatedEvent, FileModifiedEvent, FileClosedEvent,
    FileAttribEvent, DirAttribEvent, FileDeletedEvent, DirDeletedEvent,
    FileMovedEvent, DirMovedEvent,
]


class _WatchGroup(InotifyWatchGroup):
    """watchdog's watch group, adding the watches of a tree with one ``scandir`` per
    directory: watchdog's ``os.walk`` also builds the list of every file name and
    ``lstat``s every directory again (1.4x as long on a 1,000,000-file tree: 15.6 s
    against 11.1 s). Same order (a directory is watched before it is listed), same
    rule for symlinks."""

    def _add_all_callbacks(self, path: bytes) -> None:
        is_dir = os.path.isdir(path)
        self._add_callback(path)
        if not (is_dir and self.is_recursive):
            return
        stack = [path]
        while stack:
            top = stack.pop()
            try:
                with os.scandir(top) as it:
                    for entry in it:
                        if entry.is_dir(follow_symlinks=self.follow_symlink):
                            self._add_callback(entry.path)
                            stack.append(entry.path)
            except OSError:
                continue  # gone or unreadable meanwhile, as watchdog's walk skips it


class _Emitter(InotifyFullEmitter):
    def on_thread_start(self) -> None:
        self._inotify = _WatchGroup(
            self._inotify_fd,
            os.fsencode(self.watch.path),
            is_recursive=self.watch.is_recursive,
            event_mask=self.get_event_mask_from_filter(),
            follow_symlink=self.watch.follow_symlink,
        )


class _Observer(BaseObserver):
    def __init__(self, trouble: Callable[[str, str], None]) -> None:
        #: the inotify reader every emitter shares (backends.py sets its ``starting``)
        self.inotify_fd = _FD(trouble)
        self.inotify_fd.start()
        super().__init__(_Emitter, timeout=0.2, inotify_fd=self.inotify_fd)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self.inotify_fd.stop()
        self.inotify_fd.join()


class _Handler(FileSystemEventHandler):
    def __init__(self, monitor: _Sink) -> None:
        self.monitor = monitor

    def dispatch(self, event: FileSystemEvent) -> None:
        self.monitor.on_fs_event(event)


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


@dataclass(slots=True)
class _Pending:
    """A violating write to a regular file, waiting for the writer to finish (restore mode)."""

    event: str
    detail: str
    first: float
    since: float
    sig: Sig | None
    writing: bool  # a create/modify was seen and no close-after-write since


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


def early_names(ev: FileSystemEvent) -> list[tuple[str, str]]:
    """The paths an event names and what happened to each (for changes during the baseline)."""
    src = os.fsdecode(ev.src_path)
    if ev.event_type == "moved":
        return [(src, "moved-from"), (os.fsdecode(ev.dest_path), "moved-to")]
    change = CHANGES.get((ev.event_type, ev.is_directory))
    return [(src, change[2])] if change is not None else []
