"""A session file read without its model: what ``guard mode`` prints, in a few milliseconds.

The session model (:class:`guard.planning.session.Session`) is pydantic; loading it costs
more than the whole answer of ``guard mode``. This module reads the same file with
:mod:`json` and checks every field by hand, at least as strictly as the model does:
:func:`plain_facts` gives a :class:`SessionFacts` (the fields a status line needs) for a
file it accepts and None for any other, which :func:`guard.planning.deciding.read_facts`
then hands to the model: it either accepts it too (a form the model coerces) or raises
its own error, so that a bad session file fails with the very line the model gives. What
follows from a session's fields (:class:`SessionLifecycle`: live, decides, status) is
shared by both readers. This module imports no other planning module but the bottom ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from guard.planning._liveness import describe_process, process_alive
from guard.planning._vocabulary import Mode, SessionError, SessionNotFound


class _Owner(Protocol):
    def alive(self) -> bool: ...
    def describe(self) -> str: ...


class SessionLifecycle:
    """What follows from a session's state, owner, mode and set-aside mark (shared by
    :class:`guard.planning.session.Session` and :class:`SessionFacts`)."""

    if TYPE_CHECKING:
        id: str
        mode: Mode
        state: str
        set_aside: str | None

        @property
        def owner(self) -> _Owner | None: ...

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

    @property
    def status(self) -> str:
        """open, ended, orphaned (open but its owning process is gone), or set-aside
        (open, replaced by a newer session: decides nothing until resumed)."""
        if self.state == "ended":
            return "ended"
        if self.set_aside is not None:
            return "set-aside"
        return "open" if self.owner_alive else "orphaned"


@dataclass(frozen=True, slots=True)
class OwnerFacts:
    pid: int
    started: int
    boot: str
    host: str
    command: str = ""

    def alive(self) -> bool:
        return process_alive(self.pid, self.started, self.boot, self.host)

    def describe(self) -> str:
        return describe_process(self.command, self.pid, self.host)


@dataclass(frozen=True)
class SessionFacts(SessionLifecycle):
    """A session file's fields that a status line prints, read without the model."""

    id: str
    mode: Mode
    state: str
    owner: OwnerFacts | None
    set_aside: str | None
    worktree: str | None
    project: str
    plan_path: str | None
    created_at: str
    updated_at: str
    active_ns: int
    directory: Path


def read_raw(path: Path) -> str:
    """The text of a session file, or the error the model's loader gives."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SessionNotFound(
            f"no session {path.stem!r} in {path.parent}: start one with"
            " `guard session start`, or pick one from `guard session list`"
        ) from None
    except OSError as exc:
        raise SessionError(f"cannot read session file {path}: {exc.strerror}") from None


def misnamed(path: Path, session_id: str) -> SessionError:
    return SessionError(
        f"{path}: holds session {session_id!r} but is named {path.stem!r};"
        " rename the file to match its id or remove it"
    )


# ---- the check by hand: only exact JSON types, never a coercion --------------------------

Check = Callable[[Any], bool]
_INT_LIMIT = 2**63


def _str(v: Any) -> bool:
    return type(v) is str


def _int(v: Any) -> bool:
    return type(v) is int and -_INT_LIMIT <= v < _INT_LIMIT


def _opt(check: Check) -> Check:
    return lambda v: v is None or check(v)


def _one_of(*values: Any) -> Check:
    return lambda v: type(v) is type(values[0]) and v in values


def _list(check: Check) -> Check:
    return lambda v: type(v) is list and all(check(x) for x in v)


def _record(required: dict[str, Check], optional: dict[str, Check]) -> Check:
    def check(v: Any) -> bool:
        if type(v) is not dict or not required.keys() <= v.keys():
            return False
        for key, value in v.items():
            field = required.get(key) or optional.get(key)
            if field is None or not field(value):
                return False
        return True

    return check


_OPT_STR = _opt(_str)
_OWNER = _record({"pid": _int, "started": _int, "boot": _str, "host": _str}, {"command": _str})
_ITEM = _record(
    {"step": lambda v: _str(v) and bool(v.strip()),
     "status": _one_of("pending", "in_progress", "completed")}, {})  # fmt: skip
_PENDING = _record(
    {"kind": _one_of("plan_enter", "plan_exit", "request_user_input"), "at": _str},
    {"detail": lambda v: type(v) is dict},
)
_EXIT = _record(
    {"at": _str, "decision": _one_of("approve", "reject", "refine", "refused")},
    {"text": _str, "plan_path": _OPT_STR, "plan_sha256": _OPT_STR, "by": _str},
)
#: the session model's fields (guard.planning.session.Session), each with its check
_SESSION = _record(
    {"id": _str, "mode": _one_of("build", "plan"), "worktree": _OPT_STR, "project": _str,
     "plans_dir": _str, "created_at": _str, "updated_at": _str},
    {"version": lambda v: type(v) is int and v == 1, "state": _one_of("open", "ended"),
     "owner": _opt(_OWNER), "ended_at": _OPT_STR, "end_reason": _OPT_STR,
     "plans_seen": lambda v: type(v) is dict and all(_list(_int)(x) for x in v.values()),
     "plan_path": _OPT_STR, "title": _OPT_STR, "active_ns": _int, "turn": _int,
     "checklist": _list(_ITEM), "explanation": _OPT_STR, "pending": _list(_PENDING),
     "inbox": _list(_str), "decisions": _list(_EXIT), "notes": _list(_str),
     "host_sessions": _list(_str), "set_aside": _OPT_STR},
)  # fmt: skip


def plain_data(raw: str) -> dict[str, Any] | None:
    """The file's object when the hand check accepts it, else None (the model decides)."""
    if "\\u" in raw:  # escapes (a lone surrogate...): the model's parser judges those
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if _SESSION(data) else None


def plain_facts(path: Path) -> SessionFacts | None:
    """The facts of the session stored in ``path`` when the hand check accepts the file;
    None when it does not (the model then reads it: :func:`guard.planning.deciding.read_facts`).
    A file that cannot be read, or that holds another session, raises the model's error."""
    data = plain_data(read_raw(path))
    if data is None:
        return None
    if data["id"] != path.stem:
        raise misnamed(path, data["id"])
    o = data.get("owner")
    return SessionFacts(
        id=data["id"], mode=Mode(data["mode"]), state=data.get("state", "open"),
        owner=OwnerFacts(o["pid"], o["started"], o["boot"], o["host"], o.get("command", ""))
        if o else None,
        set_aside=data.get("set_aside"), worktree=data["worktree"], project=data["project"],
        plan_path=data.get("plan_path"), created_at=data["created_at"],
        updated_at=data["updated_at"], active_ns=data.get("active_ns", 0),
        directory=path.parent,
    )  # fmt: skip
