"""Who made a change: the writer's pid (from fanotify), its executable, and whether it
belongs to the guarded process tree (for ``guard run``: the supervised command and
everything it started).

Everything here is best effort and read at event time: a process that has exited
before its event is read has no ``/proc`` entry left, so its executable and its
ancestry are unknown (``None``), never guessed. Ancestry walks the ``ppid`` chain
of ``/proc/PID/stat``; a process keyed by (pid, start time) once found inside the
tree stays inside (its parent may exit later and it is re-parented to init).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

#: paths whose last writer is remembered (a violation found later names it)
ORIGINS_MAX = 65_536
_CACHE_MAX = 65_536


class Origin(NamedTuple):
    """The process behind an event."""

    pid: int
    exe: str | None
    in_guarded_tree: bool | None

    def fields(self) -> dict[str, Any]:
        return {"pid": self.pid, "exe": self.exe, "in_guarded_tree": self.in_guarded_tree}


NO_ORIGIN: dict[str, Any] = {"pid": None, "exe": None, "in_guarded_tree": None}


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return int(rest[1]), int(rest[19])
    except (IndexError, ValueError):
        return None


def exe_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


class Processes:
    """Answers "who is pid N, and is it inside the guarded tree?" with a cache."""

    def __init__(self) -> None:
        self._root: tuple[int, int] | None = None
        self._inside: OrderedDict[tuple[int, int], bool] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def guarded_pid(self) -> int | None:
        return self._root[0] if self._root is not None else None

    def set_guarded(self, pid: int) -> None:
        """The root of the guarded tree (``guard run``'s supervised child)."""
        st = _stat(pid)
        with self._lock:
            self._root = (pid, st[1]) if st is not None else (pid, -1)
            self._inside.clear()

    def origin(self, pid: int) -> Origin:
        return Origin(pid, exe_of(pid) if pid > 0 else None, self.in_tree(pid))

    def in_tree(self, pid: int) -> bool | None:
        """True/False when known; None without a guarded tree or when ``pid`` is gone."""
        with self._lock:
            root = self._root
            if root is None or pid <= 0:
                return None
            first = _stat(pid)
            if first is None:
                return None
            key = (pid, first[1])
            known = self._inside.get(key)
            if known is not None:
                return known
            result: bool | None = False
            p, st = pid, first
            for _ in range(4096):  # a chain is never this long; a loop guard
                if (p, st[1]) == root or (root[1] == -1 and p == root[0]):
                    result = True
                    break
                hit = self._inside.get((p, st[1]))
                if hit is not None:
                    result = hit
                    break
                if st[0] <= 1:
                    break
                p = st[0]
                nxt = _stat(p)
                if nxt is None:  # an ancestor exited while we walked: unknown
                    result = None
                    break
                st = nxt
            if result is not None:
                self._inside[key] = result
                if len(self._inside) > _CACHE_MAX:
                    self._inside.popitem(last=False)
            return result
