from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard.effects import Action, Decision, Effect
from guard.planning import (
    Session,
    event_bus,
    publish,
    publish_current,
    read_events,
    subscribe,
    update_plan,
)
from guard.planning.checklist import PlanItem, StepStatus
from guard.planning.event_bus import (
    EventLogError,
    PlanUpdate,
    TodoListProjection,
    TurnEnded,
    parse_event,
    project_todo_list,
)
from guard.planning.session import Mode

ALL = [
    event_bus.ModeChanged(old=Mode.BUILD, new=Mode.PLAN, reason="r"),
    event_bus.PlanUpdate(plan=[PlanItem(step="a", status=StepStatus.IN_PROGRESS)]),
    event_bus.PlanDelta(delta="# P"),
    event_bus.PlanCompleted(text="# P\n", path="/x.md"),
    event_bus.UserInputRequested(
        questions=[{"question": "q", "options": [{"label": "a"}, {"label": "b"}]}]  # type: ignore[list-item]
    ),
    event_bus.PlanExit(outcome="approve"),
    event_bus.Decision.from_decision(
        Decision(
            Action.DENY,
            "plan agent may not write",
            "agents.plan.default",
            Effect.write("/r/src/x.py"),
        ),
        agent="plan",
        tool="write",
        source="claude_code",
    ),
    event_bus.Violation(path="/r/src/x.py", kind="modified", source="monitor"),
    event_bus.TurnEnded(turn=3),
]


@pytest.mark.parametrize("event", ALL, ids=lambda e: e.type)
def test_events_round_trip_through_json(event: event_bus.Event) -> None:
    text = event.model_dump_json()
    json.loads(text)
    assert parse_event(text) == event
    assert parse_event(json.loads(text)) == event


def test_unknown_event_fields_are_rejected() -> None:
    with pytest.raises(ValueError, match="extra"):
        parse_event({"type": "turn_ended", "turn": 1, "bogus": True})


def test_decision_event_keeps_the_effect() -> None:
    ev = ALL[6]
    assert isinstance(ev, event_bus.Decision)
    assert ev.action is Action.DENY
    assert ev.effect == {"kind": "write", "target": "/r/src/x.py"}


def test_publish_appends_to_session_jsonl_and_notifies(session: Session) -> None:
    got: list[event_bus.Event] = []
    stop = subscribe(got.append, session.id)
    try:
        path = publish(session, event_bus.Violation(path="/p", kind="chmod"))
    finally:
        stop()
    assert path == session.events_path
    lines = session.events_path.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["session"] == session.id
    assert len(got) == 1 and got[0].session == session.id
    publish(session, event_bus.TurnEnded(turn=0))
    assert len(got) == 1, "unsubscribed callbacks get nothing"


def test_publish_by_worktree_goes_to_the_current_session(repo: Path) -> None:
    Session.start(repo)
    newest = Session.start(repo)
    sub = repo / "deep"
    sub.mkdir()
    assert publish_current(sub, event_bus.Violation(path="/x", kind="write")) == newest.events_path
    assert [e.type for e in read_events(newest)] == ["violation"]


def test_publish_without_any_session_reaches_subscribers_only(repo: Path) -> None:
    got: list[event_bus.Event] = []
    stop = subscribe(got.append)
    try:
        assert publish_current(repo, event_bus.Violation(path="/x", kind="write")) is None
    finally:
        stop()
    assert len(got) == 1 and not (repo / ".openoxide").exists()


def test_a_failing_subscriber_does_not_stop_others(session: Session) -> None:
    got: list[event_bus.Event] = []

    def broken(_e: event_bus.Event) -> None:
        raise RuntimeError("subscriber bug")

    stops = [subscribe(broken), subscribe(got.append)]
    try:
        publish(session, event_bus.TurnEnded(turn=0))
    finally:
        for stop in stops:
            stop()
    assert len(got) == 1


def test_malformed_event_line_names_file_and_line(session: Session) -> None:
    publish(session, event_bus.TurnEnded(turn=0))
    with session.events_path.open("a") as handle:
        handle.write('{"type": "nonsense"}\n')
    with pytest.raises(EventLogError, match=rf"{session.events_path.name}:2"):
        read_events(session)


def test_follow_yields_events_as_they_arrive(session: Session) -> None:
    publish(session, event_bus.TurnEnded(turn=0))
    stream = event_bus.follow(session, poll=0.01, stop=lambda: False)
    assert next(stream).type == "turn_ended"
    publish(session, event_bus.PlanDelta(delta="x"))
    assert next(stream).type == "plan_delta"


def _upd(*statuses: str) -> PlanUpdate:
    return PlanUpdate(
        plan=[PlanItem(step=f"s{i}", status=StepStatus(s)) for i, s in enumerate(statuses)]
    )


def test_todo_list_projection_lifecycle() -> None:
    stream: list[event_bus.Event] = [
        _upd("in_progress", "pending"),
        _upd("completed", "in_progress"),
        TurnEnded(turn=0),
        TurnEnded(turn=1),  # a turn without updates produces nothing
        _upd("completed", "completed"),
        TurnEnded(turn=2),
    ]
    out = project_todo_list(stream)
    assert [(e.type, e.item_id) for e in out] == [
        ("item.started", "todo-1"),
        ("item.updated", "todo-1"),
        ("item.completed", "todo-1"),
        ("item.started", "todo-2"),
        ("item.completed", "todo-2"),
    ]
    assert [i.completed for i in out[1].items] == [True, False]
    assert [i.completed for i in out[2].items] == [True, False], "in_progress is not completed"
    assert [i.completed for i in out[4].items] == [True, True]
    assert TodoListProjection().end_turn() is None


def test_projection_from_a_real_session_log(session: Session) -> None:
    update_plan(session, {"plan": [{"step": "a", "status": "in_progress"}]})
    update_plan(session, {"plan": [{"step": "a", "status": "completed"}]})
    session.end_turn()
    out = project_todo_list(read_events(session))
    assert [e.type for e in out] == ["item.started", "item.updated", "item.completed"]
    assert out[-1].items[0].completed is True
