"""Questions the proxy puts to the user through MCP elicitation (``elicitation/create``).

Each builder returns ``(message, requestedSchema)`` in the form-mode shape of
the MCP 2025-11-25 revision (a flat object of primitive properties); each
reader turns the client's ``ElicitResult`` (``action`` accept | decline |
cancel, ``content``) into the answer guard needs. Only an explicit accept
with the exact expected content counts as a yes.
"""

from __future__ import annotations

from typing import Any

from guard.effects import Decision, GuardError
from guard.planning.checklist import RequestUserInputArgs
from guard.planning.handshake import EnterRequest, ExitChoice, ExitRequest, UserDecision

Schema = dict[str, Any]


class AskFailed(GuardError):
    """The user could not be asked, or dismissed the question."""


def _object(properties: dict[str, Any], required: list[str]) -> Schema:
    return {"type": "object", "properties": properties, "required": required}


def _accepted(result: dict[str, Any]) -> dict[str, Any] | None:
    """The content of an accept; None for decline; AskFailed for cancel or nonsense."""
    action = result.get("action")
    if action == "accept":
        content = result.get("content")
        return content if isinstance(content, dict) else {}
    if action == "decline":
        return None
    if action == "cancel":
        raise AskFailed("the user dismissed the question")
    raise AskFailed(f"the client answered the question with an unknown action {action!r}")


# -- a policy "ask" --------------------------------------------------------------------------


def call_question(
    agent: str, tool: str, arguments: dict[str, Any], d: Decision
) -> tuple[str, Schema]:
    shown = ", ".join(f"{k}={v!r:.80}" for k, v in arguments.items()) or "no arguments"
    message = (
        f"guard: the {agent} agent wants to call {tool} ({shown}).\n"
        f"The policy asks you first: {d.reason}\nRule: {d.rule}"
    )
    schema = _object(
        {
            "allow": {
                "type": "boolean",
                "title": "Allow this call",
                "description": "Yes runs the call once; anything else refuses it.",
                "default": False,
            }
        },
        ["allow"],
    )
    return message, schema


def read_call_answer(result: dict[str, Any]) -> bool:
    content = _accepted(result)
    return content is not None and content.get("allow") is True


# -- plan_enter ------------------------------------------------------------------------------


def enter_question(request: EnterRequest) -> tuple[str, Schema]:
    title = f" ({request.title})" if request.title else ""
    why = f"\nWhy: {request.reason}" if request.reason else ""
    message = (
        f"The agent asks to enter plan mode{title}: it may then explore and ask, and change"
        f" nothing but its plan file.{why}"
    )
    schema = _object(
        {"enter": {"type": "boolean", "title": "Enter plan mode", "default": True}}, ["enter"]
    )
    return message, schema


def read_enter_answer(result: dict[str, Any]) -> bool:
    content = _accepted(result)
    return content is not None and content.get("enter") is True


# -- plan_exit -------------------------------------------------------------------------------


def exit_question(request: ExitRequest) -> tuple[str, Schema]:
    plan = request.plan  # whole: the approval covers exactly the text the user is shown
    summary = f"\n\nSummary: {request.summary}" if request.summary else ""
    message = (
        f"The agent proposes this plan ({request.plan_path}) and asks to leave plan mode."
        f" Approve to let it change files; reject or refine to keep it planning.\n\n{plan}{summary}"
    )
    schema = _object(
        {
            "decision": {
                "type": "string",
                "title": "Your decision",
                "enum": [c.value for c in ExitChoice],
            },
            "note": {"type": "string", "title": "Reason or refinement note (optional)"},
        },
        ["decision"],
    )
    return message, schema


def read_exit_answer(result: dict[str, Any]) -> UserDecision:
    content = _accepted(result)
    if content is None:
        return UserDecision.reject("the user declined the plan in the client")
    note = content.get("note")
    note = note if isinstance(note, str) else ""
    try:
        choice = ExitChoice(str(content.get("decision")))
    except ValueError:
        raise AskFailed(f"the client answered with no valid decision: {content!r:.120}") from None
    return UserDecision(choice, note)


# -- request_user_input ----------------------------------------------------------------------


def input_question(args: RequestUserInputArgs) -> tuple[str, Schema]:
    properties: dict[str, Any] = {}
    for i, q in enumerate(args.questions, 1):
        labels = [o.label for o in q.options]
        properties[f"q{i}"] = {
            "type": "string",
            "title": q.header or q.question,
            "description": q.question
            + "".join(f"\n- {o.label}: {o.description}" for o in q.options if o.description),
            "enum": labels,
        }
    message = "The agent asks:\n" + "\n".join(
        f"{i}. {q.question}" for i, q in enumerate(args.questions, 1)
    )
    return message, _object(properties, list(properties))


def read_input_answer(args: RequestUserInputArgs, result: dict[str, Any]) -> list[str]:
    content = _accepted(result)
    if content is None:
        raise AskFailed("the user declined to answer")
    return [str(content.get(f"q{i}", "(no answer)")) for i in range(1, len(args.questions) + 1)]
