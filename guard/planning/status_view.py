"""What ``guard plan status`` prints of a session, read without its models.

The session model (:class:`guard.planning.session.Session`) and the event models
(:mod:`guard.planning.event_bus`) are pydantic; loading them costs more than the whole
answer. :func:`plain_view` reads a session file as :mod:`guard.planning.session_file` does
(plain JSON, checked at least as strictly as the model) and :func:`plain_events` reads its
event log the same way: every line checked by hand, each field of exactly its JSON type.
Whatever the hand check does not accept (a file, or any one line) is left to the models:
:func:`view_of` for the session, :func:`events_of` for the log, so that a damaged or forged
file or line fails with the very error the models give (``read_events``'s
``FILE:LINE: not a valid event (...)``). The model path gives the same :class:`StatusView`.
"""

# Lazy imports: session and event models only for what the hand check leaves to them.

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.planning._vocabulary import Mode
from guard.planning.session_file import (
    Check,
    OwnerFacts,
    _int,
    _list,
    _one_of,
    _opt,
    _record,
    _str,
    misnamed,
    plain_data,
    read_raw,
)

if TYPE_CHECKING:
    from guard.planning.session import Session

Item = dict[str, str]  # {"step", "status"}, as PlanItem.model_dump(mode="json")


@dataclass(frozen=True)
class StatusView:
    """A session's fields that ``guard plan status`` prints."""

    id: str
    mode: Mode
    status: str
    owner: str  # who owns it, described (``user`` for none)
    plan_path: str | None
    plans_dir: str
    title: str | None
    created_at: str
    checklist: list[Item]
    explanation: str | None
    pending: list[tuple[str, str]]  # kind, at
    exits: list[dict[str, Any]]  # as ExitRecord.model_dump(mode="json")
    summary: dict[str, Any]  # as Session.summary()
    events_path: Path


def _summary(view: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": view["id"], "mode": view["mode"].value, "state": view["status"],
        "owner": view["owner"], "worktree": view["worktree"], "plan_path": view["plan_path"],
        "title": view["title"], "updated_at": view["updated_at"],
        "steps": len(view["checklist"]), "pending": [kind for kind, _ in view["pending"]],
    }  # fmt: skip


def _view(fields: dict[str, Any], directory: Path) -> StatusView:
    fields["summary"] = _summary(fields)
    del fields["worktree"], fields["updated_at"]
    return StatusView(**fields, events_path=directory / f"{fields['id']}.events.jsonl")


def view_of(session: Session) -> StatusView:
    """The view of a session the model loaded."""
    return _view(
        {
            "id": session.id, "mode": session.mode, "status": session.status,
            "owner": session.owner.describe() if session.owner else "user",
            "plan_path": session.plan_path, "plans_dir": session.plans_dir,
            "title": session.title, "created_at": session.created_at,
            "checklist": [i.model_dump(mode="json") for i in session.checklist],
            "explanation": session.explanation,
            "pending": [(p.kind, p.at) for p in session.pending],
            "exits": [d.model_dump(mode="json") for d in session.decisions],
            "worktree": session.worktree, "updated_at": session.updated_at,
        },
        session.directory,
    )  # fmt: skip


_EXIT_DEFAULTS = {"text": "", "plan_path": None, "plan_sha256": None, "by": "user"}


def plain_view(path: Path) -> StatusView | None:
    """The view of the session stored in ``path`` when the hand check accepts the file
    (:func:`guard.planning.session_file.plain_data`), else None (the model reads it)."""
    data = plain_data(read_raw(path))
    if data is None:
        return None
    if data["id"] != path.stem:
        raise misnamed(path, data["id"])
    o = data.get("owner")
    owner = None
    if o is not None:
        owner = OwnerFacts(o["pid"], o["started"], o["boot"], o["host"], o.get("command", ""))
    state, set_aside = data.get("state", "open"), data.get("set_aside")
    if state == "ended":
        status = "ended"
    elif set_aside is not None:
        status = "set-aside"
    else:
        status = "open" if owner is None or owner.alive() else "orphaned"
    return _view(
        {
            "id": data["id"], "mode": Mode(data["mode"]), "status": status,
            "owner": owner.describe() if owner else "user",
            "plan_path": data.get("plan_path"), "plans_dir": data["plans_dir"],
            "title": data.get("title"), "created_at": data["created_at"],
            "checklist": [{"step": i["step"].strip(), "status": i["status"]}
                          for i in data.get("checklist", [])],
            "explanation": data.get("explanation"),
            "pending": [(p["kind"], p["at"]) for p in data.get("pending", [])],
            "exits": [{"at": d["at"], "decision": d["decision"],
                       **{k: d.get(k, v) for k, v in _EXIT_DEFAULTS.items()}}
                      for d in data.get("decisions", [])],
            "worktree": data["worktree"], "updated_at": data["updated_at"],
        },
        path.parent,
    )  # fmt: skip


def read_view(path: Path) -> StatusView:
    """The view of the session in ``path``: by hand, else by the model (its errors)."""
    view = plain_view(path)
    if view is not None:
        return view
    from guard.planning.session import Session

    return view_of(Session.load_file(path))


# ---- the event log ------------------------------------------------------------------------

_OPT_STR = _opt(_str)
_MODE = _one_of("build", "plan")
_STEP = _record(
    {"step": lambda v: _str(v) and bool(v.strip()),
     "status": _one_of("pending", "in_progress", "completed")}, {})  # fmt: skip
_OPTION = _record({"label": lambda v: _str(v) and len(v) >= 1}, {"description": _str})
_QUESTION = _record(
    {"question": lambda v: _str(v) and len(v) >= 1,
     "options": lambda v: _list(_OPTION)(v) and len(v) >= 2},
    {"id": _OPT_STR, "header": _OPT_STR},
)  # fmt: skip
_COMMON = {"at": _str}
_OPTIONAL = {"session": _OPT_STR}
#: each event model of guard.planning.event_bus (type -> required, optional fields)
_EVENTS: dict[str, Check] = {
    kind: _record({**_COMMON, "type": _one_of(kind), **required}, {**_OPTIONAL, **optional})
    for kind, required, optional in (
        ("mode_changed", {"old": _MODE, "new": _MODE}, {"reason": _str}),
        ("plan_update", {"plan": _list(_STEP)},
         {"turn": _int, "explanation": _OPT_STR, "source": _str}),
        ("plan_delta", {"delta": _str}, {}),
        ("plan_completed", {"text": _str}, {"path": _OPT_STR}),
        ("user_input_requested",
         {"questions": lambda v: _list(_QUESTION)(v)}, {}),
        ("plan_exit", {"outcome": _one_of("requested", "refused", "approve", "reject",
                                          "refine")}, {"text": _str, "plan_path": _OPT_STR}),
        ("decision", {"action": _one_of("allow", "ask", "deny"), "reason": _str,
                      "rule": _str},
         {"agent": _OPT_STR, "tool": _OPT_STR, "effect": _opt(lambda v: type(v) is dict),
          "source": _str}),
        ("violation", {"path": _str, "kind": _str},
         {"detail": _str, "source": _str}),
        ("turn_ended", {"turn": _int}, {}),
    )
}  # fmt: skip


class _NotPlain(Exception):
    """A line the hand check leaves to the event models."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # a repeated key: the model's parser judges that
        raise _NotPlain
    return out


def _constant(name: str) -> Any:
    raise _NotPlain  # NaN, Infinity: not JSON


def _plain_event(raw: bytes) -> dict[str, Any]:
    if b"\\u" in raw:  # escapes (a lone surrogate...): the model's parser judges those
        raise _NotPlain
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except (ValueError, RecursionError):
        raise _NotPlain from None
    kind = data.get("type") if type(data) is dict else None
    check = _EVENTS.get(kind) if type(kind) is str else None
    if check is None or not check(data):
        raise _NotPlain
    event: dict[str, Any] = data
    return event


def plain_events(path: Path) -> list[dict[str, Any]] | None:
    """The events of the log at ``path`` as plain objects, each line as ``read_events``
    splits them (complete lines, blank ones skipped); None when any line is not accepted
    by the hand check (the models then read the log)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError:
        return None
    try:
        return [_plain_event(raw) for raw in data.split(b"\n")[:-1] if raw.strip()]
    except _NotPlain:
        return None


Decided = tuple[str, str, str, str, str]  # at, action, agent, tool, reason
Checklist = tuple[list[Item], str | None, str] | None  # items, explanation, source


def events_of(view: StatusView) -> tuple[list[Decided], Checklist]:
    """The decisions in a session's event log, and its latest checklist update (None when
    there is none): read by hand, or by the event models (raising their EventLogError)."""
    events = plain_events(view.events_path)
    if events is None:
        from guard.planning import event_bus as ev

        events = [ev.event_json(e) for e in ev.read_events(view)]
    decided: list[Decided] = []
    latest: Checklist = None
    for e in events:
        if e["type"] == "decision":
            decided.append(
                (e["at"], e["action"], e.get("agent") or "-", e.get("tool") or "-", e["reason"])
            )
        elif e["type"] == "plan_update":
            items = [{"step": i["step"].strip(), "status": i["status"]} for i in e["plan"]]
            latest = items, e.get("explanation"), e.get("source") or "update_plan"
    return decided, latest
