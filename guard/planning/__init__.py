"""The planning runtime: sessions and modes, the plan-mode handshake, the checklist,
plan artifacts, the ``<proposed_plan>`` stream parser and typed events.

Three concepts stay separate: the execution checklist (``update_plan``), plan
mode (``plan_enter``/``plan_exit``), and the plan artifact (a markdown file).

Names are imported on first use (as in :mod:`guard`): the gate reads a session's mode
without loading the checklist, the handshake or the stream parser.
"""

# Lazy imports: submodules on first attribute use: hooks import guard.planning (start-up speed).

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guard.planning._vocabulary import Mode
    from guard.planning.artifact import read_plan, slugify, write_plan
    from guard.planning.checklist import (
        PayloadError,
        PlanItem,
        Question,
        RequestUserInputArgs,
        StepStatus,
        UpdatePlanArgs,
    )
    from guard.planning.current import CurrentAgent, describe_current_agent
    from guard.planning.deciding import current_mode, deciding_session
    from guard.planning.event_bus import publish, read_events, subscribe
    from guard.planning.handshake import (
        ExitChoice,
        Outcome,
        UserDecision,
        plan_enter,
        plan_exit,
        request_user_input,
        update_plan,
    )
    from guard.planning.owner import Owner
    from guard.planning.runtime import (
        list_plans,
        plan_file_instruction,
        publish_current,
    )
    from guard.planning.session import Session, SessionError, sessions_dir
    from guard.planning.stream import ProposedPlanParser, Segment, stream_into_session
    from guard.planning.tools import TOOL_DEFINITIONS, ToolResult, handle_tool_call

_WHERE = {
    "Mode": "_base",
    "read_plan": "artifact",
    "slugify": "artifact",
    "write_plan": "artifact",
    "PayloadError": "checklist",
    "PlanItem": "checklist",
    "Question": "checklist",
    "RequestUserInputArgs": "checklist",
    "StepStatus": "checklist",
    "UpdatePlanArgs": "checklist",
    "publish": "events",
    "read_events": "events",
    "subscribe": "events",
    "ExitChoice": "handshake",
    "Outcome": "handshake",
    "UserDecision": "handshake",
    "plan_enter": "handshake",
    "plan_exit": "handshake",
    "request_user_input": "handshake",
    "update_plan": "handshake",
    "CurrentAgent": "current",
    "describe_current_agent": "current",
    "list_plans": "runtime",
    "plan_file_instruction": "runtime",
    "publish_current": "runtime",
    "Owner": "owner",
    "Session": "session",
    "SessionError": "session",
    "current_mode": "deciding",
    "deciding_session": "deciding",
    "sessions_dir": "session",
    "ProposedPlanParser": "stream",
    "Segment": "stream",
    "stream_into_session": "stream",
    "TOOL_DEFINITIONS": "tools",
    "ToolResult": "tools",
    "handle_tool_call": "tools",
}

__all__ = [
    "TOOL_DEFINITIONS",
    "CurrentAgent",
    "ExitChoice",
    "Mode",
    "Outcome",
    "Owner",
    "PayloadError",
    "PlanItem",
    "ProposedPlanParser",
    "Question",
    "RequestUserInputArgs",
    "Segment",
    "Session",
    "SessionError",
    "StepStatus",
    "ToolResult",
    "UpdatePlanArgs",
    "UserDecision",
    "current_mode",
    "deciding_session",
    "describe_current_agent",
    "handle_tool_call",
    "list_plans",
    "plan_enter",
    "plan_exit",
    "plan_file_instruction",
    "publish",
    "publish_current",
    "read_events",
    "read_plan",
    "request_user_input",
    "sessions_dir",
    "slugify",
    "stream_into_session",
    "subscribe",
    "update_plan",
    "write_plan",
]


def _module(name: str) -> ModuleType:
    if name == "_base":
        from guard.planning import _vocabulary

        return _vocabulary
    if name == "artifact":
        from guard.planning import artifact

        return artifact
    if name == "checklist":
        from guard.planning import checklist

        return checklist
    if name == "current":
        from guard.planning import current

        return current
    if name == "deciding":
        from guard.planning import deciding

        return deciding
    if name == "events":
        from guard.planning import event_bus

        return event_bus
    if name == "handshake":
        from guard.planning import handshake

        return handshake
    if name == "owner":
        from guard.planning import owner

        return owner
    if name == "runtime":
        from guard.planning import runtime

        return runtime
    if name == "session":
        from guard.planning import session

        return session
    if name == "stream":
        from guard.planning import stream

        return stream
    from guard.planning import tools

    return tools


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'guard.planning' has no attribute {name!r}")
    value = getattr(_module(module), name)
    globals()[name] = value
    return value
