"""Bounded waits on guard's own file locks: guard always answers.

Every ``flock`` guard takes on its state (the audit log, a session's files, the
missed-call store, the syslog spool) goes through :func:`flock`. A lock that
stays held is not waited on for ever: past :data:`LOCK_WAIT` seconds, or past the
calling thread's :func:`budget` (a hook call's whole allowance, well inside the
host's hook timeout), :class:`LockTimeout` is raised. It is an ``OSError``, so
every caller's existing "cannot write" path handles it; on the hook path that is
a deny whose reason names the file and, when ``/proc/locks`` tells, the process
that holds it.

A confined command cannot see guard's data directory (the namespaces cover it),
so only an unconfined process, or a command under the Landlock-only fallback,
can hold one of these locks; a holder then costs a refusal, never an answer
given late or not at all.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator

#: The longest guard waits for one of its own locks (seconds). A writer holds one for
#: a single write(2) (a rotation: one rename), so a wait this long means a holder that
#: is not guard's writer.
LOCK_WAIT = 5.0
#: A hook call's whole allowance for waiting on locks (seconds): several locks held in
#: turn still leave the answer well inside a host's hook timeout.
HOOK_BUDGET = 12.0

_local = threading.local()


class LockTimeout(OSError):
    """A lock guard needs stayed held past its deadline."""

    def __init__(self, what: str, waited: float, holder: str) -> None:
        text = f"{what} stayed locked for {waited:.1f} s" + (f" ({holder})" if holder else "")
        super().__init__(errno.ETIMEDOUT, text)
        self.what = what
        self.holder = holder


def remaining() -> float | None:
    """Seconds left of this thread's budget (None: no budget set)."""
    deadline: float | None = getattr(_local, "deadline", None)
    return None if deadline is None else deadline - time.monotonic()


@contextlib.contextmanager
def budget(seconds: float) -> Iterator[None]:
    """Bound every lock wait of this thread inside the block to ``seconds`` in total
    (a budget already set and shorter is kept)."""
    before: float | None = getattr(_local, "deadline", None)
    deadline = time.monotonic() + seconds
    _local.deadline = deadline if before is None else min(before, deadline)
    try:
        yield
    finally:
        _local.deadline = before


def holder_of(fd: int) -> str:
    """Who holds a lock on ``fd``'s file, from ``/proc/locks`` ("" when it does not say)."""
    try:
        st = os.fstat(fd)
        dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[5] != dev:
            continue
        pid = fields[4]
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
                comm = fh.read().strip()
        except OSError:
            comm = ""
        return f"held by pid {pid}" + (f" ({comm})" if comm else "")
    return ""


def flock(fd: int, what: str, *, wait: float = LOCK_WAIT) -> None:
    """Take an exclusive ``flock`` on ``fd`` within ``wait`` seconds (and this thread's
    :func:`budget`); raises :class:`LockTimeout` naming ``what`` past that."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    left = remaining()
    limit = wait if left is None else max(0.0, min(wait, left))
    start = time.monotonic()
    pause = 0.002
    while True:
        waited = time.monotonic() - start
        if waited >= limit:
            raise LockTimeout(what, waited, holder_of(fd))
        time.sleep(min(pause, limit - waited))
        pause = min(pause * 2, 0.05)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            continue
