"""The planning runtime: sessions and modes, the plan-mode handshake, the checklist,
plan artifacts, the ``<proposed_plan>`` stream parser and typed events.

Three concepts stay separate: the execution checklist (``update_plan``), plan
mode (``plan_enter``/``plan_exit``), and the plan artifact (a markdown file).
"""

from guard.planning._base import Mode
from guard.planning.artifact import read_plan, slugify, write_plan
from guard.planning.checklist import (
    PayloadError,
    PlanItem,
    Question,
    RequestUserInputArgs,
    StepStatus,
    UpdatePlanArgs,
)
from guard.planning.events import publish, read_events, subscribe
from guard.planning.handshake import (
    ExitChoice,
    Outcome,
    UserDecision,
    plan_enter,
    plan_exit,
    request_user_input,
    update_plan,
)
from guard.planning.runtime import (
    CurrentAgent,
    describe_current_agent,
    list_plans,
    plan_file_instruction,
    publish_current,
)
from guard.planning.session import (
    Owner,
    Session,
    SessionError,
    current_mode,
    deciding_session,
    sessions_dir,
)
from guard.planning.stream import ProposedPlanParser, Segment, stream_into_session
from guard.planning.tools import TOOL_DEFINITIONS, ToolResult, handle_tool_call

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
