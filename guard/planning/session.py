"""Sessions and modes, shared by every process that works on one worktree.

A session is one JSON file, ``<worktree>/.openoxide/sessions/<id>.json`` (or
``<data dir>/sessions/<project key>/<id>.json`` outside version control).
Every change is a read-modify-write under an exclusive ``flock`` on
``<id>.lock`` and lands through an atomic rename, so hooks, proxies and the
monitor running in separate processes share one truth and never see a torn
file. The sessions directory lies under ``.openoxide/`` which the shipped
policies protect from agent writes: a model cannot flip its own mode.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from guard.effects import GuardError
from guard.paths import data_dir, find_worktree, plan_dir, project_key
from guard.planning._store import atomic_write_text, locked
from guard.planning.checklist import PlanItem

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
SESSIONS_SUBDIR = Path(".openoxide") / "sessions"


class SessionError(GuardError):
    """A session that cannot be found, read or changed as asked."""


class Mode(enum.StrEnum):
    BUILD = "build"
    PLAN = "plan"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


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


def sessions_dir(cwd: str | os.PathLike[str]) -> Path:
    """Where sessions for ``cwd`` live (worktree, or the data-dir fallback)."""
    start = Path(os.path.realpath(cwd))
    wt = find_worktree(start)
    if wt is not None:
        return wt / SESSIONS_SUBDIR
    return data_dir() / "sessions" / project_key(start)


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise SessionError(
            f"invalid session id {session_id!r}: use 1-128 characters from A-Z a-z 0-9 _ -,"
            " starting with a letter or digit (see `guard session list`)"
        )
    return session_id


def new_session_id() -> str:
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
    ) -> Session:
        """Create and persist a new session for the worktree (or project) around ``cwd``.

        Starting straight in plan mode fixes the plan artifact path at once.
        A given ``id`` (e.g. the host agent's session id) must not exist yet.
        """
        from guard.planning.artifact import artifact_path

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
        )
        session._dir = directory
        with locked(session.lock_path):
            if session.path.exists():
                raise SessionError(f"session {sid} already exists in {directory}")
            if mode is Mode.PLAN:
                session.mode = Mode.PLAN
                session.plan_path = str(artifact_path(session, title))
                Path(session.plans_dir).mkdir(parents=True, exist_ok=True)
            atomic_write_text(session.path, session.model_dump_json(indent=2) + "\n")
        if mode is Mode.PLAN:
            from guard.planning import events

            events.publish(
                session,
                events.ModeChanged(old=Mode.BUILD, new=Mode.PLAN, reason="session started in plan"),
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
    def list_all(cls, cwd: str | os.PathLike[str]) -> list[Session]:
        """All sessions of the worktree around ``cwd``, most recently active first."""
        directory = sessions_dir(cwd)
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

    def set_mode(self, mode: Mode | str, reason: str, *, via_approved_exit: bool = False) -> None:
        """Switch modes. Leaving plan mode needs an approved exit (see handshake.plan_exit)."""
        from guard.planning import events
        from guard.planning.artifact import artifact_path

        new = Mode(mode)
        with self.transaction() as s:
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
            s.pending = [p for p in s.pending if p.kind != "plan_enter"]
        events.publish(self, events.ModeChanged(old=old, new=new, reason=reason))

    def deliver(self, message: str) -> None:
        """Queue the user's words for the model's next planning tool call."""
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
        from guard.planning import events

        with self.transaction() as s:
            ended = s.turn
            s.turn += 1
        events.publish(self, events.TurnEnded(turn=ended))
        return ended

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "mode": self.mode.value,
            "worktree": self.worktree,
            "plan_path": self.plan_path,
            "title": self.title,
            "updated_at": self.updated_at,
            "steps": len(self.checklist),
            "pending": [p.kind for p in self.pending],
        }


class SessionNotFound(SessionError):
    """No session with that id."""


def _ensure_dir(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        with contextlib.suppress(FileExistsError):
            fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as handle:
                handle.write("# guard session state: local to this machine\n*\n")
    return directory


def current_mode(worktree_or_cwd: str | os.PathLike[str]) -> tuple[str, Session] | None:
    """The most recently active session of that worktree and its mode; None without sessions.

    A corrupt session file raises SessionError (callers deciding on it fail closed).
    """
    sessions = Session.list_all(worktree_or_cwd)
    if not sessions:
        return None
    latest = sessions[0]
    return latest.mode.value, latest


def session_json(session: Session) -> str:
    return json.dumps(session.summary())
