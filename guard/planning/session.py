"""Sessions and modes, shared by every process that works on one worktree.

A session is one JSON file, ``<worktree>/.openoxide/sessions/<id>.json`` (or
``<data dir>/sessions/<project key>/<id>.json`` outside version control).
It has an owner and an end: a session started by a process (``guard mcp``)
records that process (pid, its start time, the boot and the host) and is
ended when the process exits; a process that died without ending it makes
the session *orphaned*. An ended session never decides anything again; an
orphaned one in plan mode keeps deciding (plan mode ends only by the user:
``guard session end``, ``guard plan exit --approve``, or ``guard plan
resume`` to take it over), an orphaned build session decides nothing.
A session started from the command line is owned by the
user and stays open until ``guard session end``.
Every change is a read-modify-write under an exclusive ``flock`` on
``<id>.lock`` and lands through an atomic rename, so hooks, proxies and the
monitor running in separate processes share one truth and never see a torn
file. The sessions directory lies under ``.openoxide/`` which the shipped
policies protect from agent writes: a model cannot flip its own mode.

This module holds the session file (:class:`Session`: creation, loading,
transactions, lifecycle, mode switches), its ids and the pin file. The owning
process is :mod:`guard.planning.owner`; which session decides for a worktree
is :mod:`guard.planning.deciding`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from guard.paths import data_dir, find_worktree, plan_dir
from guard.planning._store import atomic_write_text, locked
from guard.planning._vocabulary import PIN_FILE as PIN_FILE
from guard.planning._vocabulary import SESSION_ID_RE as SESSION_ID_RE
from guard.planning._vocabulary import SESSIONS_SUBDIR as SESSIONS_SUBDIR
from guard.planning._vocabulary import Mode as Mode
from guard.planning._vocabulary import SessionError as SessionError
from guard.planning._vocabulary import SessionNotFound as SessionNotFound
from guard.planning._vocabulary import check_session_id as check_session_id
from guard.planning._vocabulary import pinned_id as pinned_id
from guard.planning._vocabulary import sessions_dir as sessions_dir
from guard.planning._vocabulary import utc_now as utc_now
from guard.planning.artifact import artifact_path, find_written_plan, snapshot_plans
from guard.planning.checklist import PlanItem
from guard.planning.event_bus import Event, ModeChanged, TurnEnded
from guard.planning.event_bus import publish as publish_event
from guard.planning.owner import Owner

SessionState = Literal["open", "ended"]


class ExitRecord(BaseModel):
    """One answer to a plan exit (or a refused request), kept for the record."""

    model_config = ConfigDict(extra="forbid")

    at: str
    decision: Literal["approve", "reject", "refine", "refused"]
    text: str = ""
    plan_path: str | None = None
    plan_sha256: str | None = None
    by: str = "user"


class PendingRequest(BaseModel):
    """A request of the model that waits for the user (no one could be asked synchronously)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["plan_enter", "plan_exit", "request_user_input"]
    at: str
    detail: dict[str, Any] = Field(default_factory=dict)


def state_dirs(cwd: str | os.PathLike[str]) -> list[Path]:
    """The directories a session start may create for ``cwd`` (sessions, plans, their parents)."""
    start = Path(os.path.realpath(cwd))
    wt = find_worktree(start)
    out: list[Path] = []
    for leaf in (sessions_dir(start), plan_dir(start).path):
        for directory in (leaf, *leaf.parents):
            if wt is not None and directory == wt:
                break
            if wt is None and directory in (data_dir(), *data_dir().parents):
                break
            out.append(directory)
    return out


def new_session_id() -> str:
    """A fresh id: the UTC date and 8 random hex digits."""
    return datetime.now(UTC).strftime("%Y%m%d") + "-" + secrets.token_hex(4)


class Session(BaseModel):
    """One agent session: its mode, its fixed plan artifact path, its checklist.

    Change a session only through its methods (or :meth:`transaction`); they
    re-read the file under the lock, so concurrent processes never lose updates.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    version: Literal[1] = 1
    id: str
    mode: Mode
    state: SessionState = "open"
    owner: Owner | None = None
    ended_at: str | None = None
    end_reason: str | None = None
    plans_seen: dict[str, list[int]] = Field(default_factory=dict)
    worktree: str | None
    project: str
    plans_dir: str
    plan_path: str | None = None
    title: str | None = None
    created_at: str
    updated_at: str
    active_ns: int = 0
    turn: int = 0
    checklist: list[PlanItem] = Field(default_factory=list)
    explanation: str | None = None
    pending: list[PendingRequest] = Field(default_factory=list)
    inbox: list[str] = Field(default_factory=list)
    decisions: list[ExitRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    #: The host agents' session ids (Claude Code's ``session_id``, ...) bound to this
    #: session: their calls are decided by it wherever their cwd (guard.planning.binding).
    host_sessions: list[str] = Field(default_factory=list)
    #: Why this open session no longer decides (a newer one replaced it); None: it may.
    #: Only ``guard plan resume`` makes it decide again: ending or approving the newer
    #: session never brings an older one back.
    set_aside: str | None = None

    _dir: Path = PrivateAttr()

    # ---- locations -------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def path(self) -> Path:
        return self._dir / f"{self.id}.json"

    @property
    def lock_path(self) -> Path:
        return self._dir / f"{self.id}.lock"

    @property
    def events_path(self) -> Path:
        return self._dir / f"{self.id}.events.jsonl"

    # ---- creation and loading --------------------------------------------------------------

    @classmethod
    def start(
        cls,
        cwd: str | os.PathLike[str],
        mode: Mode | str = Mode.BUILD,
        *,
        id: str | None = None,
        title: str | None = None,
        owner: Owner | None = None,
    ) -> Session:
        """Create and persist a new session for the worktree (or project) around ``cwd``.

        Starting straight in plan mode fixes the plan artifact path at once.
        A given ``id`` (e.g. the host agent's session id) must not exist yet.
        ``owner`` is the process the session ends with (None: the user owns it
        and ends it with ``guard session end``).
        """
        try:
            mode = Mode(mode)
        except ValueError:
            raise SessionError(f"unknown mode {mode!r}: use 'build' or 'plan'") from None
        if not os.path.isdir(cwd):
            raise SessionError(f"cannot start a session in {os.fspath(cwd)!r}: not a directory")
        sid = check_session_id(id) if id is not None else new_session_id()
        directory = _ensure_dir(sessions_dir(cwd))
        real = Path(os.path.realpath(cwd))
        wt = find_worktree(real)
        pd = plan_dir(real)
        now = utc_now()
        session = cls(
            id=sid,
            mode=Mode.BUILD,
            worktree=str(wt) if wt else None,
            project=str(wt or real),
            plans_dir=str(pd.path),
            title=title,
            created_at=now,
            updated_at=now,
            active_ns=time.time_ns(),
            owner=owner,
        )
        session._dir = directory
        with locked(session.lock_path):
            if session.path.exists():
                raise SessionError(f"session {sid} already exists in {directory}")
            if mode is Mode.PLAN:
                session.mode = Mode.PLAN
                session.plan_path = str(artifact_path(session, title))
                Path(session.plans_dir).mkdir(parents=True, exist_ok=True)
                session.plans_seen = snapshot_plans(session.plans_dir)
            atomic_write_text(session.path, session.model_dump_json(indent=2) + "\n")
        if mode is Mode.PLAN:
            session.publish(
                ModeChanged(old=Mode.BUILD, new=Mode.PLAN, reason="session started in plan")
            )
        return session

    @classmethod
    def load(cls, id: str, cwd: str | os.PathLike[str]) -> Session:
        """Load session ``id`` of the worktree (or project) around ``cwd``."""
        check_session_id(id)
        return cls._read(sessions_dir(cwd) / f"{id}.json")

    @classmethod
    def load_or_start(
        cls, id: str, cwd: str | os.PathLike[str], mode: Mode | str = Mode.BUILD
    ) -> Session:
        """The session ``id`` if it exists, else a new one with that id (for host session ids)."""
        try:
            return cls.load(id, cwd)
        except SessionNotFound:
            try:
                return cls.start(cwd, mode, id=id)
            except SessionError:
                return cls.load(id, cwd)  # another process created it meanwhile

    @classmethod
    def load_file(cls, path: Path) -> Session:
        """Load the session stored in ``path`` (``<sessions dir>/<id>.json``)."""
        return cls._read(path)

    @classmethod
    def list_all(cls, cwd: str | os.PathLike[str]) -> list[Session]:
        """All sessions of the worktree around ``cwd``, most recently active first."""
        return cls.list_in(sessions_dir(cwd))

    @classmethod
    def list_in(cls, directory: Path) -> list[Session]:
        """All sessions stored in ``directory``, most recently active first."""
        if not directory.is_dir():
            return []
        found = [cls._read(p) for p in directory.glob("*.json")]
        found.sort(key=lambda s: (s.active_ns, s.updated_at), reverse=True)
        return found

    @classmethod
    def _read(cls, path: Path) -> Session:
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SessionNotFound(
                f"no session {path.stem!r} in {path.parent}: start one with"
                " `guard session start`, or pick one from `guard session list`"
            ) from None
        except OSError as exc:
            raise SessionError(f"cannot read session file {path}: {exc.strerror}") from None
        try:
            session = cls.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "file"
            raise SessionError(
                f"{path}: not a valid session file ({where}: {first['msg']});"
                " remove it or restore it from a backup"
            ) from None
        if session.id != path.stem:
            raise SessionError(
                f"{path}: holds session {session.id!r} but is named {path.stem!r};"
                " rename the file to match its id or remove it"
            )
        session._dir = path.parent
        return session

    def refresh(self) -> Session:
        """Re-read this session from disk (another process may have changed it)."""
        fresh = self._read(self.path)
        self._adopt(fresh)
        return self

    def _adopt(self, other: Session) -> None:
        for name in type(self).model_fields:
            setattr(self, name, getattr(other, name))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """Lock, re-read, let the block change the fresh copy, write it atomically.

        On an exception inside the block nothing is written. ``self`` reflects
        the stored state afterwards.
        """
        with locked(self.lock_path):
            fresh = self._read(self.path)
            yield fresh
            fresh.updated_at = utc_now()
            fresh.active_ns = max(time.time_ns(), fresh.active_ns + 1)
            atomic_write_text(self.path, fresh.model_dump_json(indent=2) + "\n")
        self._adopt(fresh)

    # ---- small operations ------------------------------------------------------------------

    def publish(self, event: Event) -> Path:
        """Record ``event`` in this session's event log and deliver it in this process."""
        return publish_event(self, event)

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def owner_alive(self) -> bool:
        """The owning process still runs (always true for a session the user owns)."""
        return self.owner is None or self.owner.alive()

    @property
    def live(self) -> bool:
        """Open, and its owner (if any) still runs."""
        return self.state == "open" and self.owner_alive

    @property
    def decides(self) -> bool:
        """May decide for its worktree: live, or orphaned in plan mode.

        A plan session whose owner died stays in plan mode (fail closed): only the user
        ends it (``guard session end``, ``guard plan exit --approve``) or takes it over
        (``guard plan resume``). An orphaned build session decides nothing.
        """
        if self.state != "open" or self.set_aside is not None:
            return False
        return self.owner_alive or self.mode is Mode.PLAN

    def orphan_note(self) -> str:
        """What a refusal under this session says when its owner is gone ("" otherwise)."""
        if self.state != "open" or self.owner is None or self.owner_alive:
            return ""
        return (
            f"Guard session {self.id} is orphaned: its owner {self.owner.describe()} is gone,"
            " and it stays in plan mode until the user acts: `guard plan exit --approve"
            f" --session {self.id}` approves its plan, `guard session end {self.id}` ends it,"
            f" `guard plan resume {self.id}` takes it over."
        )

    def resume(self) -> bool:
        """The user takes the session over: an orphaned session becomes the user's, a
        set-aside one decides again.

        False when there was nothing to resume (open, owned by a live process or the user).
        """
        with self.transaction() as s:
            if s.state == "ended":
                raise SessionError(
                    f"session {s.id} has ended ({s.end_reason or 'no reason given'}); an ended"
                    " session never decides again: start a new one with `guard plan start TITLE`"
                )
            changed = s.set_aside is not None
            if changed:
                s.notes.append(f"resumed by the user (it was set aside: {s.set_aside})")
                s.set_aside = None
            if s.owner is not None and not s.owner.alive():
                s.notes.append(f"resumed by the user after its owner {s.owner.describe()} died")
                s.owner = None
                changed = True
        return changed

    def set_aside_others(self, *, plans: bool) -> list[Session]:
        """Set aside the other open sessions of this session's directory (build ones; plan
        ones too with ``plans``): they stop deciding until ``guard plan resume``.
        Sessions owned by a running process (a ``guard mcp`` proxy) are left alone."""
        out: list[Session] = []
        for other in Session.list_in(self.directory):
            if other.id == self.id or other.state != "open" or other.set_aside is not None:
                continue
            if (other.mode is Mode.PLAN and not plans) or (other.owner and other.owner_alive):
                continue
            with other.transaction() as o:
                o.set_aside = f"replaced by session {self.id} at {utc_now()}"
            out.append(other)
        return out

    @property
    def status(self) -> str:
        """open, ended, orphaned (open but its owning process is gone), or set-aside
        (open, replaced by a newer session: decides nothing until resumed)."""
        if self.state == "ended":
            return "ended"
        if self.set_aside is not None:
            return "set-aside"
        return "open" if self.owner_alive else "orphaned"

    def end(self, reason: str) -> bool:
        """End the session (it no longer decides anything). False when it had ended already."""
        with self.transaction() as s:
            if s.state == "ended":
                return False
            s.state = "ended"
            s.ended_at = utc_now()
            s.end_reason = reason
        unpin(self.directory, self.id)
        return True

    def remove(self, created: Iterable[Path] = ()) -> None:
        """Delete every file of this session (for a start that failed before anything ran).

        ``created`` lists directories that did not exist before the start
        (see :func:`state_dirs`); they are removed too when nothing else is in them.
        """
        unpin(self.directory, self.id)
        for path in (self.path, self.events_path, self.lock_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        for directory in sorted(created, key=lambda p: len(p.parts), reverse=True):
            if directory == self.directory and [p.name for p in directory.iterdir()] == [
                ".gitignore"
            ]:
                (directory / ".gitignore").unlink()
            with contextlib.suppress(OSError):
                directory.rmdir()  # only when empty

    def adopt_written_plan(self) -> tuple[Path | None, list[Path]]:
        """While the fixed plan file is missing or empty, adopt the plan the model wrote.

        The one ``*.md`` file written directly in the plan directory since this
        session entered plan mode (not another session's plan file) becomes this
        session's plan file. Returns (the adopted file or None, the candidates):
        with several candidates nothing is adopted.
        """
        self.refresh()
        if self.mode is not Mode.PLAN or not self.plan_path:
            return None, []
        current = Path(self.plan_path)
        with contextlib.suppress(OSError):
            if not current.is_symlink() and current.is_file() and current.stat().st_size > 0:
                return None, []
        others = {s.plan_path for s in Session.list_in(self.directory) if s.id != self.id}
        found, candidates = find_written_plan(
            self.plans_dir, self.plans_seen, {p for p in others if p}
        )
        if found is None:
            return None, candidates
        with self.transaction() as s:
            if s.plan_path == self.plan_path:
                s.plan_path = str(found)
                s.notes.append(f"adopted the plan file {found} written by the model")
        return found, candidates

    def set_mode(self, mode: Mode | str, reason: str, *, via_approved_exit: bool = False) -> None:
        """Switch modes. Leaving plan mode needs an approved exit (see handshake.plan_exit)."""
        new = Mode(mode)
        with self.transaction() as s:
            if s.state == "ended":
                raise SessionError(
                    f"session {s.id} has ended ({s.end_reason or 'no reason given'});"
                    " start a new one: `guard plan start TITLE` or `guard session start`"
                )
            old = s.mode
            if old is new:
                return
            if old is Mode.PLAN and not via_approved_exit:
                raise SessionError(
                    f"session {s.id} is in plan mode; only an approved exit leaves it:"
                    f" run `guard plan exit --approve --session {s.id}`"
                    " (or --reject REASON / --refine NOTE)"
                )
            s.mode = new
            if new is Mode.PLAN:
                requested = [p for p in s.pending if p.kind == "plan_enter"]
                if s.title is None and requested and requested[-1].detail.get("title"):
                    s.title = str(requested[-1].detail["title"])
                s.plan_path = str(artifact_path(s, s.title))
                Path(s.plans_dir).mkdir(parents=True, exist_ok=True)
                s.plans_seen = snapshot_plans(s.plans_dir)
            s.pending = [p for p in s.pending if p.kind != "plan_enter"]
        self.publish(ModeChanged(old=old, new=new, reason=reason))

    def deliver(self, message: str) -> None:
        """Queue the user's words for the model: the next hook answer or planning tool result
        that reaches it takes them (:mod:`guard.planning.notes`)."""
        with self.transaction() as s:
            s.inbox.append(message)

    def take_inbox(self) -> list[str]:
        """Return and clear the messages waiting for the model."""
        if not self.inbox and not self.refresh().inbox:
            return []
        with self.transaction() as s:
            taken, s.inbox = s.inbox, []
        return taken

    def end_turn(self) -> int:
        """Mark the end of the model's turn (closes the todo-list item); returns the turn number."""
        with self.transaction() as s:
            ended = s.turn
            s.turn += 1
        self.publish(TurnEnded(turn=ended))
        return ended

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "mode": self.mode.value,
            "state": self.status,
            "owner": self.owner.describe() if self.owner else "user",
            "worktree": self.worktree,
            "plan_path": self.plan_path,
            "title": self.title,
            "updated_at": self.updated_at,
            "steps": len(self.checklist),
            "pending": [p.kind for p in self.pending],
        }


def _ensure_dir(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        with contextlib.suppress(FileExistsError):
            fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as handle:
                handle.write("# guard session state: local to this machine\n*\n")
    return directory


def pin(directory: Path, session_id: str) -> None:
    """Make session ``session_id`` the one that decides for its worktree while it is live."""
    atomic_write_text(directory / PIN_FILE, check_session_id(session_id) + "\n")


def unpin(directory: Path, session_id: str | None = None) -> None:
    """Drop the pin (only when it names ``session_id``, if given)."""
    path = directory / PIN_FILE
    if session_id is not None and pinned_id(directory) != session_id:
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def session_json(session: Session) -> str:
    return json.dumps(session.summary())
