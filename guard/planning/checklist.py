"""The execution checklist (``update_plan``) and ``request_user_input``: models and rules.

The checklist tracks progress while building; it is not the plan artifact and
it is refused in plan mode. ``request_user_input`` is the opposite: a plan-mode
tool. Both validate their payloads strictly and answer malformed ones with a
message a model can act on.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from guard.effects import GuardError


class StepStatus(enum.StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class PlanItem(BaseModel):
    """One checklist step."""

    model_config = ConfigDict(extra="forbid")

    step: str
    status: StepStatus

    @field_validator("step")
    @classmethod
    def _step_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("step must not be empty")
        return value.strip()


class UpdatePlanArgs(BaseModel):
    """Arguments of ``update_plan``: the whole checklist, replacing the previous one."""

    model_config = ConfigDict(extra="forbid")

    explanation: str | None = None
    plan: list[PlanItem] = Field(min_length=1)


class Option(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str = Field(min_length=1)
    description: str = ""


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    header: str | None = None
    question: str = Field(min_length=1)
    options: list[Option] = Field(min_length=2)


class RequestUserInputArgs(BaseModel):
    """Arguments of ``request_user_input``: one or more questions, each with options."""

    model_config = ConfigDict(extra="forbid")

    questions: list[Question] = Field(min_length=1)


class PayloadError(GuardError):
    """A tool payload that does not fit its schema; the message tells the model how to fix it."""


UPDATE_PLAN_EXAMPLE = (
    '{"explanation": "why it changed (optional)", "plan": ['
    '{"step": "Write the parser", "status": "completed"}, '
    '{"step": "Add tests", "status": "in_progress"}, '
    '{"step": "Update docs", "status": "pending"}]}'
)
REQUEST_USER_INPUT_EXAMPLE = (
    '{"questions": [{"question": "Which database?", "options": ['
    '{"label": "SQLite", "description": "no server"}, {"label": "PostgreSQL"}]}]}'
)


def _describe_errors(tool: str, exc: ValidationError, example: str) -> str:
    lines = [f"{tool}: invalid arguments, nothing was changed:"]
    for err in exc.errors():
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in err["loc"]
        ).lstrip(".")
        got = err.get("input")
        got_text = ""
        if err["type"] not in ("missing",) and not isinstance(got, dict | list):
            got_text = f" (got {json.dumps(got, default=str)[:80]})"
        lines.append(f"  - {where or 'arguments'}: {err['msg']}{got_text}")
    lines.append(f"Send arguments shaped like: {example}")
    return "\n".join(lines)


def parse_update_plan(arguments: Any) -> UpdatePlanArgs:
    """Validate ``update_plan`` arguments and the checklist rules. Raises PayloadError."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise PayloadError(
                f"update_plan: arguments are not valid JSON ({exc.msg} at position {exc.pos})."
                f" Send arguments shaped like: {UPDATE_PLAN_EXAMPLE}"
            ) from None
    try:
        args = UpdatePlanArgs.model_validate(arguments)
    except ValidationError as exc:
        raise PayloadError(_describe_errors("update_plan", exc, UPDATE_PLAN_EXAMPLE)) from None
    check_checklist(args.plan)
    return args


def check_checklist(plan: list[PlanItem]) -> None:
    """Exactly one step in progress while any is incomplete; none once all are completed."""
    in_progress = [i for i, item in enumerate(plan) if item.status is StepStatus.IN_PROGRESS]
    incomplete = [item for item in plan if item.status is not StepStatus.COMPLETED]
    if incomplete and len(in_progress) != 1:
        if not in_progress:
            hint = "mark the step you are working on now as in_progress"
        else:
            steps = ", ".join(f"plan[{i}]" for i in in_progress)
            hint = f"{steps} are all in_progress; keep one and set the others to pending"
        raise PayloadError(
            "update_plan: exactly one step must be in_progress while any step is not"
            f" completed; {hint}. Nothing was changed."
        )


def parse_request_user_input(arguments: Any) -> RequestUserInputArgs:
    """Validate ``request_user_input`` arguments. Raises PayloadError."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise PayloadError(
                f"request_user_input: arguments are not valid JSON ({exc.msg})."
                f" Send arguments shaped like: {REQUEST_USER_INPUT_EXAMPLE}"
            ) from None
    try:
        return RequestUserInputArgs.model_validate(arguments)
    except ValidationError as exc:
        raise PayloadError(
            _describe_errors("request_user_input", exc, REQUEST_USER_INPUT_EXAMPLE)
        ) from None
