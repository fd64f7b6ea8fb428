"""Typed events on one bus: appended to the session's JSONL, delivered to in-process subscribers.

Every layer publishes here: the planning runtime (mode changes, checklist
updates, plan deltas), the hook adapters and the MCP proxy (decisions), the
monitor (violations). ``guard events --follow`` tails the JSONL.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from guard import effects
from guard.effects import GuardError
from guard.planning._store import append_lines
from guard.planning._vocabulary import Mode, utc_now
from guard.planning.checklist import PlanItem, Question, StepStatus

log = logging.getLogger(__name__)


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    at: str = Field(default_factory=utc_now)
    session: str | None = None


class ModeChanged(_Event):
    type: Literal["mode_changed"] = "mode_changed"
    old: Mode
    new: Mode
    reason: str = ""


class PlanUpdate(_Event):
    """The checklist as ``update_plan`` set it, or a host's own checklist tool.

    ``source`` is empty for guard's ``update_plan``, else the host and its tool
    (``claude-code TodoWrite``: :mod:`guard.planning.todos`).
    """

    type: Literal["plan_update"] = "plan_update"
    turn: int = 0
    explanation: str | None = None
    plan: list[PlanItem]
    source: str = ""


class PlanDelta(_Event):
    """A piece of a streamed ``<proposed_plan>`` block."""

    type: Literal["plan_delta"] = "plan_delta"
    delta: str


class PlanCompleted(_Event):
    """A proposed plan is complete (the last block of a stream); ``path`` if it was written."""

    type: Literal["plan_completed"] = "plan_completed"
    text: str
    path: str | None = None


class UserInputRequested(_Event):
    type: Literal["user_input_requested"] = "user_input_requested"
    questions: list[Question]


class PlanExit(_Event):
    """A plan-exit request and its outcome: requested, refused, approve, reject, refine."""

    type: Literal["plan_exit"] = "plan_exit"
    outcome: Literal["requested", "refused", "approve", "reject", "refine"]
    text: str = ""
    plan_path: str | None = None


class Decision(_Event):
    """A policy decision taken by some layer (hook adapter, MCP proxy, CLI)."""

    type: Literal["decision"] = "decision"
    action: effects.Action
    reason: str
    rule: str
    agent: str | None = None
    tool: str | None = None
    effect: dict[str, Any] | None = None
    source: str = ""

    @classmethod
    def from_decision(
        cls,
        decision: effects.Decision,
        *,
        agent: str | None = None,
        tool: str | None = None,
        source: str = "",
    ) -> Decision:
        return cls(
            action=decision.action,
            reason=decision.reason,
            rule=decision.rule,
            agent=agent,
            tool=tool,
            effect=decision.effect.to_json() if decision.effect is not None else None,
            source=source,
        )


class Violation(_Event):
    """Something changed that should not have (reported by the monitor or a sandbox)."""

    type: Literal["violation"] = "violation"
    path: str
    kind: str
    detail: str = ""
    source: str = ""


class TurnEnded(_Event):
    type: Literal["turn_ended"] = "turn_ended"
    turn: int


Event = Annotated[
    ModeChanged
    | PlanUpdate
    | PlanDelta
    | PlanCompleted
    | UserInputRequested
    | PlanExit
    | Decision
    | Violation
    | TurnEnded,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


class EventLogError(GuardError):
    """A session event log line that is not a valid event."""


def parse_event(data: str | bytes | dict[str, Any]) -> Event:
    if isinstance(data, dict):
        return EVENT_ADAPTER.validate_python(data)
    return EVENT_ADAPTER.validate_json(data)


# ---- the in-process bus ------------------------------------------------------------------

Subscriber = Callable[[Event], None]
_lock = threading.Lock()
_subscribers: list[tuple[str | None, Subscriber]] = []


def subscribe(callback: Subscriber, session_id: str | None = None) -> Callable[[], None]:
    """Call ``callback`` for each event published in this process (of one session, or all).

    Returns a function that unsubscribes.
    """
    entry = (session_id, callback)
    with _lock:
        _subscribers.append(entry)

    def unsubscribe() -> None:
        with _lock:
            if entry in _subscribers:
                _subscribers.remove(entry)

    return unsubscribe


class Recorder(Protocol):
    """What publishing needs of a session: its id and its event log (a ``Session``)."""

    @property
    def id(self) -> str: ...

    @property
    def events_path(self) -> Path: ...


def publish(session: Recorder, event: Event) -> Path:
    """Append ``event`` to the session's event log and deliver it in this process.

    The event is stamped with the session's id. Returns the JSONL file. A
    subscriber that raises is logged and does not stop the others.
    """
    return publish_many(session, [event])


def publish_many(session: Recorder, batch: list[Event], *, sync: bool = True) -> Path:
    """Append ``batch`` to the session's event log in one write, then deliver it in order.

    All the events are in the log or none is. ``sync=False`` leaves the fsync to
    the caller (the MCP proxy's buffered writer syncs in the background).
    """
    stamped = [
        e if e.session is not None else e.model_copy(update={"session": session.id})
        for e in batch
    ]
    append_lines(session.events_path, [e.model_dump_json() for e in stamped], sync=sync)
    for event in stamped:
        deliver(event)
    return session.events_path


def deliver(event: Event) -> None:
    """Hand ``event`` to this process's subscribers only (nothing is written)."""
    with _lock:
        targets = [cb for sid, cb in _subscribers if sid is None or sid == event.session]
    for callback in targets:
        try:
            callback(event)
        except Exception:  # a broken subscriber must not break the publisher
            log.exception("event subscriber %r failed on %s", callback, event.type)


def read_events(session: Recorder) -> list[Event]:
    """All events of a session, in order. A malformed line raises EventLogError naming it."""
    return list(_iter_file(session.events_path, follow=False))


def follow(
    session: Recorder,
    *,
    from_start: bool = True,
    poll: float = 0.2,
    stop: Callable[[], bool] | None = None,
) -> Iterator[Event]:
    """Yield a session's events as they are appended (like ``tail -f``) until ``stop()``."""
    return _iter_file(session.events_path, follow=True, from_start=from_start, poll=poll, stop=stop)


def _iter_file(
    path: Path,
    *,
    follow: bool,
    from_start: bool = True,
    poll: float = 0.2,
    stop: Callable[[], bool] | None = None,
) -> Iterator[Event]:
    position = 0
    lineno = 0
    if not from_start and path.exists():
        with path.open("rb") as handle:
            data = handle.read()
        position = data.rfind(b"\n") + 1
        lineno = data.count(b"\n")
    buffer = b""
    while True:
        chunk = b""
        if path.exists():
            with path.open("rb") as handle:
                handle.seek(position)
                chunk = handle.read()
            position += len(chunk)
        buffer += chunk
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            lineno += 1
            if not raw.strip():
                continue
            try:
                yield parse_event(raw)
            except (ValidationError, ValueError) as exc:
                raise EventLogError(
                    f"{path}:{lineno}: not a valid event ({str(exc).splitlines()[0]});"
                    " remove or fix that line"
                ) from None
        if not follow or (stop is not None and stop()):
            return
        time.sleep(poll)


# ---- the todo-list projection --------------------------------------------------------------


class TodoItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    completed: bool


class TodoListEvent(BaseModel):
    """A ``todo_list`` item lifecycle event projected from checklist updates."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["item.started", "item.updated", "item.completed"]
    item_id: str
    items: list[TodoItem]


class TodoListProjection:
    """Turns ``PlanUpdate``/``TurnEnded`` into ``item.started|updated|completed``.

    The first update of a turn starts an item, later updates of that turn
    update it, the end of the turn completes it. An item's ``completed`` is
    true only for completed steps.
    """

    def __init__(self, prefix: str = "todo") -> None:
        self._prefix = prefix
        self._count = 0
        self._open: str | None = None
        self._items: list[TodoItem] = []

    def apply(self, event: Event) -> TodoListEvent | None:
        if isinstance(event, PlanUpdate):
            return self.update(event.plan)
        if isinstance(event, TurnEnded):
            return self.end_turn()
        return None

    def update(self, plan: list[PlanItem]) -> TodoListEvent:
        self._items = [
            TodoItem(text=i.step, completed=i.status is StepStatus.COMPLETED) for i in plan
        ]
        if self._open is None:
            self._count += 1
            self._open = f"{self._prefix}-{self._count}"
            kind: Literal["item.started", "item.updated"] = "item.started"
        else:
            kind = "item.updated"
        return TodoListEvent(type=kind, item_id=self._open, items=list(self._items))

    def end_turn(self) -> TodoListEvent | None:
        if self._open is None:
            return None
        done = TodoListEvent(type="item.completed", item_id=self._open, items=list(self._items))
        self._open = None
        return done


def project_todo_list(events: Iterable[Event]) -> list[TodoListEvent]:
    projection = TodoListProjection()
    out: list[TodoListEvent] = []
    for event in events:
        projected = projection.apply(event)
        if projected is not None:
            out.append(projected)
    return out


def event_json(event: Event) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(event.model_dump_json())
    return result
