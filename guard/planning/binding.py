"""Which session decides a hook call: the agent run's, or any worktree the call lies in.

A plan session belongs to the agent run: the first hook call of a host session
(Claude Code's ``session_id``, Codex's and Gemini's ``session_id``, OpenCode's
``sessionID``, Cursor's ``conversation_id``) that a plan session decides binds
that host session to it (stored in the session file, indexed under guard's data
directory). From then on the run's calls are decided by that session while it is
in plan mode, wherever their cwd.

A host session is also bound to every worktree it is *seen* in, in any mode: each
call's cwd (and each path it changes) names the worktrees it lies in, recorded under
guard's data directory (one file per worktree, written once, no lock). When any of
them is in plan mode (``guard plan start`` there, even after the run left for a
folder outside every worktree, e.g. one Claude Code's ``--add-dir`` added), the run is
in plan mode: its calls are decided by that plan session with its worktree's policy,
so a program whose writes no analysis sees runs confined with that worktree
read-only. At most :data:`MAX_SEEN` worktrees are recorded per run (the first ones).

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
directory apply (:class:`guard.planning.found.ModeFound`), whatever the call's cwd.
Otherwise the nearest worktree's deciding session decides, as before.

Nothing here spawns a process: ``.git`` files and the common directory's
``worktrees/*/gitdir`` are read directly (a hook answers every tool call).
"""

from __future__ import annotations

# Lazy imports: the session model (pydantic) only to load a bound session (CLI start-up).
import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from guard.effects import Effect, EffectKind, ToolCall
from guard.paths import VCS_MARKERS, data_dir
from guard.planning._store import atomic_write_text
from guard.planning._vocabulary import (
    Mode,
    SessionError,
    SessionNotFound,
    check_session_id,
    sessions_dir,
    utc_now,
)
from guard.planning.deciding import deciding_session
from guard.planning.found import ModeFound

if TYPE_CHECKING:
    from guard.planning.session import Session

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


def worktrees_of(places: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The worktrees to ask, in order: every enclosing worktree of each place, then the
    other checkouts of each one's repository; no duplicates."""
    return _with_siblings(wt for place in places for wt in enclosing_worktrees(place))


def _with_siblings(worktrees: Iterable[Path]) -> list[Path]:
    seen = dict.fromkeys(worktrees)
    for wt in list(seen):
        for other in sibling_checkouts(wt):
            seen.setdefault(other, None)
    return list(seen)


def _around(places: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """For a call's places (its cwd first, then the paths it changes): the worktrees to ask
    for a plan session (:func:`plan_session_around`), and the worktrees the call is seen
    in (:func:`note_seen`). A cwd under no version control counts as its own project."""
    enclosing = [enclosing_worktrees(place) for place in places]
    own = [] if enclosing[0] else [Path(os.path.realpath(places[0]))]
    ask = own + _with_siblings(wt for found in enclosing for wt in found)
    seen = list(dict.fromkeys([*own, *(wt for found in enclosing for wt in found)]))
    return ask, seen


def plan_session_around(
    call: ToolCall, effects: Sequence[Effect] = ()
) -> tuple[Session, str] | None:
    """The plan session of a worktree the call's cwd (or a path it changes) lies in; for a
    cwd under no version control, the plan session of that directory's own project."""
    return _plan_session_in(_around(_places(call, effects))[0])


def _plan_session_in(worktrees: Iterable[Path]) -> tuple[Session, str] | None:
    """The first of ``worktrees`` (or projects) whose deciding session is in plan mode."""
    for wt in worktrees:
        if not sessions_dir(wt).is_dir():
            continue
        found = deciding_session(wt)
        if found is not None and found[0].mode is Mode.PLAN:
            return found
    return None


#: Where host-session bindings are indexed: ``<data>/bindings/<digest of the id>.json``.
BINDINGS_SUBDIR = "bindings"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def host_session_of(call: ToolCall) -> str | None:
    """The host's session id of a call, if it is one guard can bind (a short printable string)."""
    sid = call.session
    if not isinstance(sid, str) or not 0 < len(sid) <= 256 or _CONTROL.search(sid):
        return None
    return sid


def _index_path(host_session: str) -> Path:
    digest = hashlib.sha256(host_session.encode("utf-8", "surrogateescape")).hexdigest()
    return data_dir() / BINDINGS_SUBDIR / f"{digest[:40]}.json"


def bound_session(host_session: str) -> Session | None:
    """The session ``host_session`` is bound to, while it may decide (else None).

    An index entry whose session does not list the host session is ignored: the
    session file is the truth. An unreadable index raises (the caller fails closed).
    """
    path = _index_path(host_session)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SessionError(
            f"cannot read the host-session binding {path}: {exc}; remove the file"
            " (the next call binds the agent run again)"
        ) from None
    from guard.planning.session import Session

    try:
        directory = Path(str(data["sessions_dir"]))
        session = Session.load_file(directory / f"{check_session_id(str(data['session']))}.json")
    except SessionNotFound:
        return None
    except (KeyError, TypeError):
        raise SessionError(f"{path}: not a host-session binding; remove the file") from None
    if host_session not in session.host_sessions or not session.decides:
        return None
    return session


#: The most worktrees (or projects) recorded as seen for one host session: the first ones
#: seen are kept (the one the run started in among them), later ones are not recorded.
MAX_SEEN = 256
_SEEN_SUFFIX = ".seen"


def _seen_dir(host_session: str) -> Path:
    index = _index_path(host_session)
    return index.with_name(index.stem + _SEEN_SUFFIX)


def _place_name(place: Path) -> str:
    return hashlib.sha256(os.fsencode(place)).hexdigest()[:32] + ".json"


def note_seen(host_session: str, places: Iterable[Path]) -> None:
    """Record that ``host_session`` was seen in each of ``places`` (once per place: a file
    written atomically, no lock; at most :data:`MAX_SEEN` places)."""
    directory = _seen_dir(host_session)
    count: int | None = None
    for place in places:
        path = directory / _place_name(place)
        if os.path.lexists(path):
            continue
        if count is None:
            directory.mkdir(parents=True, exist_ok=True)
            count = sum(1 for _ in directory.glob("*.json"))
        if count >= MAX_SEEN:
            return
        entry = {"host_session": host_session, "place": str(place), "seen_at": utc_now()}
        atomic_write_text(path, json.dumps(entry) + "\n")
        count += 1


def seen_places(host_session: str, known: Iterable[Path] = ()) -> list[Path]:
    """The worktrees (or projects) ``host_session`` was seen in, first seen first, but
    those in ``known`` (already asked: their records are not read).

    An unreadable or malformed record raises (the caller fails closed)."""
    directory = _seen_dir(host_session)
    skip = {_place_name(place) for place in known}
    try:
        entries = [e for e in os.scandir(directory) if e.name.endswith(".json")]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SessionError(f"cannot list the agent run's worktrees in {directory}: {exc}") from None
    found: list[tuple[str, Path]] = []
    for entry in entries:
        if entry.name in skip:
            continue
        try:
            data = json.loads(Path(entry.path).read_text(encoding="utf-8"))
            place, at = data["place"], data["seen_at"]
            if data["host_session"] != host_session or not isinstance(place, str):
                raise TypeError(place)
        except (OSError, ValueError, KeyError, TypeError):
            raise SessionError(
                f"{entry.path}: not a record of a worktree this agent run was seen in;"
                " remove the file (the next call in that worktree records it again)"
            ) from None
        found.append((str(at), Path(place)))
    return [place for _, place in sorted(found)]


def bind(session: Session, host_session: str) -> None:
    """Bind ``host_session`` to ``session``: stored in the session file and indexed."""
    with session.transaction() as s:
        if host_session not in s.host_sessions:
            s.host_sessions.append(host_session)
    path = _index_path(host_session)
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "host_session": host_session,
        "session": session.id,
        "sessions_dir": str(session.directory),
        "bound_at": utc_now(),
    }
    atomic_write_text(path, json.dumps(entry) + "\n")


def ruling(call: ToolCall, effects: Sequence[Effect] = ()) -> ModeFound | None:
    """The guard mode for a hook call, and which session gives it (None: no session here).

    In order: the plan session the call's agent run (its host session id) is bound
    to; a plan session of any worktree the call lies in (the agent run is bound to
    it on this, its first call); a plan session of any worktree the run was seen in
    before, in any mode (bound likewise); the build session the run is bound to; the
    deciding session of the cwd's worktree (or project). A plan session decides
    with its own worktree, whatever the call's cwd. Every call of a host session
    records the worktrees it is seen in (:func:`note_seen`).
    """
    host = host_session_of(call)
    ask, seen_here = _around(_places(call, effects))
    if host is not None:
        note_seen(host, seen_here)
    bound = bound_session(host) if host is not None else None
    if bound is not None and bound.mode is Mode.PLAN:
        return ModeFound(
            "plan",
            f"guard mode 'plan' of session {bound.id} in {bound.project}, bound to this"
            f" agent run (host session {host})",
            bound.worktree, bound.id, bound.orphan_note(),
        )  # fmt: skip
    found = _plan_session_in(ask)
    if found is not None:
        session, why = found
        if host is not None and host not in session.host_sessions:
            bind(session, host)
        return ModeFound(
            "plan", f"guard mode 'plan' of {why} in {session.project}",
            session.worktree, session.id, session.orphan_note(),
        )  # fmt: skip
    if host is not None:
        places = seen_places(host, known=ask)  # a project outside git is its own place
        seen = _plan_session_in(p for p in _with_siblings(places) if p not in ask)
        if seen is not None:
            session, why = seen
            if host not in session.host_sessions:
                bind(session, host)
            return ModeFound(
                "plan",
                f"guard mode 'plan' of {why} in {session.project}, where this agent run"
                f" (host session {host}) was seen",
                session.worktree, session.id, session.orphan_note(),
            )  # fmt: skip
    if bound is not None:
        return ModeFound(
            bound.mode.value,
            f"guard mode {bound.mode.value!r} of session {bound.id}, bound to this agent run",
        )
    here = deciding_session(call.cwd if call.cwd is not None else os.getcwd())
    if here is None:
        return None
    session, why = here
    return ModeFound(session.mode.value, f"guard mode {session.mode.value!r} of {why}")
