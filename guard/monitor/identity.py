"""Is the watched worktree still the tree the monitor holds? Its roots' (device, inode)
are compared with the ones taken at the start: a root renamed away, replaced or removed is
a violation of its own (rule monitor:worktree-identity)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from guard.audit import logfile
from guard.monitor.attribution import NO_ORIGIN
from guard.monitor.events import Violation

if TYPE_CHECKING:
    from guard.monitor.watcher import Monitor


def identity(path: Path) -> tuple[int, int]:
    """(device, inode) of ``path`` itself (a symlink is not followed)."""
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def check_roots(m: Monitor) -> list[Violation]:
    """Is every root path still the tree the monitor holds? A root renamed away,
    replaced (a copy put in its place) or removed is a violation of its own,
    reported once per state. Restores keep going into the tree held by descriptor;
    nothing is ever written into what now stands at the path."""
    found: list[Violation] = []
    for root, ident in m._root_ids.items():
        try:
            now: tuple[int, int] | None = identity(Path(root))
        except OSError:
            now = None
        if now == ident:
            m._root_reported.pop(root, None)
            continue
        held = m.anchor.fd_of(root)
        where = "unknown"
        if held is not None:
            with contextlib.suppress(OSError):
                where = os.readlink(f"/proc/self/fd/{held}")
            with contextlib.suppress(OSError):
                if os.fstat(held).st_nlink == 0:
                    where = "removed"
        if now is None:
            what = "removed" if where in ("removed", "unknown") or where.endswith(
                " (deleted)") else "moved"
        else:
            what = "replaced"
        state = f"{what}:{where}"
        if m._root_reported.get(root) == state:
            continue
        m._root_reported[root] = state
        detail = {
            "removed": "the watched tree was removed",
            "moved": f"the watched tree was renamed to {where}",
            "replaced": f"another directory now stands at the path; the watched tree is"
                        f" {'gone' if where in ('removed', 'unknown') else 'at ' + where}",
        }[what]
        action = ("refused: nothing is written into what stands at the path now; restores"
                  " go into the tree watched from the start, held by descriptor"
                  if m.restore else "reported (watching without --restore)")
        v = Violation(
            timestamp=logfile.now_iso(), session=m.session, agent=m.agent,
            event=f"root-{what}", path=root, rule="monitor:worktree-identity",
            reason="the watched worktree is not the tree the baseline was taken of",
            action_taken=action, effect="delete" if now is None else "write",
            detail=detail, **dict(NO_ORIGIN),
        )
        with m._lock:
            m.violations.append(v)
            m._outbox.append(v)
        m._notice("error", f"{root}: {detail}; {action}")
        found.append(v)
    if found:
        m._flush()
    return found
