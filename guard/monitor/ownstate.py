"""guard's own state, as the monitor sees it: never a violation, and one watcher per tree.

guard keeps state of its own next to (and sometimes inside) the trees it watches:
plan sessions (``.openoxide/sessions``), the quarantine, the audit log and the
monitor's baseline store. Other guard processes (hooks, ``guard plan``, ``guard
session``) change them while a monitor runs, so a change there is never
quarantined, restored or counted as the agent's violation; a change made by the
guarded process tree (known with fanotify) is reported as tampering instead.

Two monitors on one tree would each quarantine the other's moves, so a monitor
takes :class:`WatchLock` for every root it watches: an ``flock`` on a file in
guard's data directory that names the holder. The kernel drops an ``flock`` when
its holder dies, so a lock left by a killed watcher is stale and simply taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from guard.audit.chain import KEY_SUBDIR
from guard.audit.logfile import AUDIT_SUBDIR
from guard.effects import GuardError
from guard.paths import Roots, project_key

#: where sessions live inside a worktree (mirrors guard.planning.session.SESSIONS_SUBDIR)
_SESSIONS = Path(".openoxide") / "sessions"


def state_paths(roots: Roots, quarantine: Path) -> list[str]:
    """The directories that hold guard's own state for this worktree.

    Sessions (with their locks, event logs and pin), the whole quarantine (every
    session's), the audit logs and their key, the monitors' baseline stores and locks.
    """
    out = [str(quarantine), str(roots.data / AUDIT_SUBDIR), str(roots.data / KEY_SUBDIR),
           str(roots.data / "monitor")]
    if roots.worktree is not None:
        out.append(str(roots.worktree / _SESSIONS))
    out.append(str(roots.data / "sessions"))
    return sorted(set(out))


def lock_path(data: Path, root: Path) -> Path:
    """The lock file of one watched tree: ``<data>/monitor/locks/<key>.lock``."""
    return data / "monitor" / "locks" / f"{project_key(root)}.lock"


class WatchLock:
    """One monitor per watched tree: an exclusive ``flock`` naming its holder.

    ``acquire`` raises a :class:`GuardError` naming the running holder (pid,
    since, session) when another monitor watches the tree. A lock file whose
    holder died is not locked any more and is taken over.
    """

    def __init__(self, data: Path, roots: list[Path], session: str) -> None:
        self.paths = [lock_path(data, root) for root in roots]
        self.roots = roots
        self.session = session
        self._fds: list[int] = []

    @property
    def held(self) -> bool:
        return bool(self._fds)

    def acquire(self, since: str) -> None:
        try:
            for path, root in zip(self.paths, self.roots, strict=True):
                self._fds.append(self._take(path, root, since))
        except BaseException:
            self.release()
            raise

    def _take(self, path: Path, root: Path, since: str) -> int:
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise GuardError(
                f"cannot create the monitor's lock {path}: {exc.strerror or exc}"
                " (guard's data directory must be writable by guard)"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise GuardError(
                f"another guard monitor is watching {root} ({holder}); stop it first, or"
                " watch another tree (its lock: " + str(path) + ")"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise GuardError(f"cannot lock {path}: {exc.strerror or exc}") from None
        record = {"pid": os.getpid(), "since": since, "session": self.session,
                  "host": os.uname().nodename, "root": str(root)}
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        return fd

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing drops the flock


def _holder(fd: int) -> str:
    """"guard watch pid N, since T, session S" from a held lock file (best effort)."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        data = {}
    if not isinstance(data, dict) or "pid" not in data:
        return "its holder has not written its name yet"
    return (f"pid {data.get('pid')}, since {data.get('since', '?')},"
            f" session {data.get('session', '?')}")
