"""The planning tools as JSON-Schema tool definitions and one dispatcher.

``TOOL_DEFINITIONS`` is in MCP's shape (``name``, ``description``,
``inputSchema``); the MCP proxy lists them and calls :func:`handle_tool_call`,
which never raises: any failure is a :class:`ToolResult` with ``is_error``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from guard.planning.checklist import PayloadError, RequestUserInputArgs, UpdatePlanArgs
from guard.planning.handshake import (
    AskEnter,
    AskExit,
    AskQuestions,
    Outcome,
    plan_enter,
    plan_exit,
    request_user_input,
    update_plan,
)
from guard.planning.session import Session


@dataclass(frozen=True, slots=True)
class ToolResult:
    text: str
    is_error: bool = False

    def to_mcp(self) -> dict[str, Any]:
        """The ``tools/call`` result shape of MCP."""
        return {"content": [{"type": "text", "text": self.text}], "isError": self.is_error}


def _schema(model: type[UpdatePlanArgs] | type[RequestUserInputArgs]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "plan_enter",
        "description": (
            "Ask the user to switch to plan mode: explore and ask questions, change nothing but"
            " the plan file, then propose the plan with plan_exit."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "A short title for the plan."},
                "reason": {"type": "string", "description": "Why planning first helps."},
            },
            "additionalProperties": False,
        },
    },
    {
        "name": "plan_exit",
        "description": (
            "Propose the plan written to your plan file and ask the user to approve it. Refused"
            " while the plan file is missing or empty. Only approval leaves plan mode; a"
            " rejection or a refinement note comes back to you."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "One paragraph for the user."},
            },
            "additionalProperties": False,
        },
    },
    {
        "name": "update_plan",
        "description": (
            "Replace the execution checklist (build mode only). Exactly one step in_progress"
            " while any step is incomplete; none once all are completed."
        ),
        "inputSchema": _schema(UpdatePlanArgs),
    },
    {
        "name": "request_user_input",
        "description": (
            "Ask the user one or more questions, each with at least two options (plan mode only)."
        ),
        "inputSchema": _schema(RequestUserInputArgs),
    },
]
TOOL_NAMES = frozenset(t["name"] for t in TOOL_DEFINITIONS)


def _result(outcome: Outcome) -> ToolResult:
    return ToolResult(outcome.text, is_error=not outcome.ok)


def handle_tool_call(
    session: Session,
    name: str,
    arguments: dict[str, Any] | str | None,
    *,
    ask_enter: AskEnter | None = None,
    ask_exit: AskExit | None = None,
    ask_questions: AskQuestions | None = None,
) -> ToolResult:
    """Run one planning tool call for ``session``; never raises.

    Without the ``ask_*`` functions, requests that need the user are recorded
    as pending and answered later through the CLI; the user's words then reach
    the model at the start of its next planning tool call result.
    """
    try:
        result = _dispatch(session, name, arguments, ask_enter, ask_exit, ask_questions)
        waiting = session.take_inbox()
    except PayloadError as exc:
        return ToolResult(str(exc), is_error=True)
    except Exception as exc:  # fail closed, with the reason
        return ToolResult(f"{name}: refused, internal error: {exc}", is_error=True)
    if waiting:
        text = "\n".join(["Messages from the user:", *waiting, "", result.text])
        return ToolResult(text, result.is_error)
    return result


def _dispatch(
    session: Session,
    name: str,
    arguments: dict[str, Any] | str | None,
    ask_enter: AskEnter | None,
    ask_exit: AskExit | None,
    ask_questions: AskQuestions | None,
) -> ToolResult:
    if name not in TOOL_NAMES:
        return ToolResult(
            f"unknown planning tool {name!r}; known: {', '.join(sorted(TOOL_NAMES))}",
            is_error=True,
        )
    if name in ("update_plan", "request_user_input"):
        payload: Any = arguments if arguments is not None else {}
        if name == "update_plan":
            return _result(update_plan(session, payload))
        return _result(request_user_input(session, payload, ask_questions))
    args = _simple_args(name, arguments)
    if name == "plan_enter":
        return _result(
            plan_enter(session, ask_enter, title=args.get("title"), reason=args.get("reason", ""))
        )
    return _result(plan_exit(session, ask_exit, summary=args.get("summary", "")))


def _simple_args(name: str, arguments: dict[str, Any] | str | None) -> dict[str, str]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise PayloadError(f"{name}: arguments are not valid JSON ({exc.msg})") from None
    if not isinstance(arguments, dict):
        raise PayloadError(f"{name}: arguments must be a JSON object")
    allowed = set(
        next(t for t in TOOL_DEFINITIONS if t["name"] == name)["inputSchema"]["properties"]
    )
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise PayloadError(
            f"{name}: unknown argument(s) {', '.join(unknown)};"
            f" allowed: {', '.join(sorted(allowed))}"
        )
    bad = [k for k, v in arguments.items() if not isinstance(v, str)]
    if bad:
        raise PayloadError(f"{name}: argument(s) {', '.join(bad)} must be strings")
    return {k: str(v) for k, v in arguments.items()}
