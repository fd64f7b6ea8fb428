"""A compiled policy kept for a long-lived front door while its files stay as they were.

The MCP proxy compiles its policy once, at start-up, and decides every call of the
session with it; a policy file edited meanwhile must still count from the next call.
Loading again per call (what :meth:`guard.decide.Guard.load_shared` does for hookd:
the roots found again, every file read and compared) costs more than the decision.
:class:`PolicyWatch` asks the disk a cheaper question, per call:

* each file the policy was read from is ``stat``\\ ed (following links, so a link
  pointed elsewhere names another inode): device, inode, size, modification and
  change time. Any difference, or a file that is gone, loads the policy again;
* with no policy named (no ``--policy``, no ``$GUARD_POLICY``) and the built-in
  default in force, ``<worktree>/.openoxide/policy.toml`` appearing loads it;
* the managed layer is checked as hookd checks it
  (:func:`guard.policy.managed.unchanged`: ``lstat`` stamps once a read found it
  unchanged, nothing to read where there is none);
* a file changed within :data:`RACY_NS` of the last time its content was compared
  could have been rewritten within one tick of the file system's clock, with the same
  size, so its stamp proves nothing: its content is compared as
  :func:`guard.policy.loader.unchanged` does (as git treats a "racily clean" entry),
  until the change is older than that.

A policy that no longer loads raises :class:`~guard.effects.GuardError` from
:meth:`PolicyWatch.current`, on every call until it loads again: the front door
refuses the call with that reason (fail closed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from guard.decide import Guard
from guard.policy.loader import BUILTIN_PREFIX, unchanged
from guard.policy.managed import unchanged as managed_unchanged

#: How long after a change a file's stamp is not trusted alone (nanoseconds): longer than
#: the coarsest timestamp a local file system keeps (FAT: 2 s).
RACY_NS = 3_000_000_000

Stamp = tuple[int, int, int, int, int] | None


def _stamp(path: str) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class PolicyWatch:
    """The policy ``load`` gives, loaded again only when its files changed on disk.

    ``guard``: the policy loaded at start-up (by ``load``); ``load``: how to load it
    again (the same ``--policy`` and cwd); ``discovered``: the policy was found, not
    named, so a policy file appearing in the worktree counts as a change.
    """

    def __init__(self, guard: Guard, load: Callable[[], Guard], *, discovered: bool) -> None:
        self._load = load
        self._discovered = discovered
        self._error: str | None = None
        self._verified = 0  # the content was never compared: the first check compares it
        self._take(guard)

    def _take(self, guard: Guard) -> None:
        self.guard = guard
        self._files = [f for f in guard.loaded.files if not f.startswith(BUILTIN_PREFIX)]
        wt = guard.roots.worktree
        self._candidate = (
            str(wt / ".openoxide" / "policy.toml")
            if self._discovered and not self._files and wt is not None
            else None
        )
        self._stamps = [_stamp(f) for f in self._files]
        self._candidate_stamp = _stamp(self._candidate) if self._candidate else None

    def current(self) -> Guard:
        """The policy in force now; raises GuardError when it changed and cannot be loaded."""
        if self._error is None and self._same():
            return self.guard
        began = time.time_ns()
        try:
            fresh = self._load()
        except Exception as exc:
            self._error = str(exc)
            raise
        self._error = None
        self._take(fresh)
        self._verified = began  # a write during the load is racy: compared next time
        return fresh

    def _same(self) -> bool:
        racy = self._verified - RACY_NS
        recent = False
        for path, before in zip(self._files, self._stamps, strict=True):
            now = _stamp(path)
            if now is None or now != before:
                return False
            recent = recent or now[3] >= racy or now[4] >= racy
        if self._candidate is not None and _stamp(self._candidate) != self._candidate_stamp:
            return False
        if not managed_unchanged(self.guard.managed):
            return False
        if recent:
            checked = time.time_ns()
            if not unchanged(self.guard.loaded):
                return False
            self._verified = checked
        return True
