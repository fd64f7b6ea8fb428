"""Which session decides a hook call: the agent run's, or any worktree the call lies in.

A plan session belongs to the worktree it began in, not to the cwd of a call.
So a call is in plan mode when its cwd, or a path it writes or deletes, lies
inside or below a worktree whose deciding session is in plan mode, however
the call got there:

* a nested repository or a submodule (the nearest ``.git`` is not the only
  one that counts: every enclosing worktree is asked);
* a ``git worktree`` checkout of the same repository (checkouts sharing one
  common git directory are one repository: a plan in one holds in all);
* a symlinked path (paths are resolved first).

When one such plan session is found, it decides: its worktree's policy and plan
directory apply (:class:`guard.gate.ModeFound`), whatever the call's cwd.
Otherwise the nearest worktree's deciding session decides, as before.

Nothing here spawns a process: ``.git`` files and the common directory's
``worktrees/*/gitdir`` are read directly (a hook answers every tool call).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from guard.effects import Effect, EffectKind, ToolCall
from guard.paths import VCS_MARKERS
from guard.planning._base import Mode
from guard.planning.session import Session, deciding_session, sessions_dir

if TYPE_CHECKING:
    from guard.gate import ModeFound

#: Effects whose target counts for containment (a read changes nothing).
CHANGING = (EffectKind.WRITE, EffectKind.DELETE)


def _gitdir(worktree: Path) -> Path | None:
    """The git directory of a checkout: ``.git`` itself, or where a ``.git`` file points."""
    marker = worktree / ".git"
    if marker.is_dir():
        return marker
    try:
        text = marker.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:") :].strip())
            return Path(os.path.realpath(worktree / target))
    return None


def _common_dir(gitdir: Path) -> Path:
    try:
        text = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return gitdir
    return Path(os.path.realpath(gitdir / text)) if text else gitdir


def sibling_checkouts(worktree: Path) -> list[Path]:
    """The other checkouts of the repository ``worktree`` belongs to (``git worktree``):
    its main worktree and every linked one, read from the common git directory."""
    gitdir = _gitdir(worktree)
    if gitdir is None:
        return []
    common = _common_dir(gitdir)
    out: list[Path] = []
    if common.name == ".git":
        out.append(common.parent)
    try:
        linked = sorted((common / "worktrees").iterdir())
    except OSError:
        linked = []
    for entry in linked:
        try:
            text = (entry / "gitdir").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if text:
            out.append(Path(os.path.realpath(Path(text).parent)))
    return [p for p in out if p != worktree]


def enclosing_worktrees(path: str | os.PathLike[str]) -> list[Path]:
    """Every worktree ``path`` lies in, nearest first: each ancestor (itself included)
    holding a VCS marker. The path is resolved first (a symlink into a worktree counts)."""
    here = Path(os.path.realpath(path))
    found: list[Path] = []
    for candidate in (here, *here.parents):
        if any(os.path.lexists(candidate / m) for m in VCS_MARKERS):
            found.append(candidate)
    return found


def _places(call: ToolCall, effects: Sequence[Effect]) -> list[str]:
    cwd = call.cwd if call.cwd is not None else os.getcwd()
    places = [cwd]
    for e in effects:
        if e.kind in CHANGING and e.target:
            places.append(os.path.join(cwd, os.path.expanduser(e.target)))
    return places


def worktrees_of(places: Iterable[str]) -> list[Path]:
    """The worktrees to ask, in order: every enclosing worktree of each place, then the
    other checkouts of each one's repository; no duplicates."""
    seen: dict[Path, None] = {}
    for place in places:
        for wt in enclosing_worktrees(place):
            seen.setdefault(wt, None)
    for wt in list(seen):
        for other in sibling_checkouts(wt):
            seen.setdefault(other, None)
    return list(seen)


def plan_session_around(
    call: ToolCall, effects: Sequence[Effect] = ()
) -> tuple[Session, str] | None:
    """The plan session of a worktree the call's cwd (or a path it changes) lies in."""
    for wt in worktrees_of(_places(call, effects)):
        if not sessions_dir(wt).is_dir():
            continue
        found = deciding_session(wt)
        if found is not None and found[0].mode is Mode.PLAN:
            return found
    return None


def ruling(call: ToolCall, effects: Sequence[Effect] = ()) -> ModeFound | None:
    """The guard mode for a hook call, and which session gives it (None: no session here).

    A plan session of any worktree the call lies in decides, with its own worktree;
    otherwise the deciding session of the cwd's worktree (or project) does.
    """
    from guard.gate import ModeFound

    found = plan_session_around(call, effects)
    if found is not None:
        session, why = found
        return ModeFound(
            "plan", f"guard mode 'plan' of {why} in {session.project}",
            session.worktree, session.id,
        )  # fmt: skip
    here = deciding_session(call.cwd if call.cwd is not None else os.getcwd())
    if here is None:
        return None
    session, why = here
    return ModeFound(session.mode.value, f"guard mode {session.mode.value!r} of {why}")
