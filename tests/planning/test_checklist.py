from __future__ import annotations

from typing import Any

import pytest

from guard.planning import (
    Mode,
    PayloadError,
    Session,
    StepStatus,
    UpdatePlanArgs,
    read_events,
    request_user_input,
    update_plan,
)
from guard.planning.checklist import RequestUserInputArgs, parse_update_plan
from guard.planning.handshake import UPDATE_PLAN_IN_PLAN_MODE


def steps(*statuses: str) -> dict[str, Any]:
    return {"plan": [{"step": f"step {n}", "status": s} for n, s in enumerate(statuses)]}


@pytest.mark.parametrize(
    "statuses",
    [
        ("in_progress",),
        ("completed", "in_progress", "pending"),
        ("completed", "completed"),
        ("in_progress", "pending", "pending"),
    ],
)
def test_valid_checklists_are_accepted(session: Session, statuses: tuple[str, ...]) -> None:
    out = update_plan(session, steps(*statuses))
    assert out.ok
    assert [i.status.value for i in session.refresh().checklist] == list(statuses)


@pytest.mark.parametrize(
    ("statuses", "hint"),
    [
        (("pending", "pending"), "mark the step you are working on"),
        (("completed", "pending"), "mark the step you are working on"),
        (("in_progress", "in_progress"), "keep one"),
        (("in_progress", "completed", "in_progress"), "plan[0], plan[2]"),
    ],
)
def test_exactly_one_in_progress_while_incomplete(
    session: Session, statuses: tuple[str, ...], hint: str
) -> None:
    with pytest.raises(PayloadError, match="exactly one step must be in_progress") as info:
        update_plan(session, steps(*statuses))
    assert hint in str(info.value)
    assert session.refresh().checklist == []


@pytest.mark.parametrize(
    ("payload", "expect"),
    [
        ({"plan": [{"step": "  ", "status": "in_progress"}]}, "plan[0].step"),
        ({"plan": [{"step": "x", "status": "done"}]}, "plan[0].status"),
        ({"plan": [{"step": "x", "status": "in_progress", "owner": "me"}]}, "plan[0].owner"),
        ({"plan": [], "explanation": "none"}, "plan"),
        ({"steps": []}, "steps"),
        ({}, "plan"),
        ("not json", "not valid JSON"),
        ([1, 2], "arguments"),
    ],
)
def test_malformed_payloads_get_an_actionable_message(
    session: Session, payload: Any, expect: str
) -> None:
    with pytest.raises(PayloadError) as info:
        update_plan(session, payload)
    message = str(info.value)
    assert expect in message
    assert '"status": "in_progress"' in message, "the message shows a valid shape"
    assert session.refresh().checklist == []


def test_update_plan_is_refused_in_plan_mode(plan_session: Session) -> None:
    """Attack: a plan-mode model using the checklist as a back door into 'doing' work."""
    out = update_plan(plan_session, steps("in_progress"))
    assert not out.ok
    assert out.text == "update_plan is a TODO/checklist tool and is not allowed in Plan mode"
    assert out.text == UPDATE_PLAN_IN_PLAN_MODE
    assert plan_session.refresh().checklist == []


def test_update_plan_accepts_a_model_and_strips_steps(session: Session) -> None:
    args = UpdatePlanArgs.model_validate(
        {"explanation": "why", "plan": [{"step": "  a  ", "status": "in_progress"}]}
    )
    assert update_plan(session, args).ok
    stored = session.refresh()
    assert stored.checklist[0].step == "a" and stored.explanation == "why"
    assert stored.checklist[0].status is StepStatus.IN_PROGRESS
    ev = read_events(stored)[-1]
    assert ev.type == "plan_update" and ev.plan[0].step == "a"  # type: ignore[union-attr]


def test_parse_update_plan_accepts_json_text() -> None:
    args = parse_update_plan('{"plan": [{"step": "a", "status": "completed"}]}')
    assert args.plan[0].status is StepStatus.COMPLETED


QUESTION = {"question": "Which store?", "options": [{"label": "SQLite"}, {"label": "Redis"}]}


def test_request_user_input_only_in_plan_mode(session: Session) -> None:
    out = request_user_input(session, {"questions": [QUESTION]})
    assert not out.ok and "only available in Plan mode" in out.text
    assert session.refresh().pending == []


def test_request_user_input_with_asker_returns_answers(plan_session: Session) -> None:
    def ask(args: RequestUserInputArgs) -> list[str]:
        return [q.options[1].label for q in args.questions]

    out = request_user_input(plan_session, {"questions": [QUESTION]}, ask)
    assert out.ok and out.answers == ["Redis"] and "A: Redis" in out.text
    assert read_events(plan_session)[-1].type == "user_input_requested"


def test_request_user_input_without_asker_is_pending(plan_session: Session) -> None:
    out = request_user_input(plan_session, {"questions": [QUESTION]})
    assert out.ok and out.pending
    assert [p.kind for p in plan_session.refresh().pending] == ["request_user_input"]


@pytest.mark.parametrize(
    ("questions", "expect"),
    [
        ([{"question": "Which?"}], "questions[0].options"),
        ([{"question": "Which?", "options": []}], "questions[0].options"),
        ([{"question": "Which?", "options": [{"label": "only"}]}], "questions[0].options"),
        ([{"question": "", "options": [{"label": "a"}, {"label": "b"}]}], "questions[0].question"),
        ([], "questions"),
    ],
)
def test_each_question_needs_options(
    plan_session: Session, questions: list[dict[str, Any]], expect: str
) -> None:
    with pytest.raises(PayloadError) as info:
        request_user_input(plan_session, {"questions": questions})
    assert expect in str(info.value)
    assert plan_session.refresh().mode is Mode.PLAN
