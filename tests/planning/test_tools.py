from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard.planning import TOOL_DEFINITIONS, Mode, Session, UserDecision, handle_tool_call
from guard.planning.handshake import UPDATE_PLAN_IN_PLAN_MODE

from .conftest import write_plan_file


def test_tool_definitions_have_mcp_shape_and_strict_schemas() -> None:
    names = [t["name"] for t in TOOL_DEFINITIONS]
    assert names == ["plan_enter", "plan_exit", "update_plan", "request_user_input"]
    for tool in TOOL_DEFINITIONS:
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and tool["description"]
        assert schema.get("additionalProperties") is False, tool["name"]
    plan = TOOL_DEFINITIONS[2]["inputSchema"]
    assert plan["required"] == ["plan"]
    item = plan["$defs"]["PlanItem"]
    assert item["additionalProperties"] is False
    assert plan["$defs"]["StepStatus"]["enum"] == ["pending", "in_progress", "completed"]


def test_full_loop_through_the_dispatcher(session: Session) -> None:
    r = handle_tool_call(session, "plan_enter", {"title": "Add X"}, ask_enter=lambda _r: True)
    assert not r.is_error and session.refresh().mode is Mode.PLAN
    r = handle_tool_call(session, "update_plan", {"plan": [{"step": "a", "status": "in_progress"}]})
    assert r.is_error and r.text == UPDATE_PLAN_IN_PLAN_MODE
    r = handle_tool_call(session, "plan_exit", {}, ask_exit=lambda _r: UserDecision.approve())
    assert r.is_error and "refused" in r.text
    write_plan_file(session)
    r = handle_tool_call(session, "plan_exit", {}, ask_exit=lambda _r: UserDecision.approve())
    assert not r.is_error and session.refresh().mode is Mode.BUILD
    r = handle_tool_call(session, "update_plan", {"plan": [{"step": "a", "status": "in_progress"}]})
    assert not r.is_error
    assert r.to_mcp() == {"content": [{"type": "text", "text": r.text}], "isError": False}


def test_unknown_tool_and_bad_arguments_are_errors(session: Session) -> None:
    assert handle_tool_call(session, "rm_rf", {}).is_error
    r = handle_tool_call(session, "plan_enter", {"titel": "typo"})
    assert r.is_error and "titel" in r.text and "title" in r.text
    r = handle_tool_call(session, "plan_exit", {"summary": 3})
    assert r.is_error and "must be strings" in r.text
    r = handle_tool_call(session, "plan_enter", "{not json")
    assert r.is_error and "not valid JSON" in r.text
    assert session.refresh().mode is Mode.BUILD


def test_internal_failure_is_a_refusal_not_a_crash(session: Session) -> None:
    """Fail closed: a session file deleted underneath gives an error result, no exception."""
    session.path.unlink()
    r = handle_tool_call(session, "plan_enter", {}, ask_enter=lambda _r: True)
    assert r.is_error and "refused" in r.text


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(["plan_enter", "plan_exit", "update_plan", "request_user_input", "x"]),
    arguments=JSONISH,
)
def test_dispatcher_never_raises_and_never_leaves_plan_mode_unasked(
    plan_session: Session, name: str, arguments: Any
) -> None:
    """Attack: arbitrary tool payloads must never crash the proxy nor flip plan mode.

    One session serves all examples (state accumulating across them is part of the test).
    """
    s = plan_session
    write_plan_file(s)
    result = handle_tool_call(s, name, arguments)
    assert isinstance(result.text, str) and result.text
    assert s.refresh().mode is Mode.PLAN
