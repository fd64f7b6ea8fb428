"""The plan-mode handshake and the mode-bound tools, as plain Python functions.

* :func:`plan_enter` asks the user; on yes the session is in plan mode and its
  plan artifact path is fixed.
* :func:`plan_exit` is refused while the plan artifact is missing or empty;
  otherwise the user approves, rejects or refines. Only approve switches to
  build; reject and refine keep plan mode and hand the user's words back.
  Every request and answer is recorded in the session and its event log.
* :func:`update_plan` (the checklist) is refused in plan mode;
  :func:`request_user_input` only works in plan mode.

Each returns an :class:`Outcome` whose ``text`` is meant for the model.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import guard.planning.event_bus as events
from guard.planning._vocabulary import Mode, utc_now
from guard.planning.artifact import (
    ArtifactError,
    plan_digest,
    plan_text,
    read_plan_bytes,
)
from guard.planning.checklist import (
    RequestUserInputArgs,
    UpdatePlanArgs,
    parse_request_user_input,
    parse_update_plan,
)
from guard.planning.session import ExitRecord, PendingRequest, Session

UPDATE_PLAN_IN_PLAN_MODE = "update_plan is a TODO/checklist tool and is not allowed in Plan mode"
REQUEST_USER_INPUT_OUTSIDE_PLAN = (
    "request_user_input is only available in Plan mode; in build mode, proceed with your best"
    " judgement or end your turn and ask in your reply"
)


class ExitChoice(enum.StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    REFINE = "refine"


@dataclass(frozen=True, slots=True)
class UserDecision:
    """The user's answer to a plan exit; ``text`` is the reason (reject) or the note (refine)."""

    choice: ExitChoice
    text: str = ""
    #: For approve: the digest (:func:`guard.planning.artifact.plan_digest`) of the plan
    #: the user was shown; a plan file whose bytes differ now is not approved.
    digest: str | None = None

    @classmethod
    def approve(cls, text: str = "", digest: str | None = None) -> UserDecision:
        return cls(ExitChoice.APPROVE, text, digest)

    @classmethod
    def reject(cls, reason: str) -> UserDecision:
        return cls(ExitChoice.REJECT, reason)

    @classmethod
    def refine(cls, note: str) -> UserDecision:
        return cls(ExitChoice.REFINE, note)


@dataclass(frozen=True, slots=True)
class EnterRequest:
    session: str
    title: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class ExitRequest:
    session: str
    plan_path: str
    plan: str
    summary: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened, in words for the model (``text``) and as data."""

    text: str
    ok: bool
    mode: Mode
    pending: bool = False
    answers: list[str] = field(default_factory=list)
    #: The approval was refused because the plan file is not the one the user was shown.
    stale: bool = False


AskEnter = Callable[[EnterRequest], bool]
AskExit = Callable[[ExitRequest], UserDecision]
AskQuestions = Callable[[RequestUserInputArgs], list[str]]


def plan_enter(
    session: Session,
    approve: AskEnter | bool | None,
    *,
    title: str | None = None,
    reason: str = "",
) -> Outcome:
    """Ask to enter plan mode. ``approve`` is the user's answer or a function asking them.

    ``None`` means nobody can be asked now: the request is recorded as pending
    (the user accepts it with ``guard mode plan --session ID``).
    """
    session.refresh()
    if session.mode is Mode.PLAN:
        return Outcome(
            f"Already in plan mode; write your plan to {session.plan_path}.", True, Mode.PLAN
        )
    request = EnterRequest(session.id, title, reason)
    if approve is None:
        with session.transaction() as s:
            s.pending = [p for p in s.pending if p.kind != "plan_enter"]
            s.pending.append(
                PendingRequest(
                    kind="plan_enter", at=utc_now(), detail={"title": title, "reason": reason}
                )
            )
        return Outcome(
            "Your request to enter plan mode waits for the user"
            f" (`guard mode plan --session {session.id}`). End your turn.",
            True,
            Mode.BUILD,
            pending=True,
        )
    try:
        yes = approve(request) if callable(approve) else bool(approve)
    except Exception as exc:  # asking failed: stay where we are, say why
        return Outcome(f"Could not ask the user to enter plan mode: {exc}", False, session.mode)
    if not yes:
        with session.transaction() as s:
            s.pending = [p for p in s.pending if p.kind != "plan_enter"]
        return Outcome("The user declined plan mode; continue in build mode.", False, Mode.BUILD)
    if title is not None:
        with session.transaction() as s:
            s.title = title
    session.set_mode(Mode.PLAN, reason or "plan_enter approved by the user")
    return Outcome(
        "You are in plan mode. Explore and ask (request_user_input), change nothing but your"
        f" plan file: {session.plan_path}. Write the plan there, then call plan_exit.",
        True,
        Mode.PLAN,
    )


def plan_exit(
    session: Session,
    decision: UserDecision | AskExit | None,
    *,
    summary: str = "",
    notify_model: bool = False,
) -> Outcome:
    """Ask to leave plan mode with the plan as written to the artifact.

    Refused (stays in plan mode) while the artifact is missing or empty, unless
    ``decision`` is the user's own reject/refine, whose words always go through.

    ``decision`` is the user's answer, a function asking them, or ``None``
    (nobody can be asked now: the request is recorded as pending and the
    user answers with ``guard plan exit``). ``notify_model`` also queues the
    outcome in the session's inbox, for a model that asked earlier.
    """
    session.refresh()
    if session.mode is not Mode.PLAN:
        return Outcome(
            f"Session {session.id} is not in plan mode; there is nothing to exit.",
            False,
            session.mode,
        )
    _, candidates = session.adopt_written_plan()
    plan_path = session.plan_path or ""
    problem: str | None = None
    try:
        data = read_plan_bytes(session)
    except ArtifactError as exc:
        data, problem = None, str(exc)
    plan = None if data is None else plan_text(data)
    users_words = isinstance(decision, UserDecision) and decision.choice is not ExitChoice.APPROVE
    if not users_words and (plan is None or not plan.strip()):
        what = "does not exist" if plan is None else "is empty"
        if problem is None:
            problem = f"the plan file {plan_path} {what}"
        if len(candidates) > 1:
            names = ", ".join(str(c) for c in candidates)
            problem += f" and several plan files were written meanwhile ({names}), so none is"
            problem += " taken"
        text = (
            f"plan_exit refused: {problem}. Write your plan there"
            " (markdown), then call plan_exit again. You are still in plan mode."
        )
        _record(session, "refused", text, plan_path, by="guard")
        return Outcome(text, False, Mode.PLAN)
    request = ExitRequest(session.id, plan_path, plan or "", summary)
    if decision is None:
        with session.transaction() as s:
            s.pending = [p for p in s.pending if p.kind != "plan_exit"]
            s.pending.append(
                PendingRequest(kind="plan_exit", at=utc_now(), detail={"summary": summary})
            )
        events.publish(
            session, events.PlanExit(outcome="requested", text=summary, plan_path=plan_path)
        )
        return Outcome(
            "Your plan waits for the user's decision (approve, reject or refine). End your turn;"
            " their answer will be given to you. You are still in plan mode.",
            True,
            Mode.PLAN,
            pending=True,
        )
    asked = not isinstance(decision, UserDecision)
    if not isinstance(decision, UserDecision):
        try:
            decision = decision(request)
        except Exception as exc:
            text = f"Could not ask the user about the plan: {exc}. You are still in plan mode."
            return Outcome(text, False, Mode.PLAN)
        if not isinstance(decision, UserDecision):
            text = (
                f"The plan exit got no valid decision ({decision!r}); you are still in plan mode."
            )
            return Outcome(text, False, Mode.PLAN)
    if asked and decision.choice is ExitChoice.APPROVE and decision.digest is None:
        decision = UserDecision.approve(decision.text, plan_digest(data or b""))
    return _apply(session, decision, plan_path, notify_model)


def _apply(
    session: Session,
    decision: UserDecision,
    plan_path: str,
    notify: bool,
) -> Outcome:
    """Record the user's decision and, for approve, switch to build in the same transaction."""
    words = decision.text.strip()
    if decision.choice is ExitChoice.APPROVE:
        try:
            data = read_plan_bytes(session)
        except ArtifactError as exc:
            data, problem = None, str(exc)
        else:
            problem = f"the plan file {plan_path} is missing or empty"
        current = None if data is None else plan_text(data)
        if data is None or current is None or not current.strip():
            text = f"plan_exit refused: {problem}. You are still in plan mode."
            _record(session, "refused", text, plan_path, by="guard")
            return Outcome(text, False, Mode.PLAN)
        digest = plan_digest(data)
        if decision.digest is not None and decision.digest != digest:
            text = (
                "plan_exit refused: the plan file changed while the user was reviewing it"
                f" (shown {decision.digest[:12]}, now {digest[:12]}); the approval does not"
                " cover the new text, which must be shown and approved again. You are still in"
                " plan mode."
            )
            _record(session, "refused", text, plan_path, by="guard")
            return Outcome(text, False, Mode.PLAN, stale=True)
        with session.transaction() as s:
            if s.mode is not Mode.PLAN:
                return Outcome(f"Session {s.id} already left plan mode.", False, s.mode)
            s.mode = Mode.BUILD
            s.decisions.append(
                ExitRecord(
                    at=utc_now(),
                    decision="approve",
                    text=words,
                    plan_path=plan_path,
                    plan_sha256=digest,
                )
            )
            s.pending = [p for p in s.pending if p.kind != "plan_exit"]
        events.publish(
            session,
            events.ModeChanged(old=Mode.PLAN, new=Mode.BUILD, reason="plan approved by the user"),
        )
        events.publish(session, events.PlanExit(outcome="approve", text=words, plan_path=plan_path))
        text = (
            f"The user approved the plan ({plan_path}). Plan mode is over: you are in build"
            " mode. Carry out the plan and track progress with update_plan."
            + (f" The user adds: {words}" if words else "")
        )
        if notify:
            session.deliver(text)
        return Outcome(text, True, Mode.BUILD)
    if decision.choice is ExitChoice.REJECT:
        text = (
            f"The user rejected the plan: {words or '(no reason given)'}. You are still in plan"
            f" mode. Rework the plan in {plan_path}, then call plan_exit again."
        )
    else:
        if not words:
            words = "(no note given)"
        text = (
            f"The user asks you to refine the plan: {words}. You are still in plan mode. Update"
            f" {plan_path}, then call plan_exit again."
        )
    _record(session, decision.choice.value, words, plan_path, by="user")
    if notify:
        session.deliver(text)
    return Outcome(text, False, Mode.PLAN)


def _record(session: Session, outcome: str, text: str, plan_path: str, by: str) -> None:
    with session.transaction() as s:
        s.decisions.append(
            ExitRecord(at=utc_now(), decision=outcome, text=text, plan_path=plan_path, by=by)  # type: ignore[arg-type]
        )
        if outcome != "refused":
            s.pending = [p for p in s.pending if p.kind != "plan_exit"]
    events.publish(
        session,
        events.PlanExit(outcome=outcome, text=text, plan_path=plan_path),  # type: ignore[arg-type]
    )


def update_plan(session: Session, arguments: UpdatePlanArgs | dict[str, Any] | str) -> Outcome:
    """Replace the checklist. Refused in plan mode; malformed payloads are refused with a fix.

    Raises :class:`guard.planning.checklist.PayloadError` on a malformed payload.
    """
    session.refresh()
    if session.mode is Mode.PLAN:
        return Outcome(UPDATE_PLAN_IN_PLAN_MODE, False, Mode.PLAN)
    args = parse_update_plan(
        arguments.model_dump(mode="json") if isinstance(arguments, UpdatePlanArgs) else arguments
    )
    with session.transaction() as s:
        if s.mode is Mode.PLAN:  # switched meanwhile
            return Outcome(UPDATE_PLAN_IN_PLAN_MODE, False, Mode.PLAN)
        s.checklist = list(args.plan)
        s.explanation = args.explanation
        turn = s.turn
    events.publish(
        session, events.PlanUpdate(turn=turn, explanation=args.explanation, plan=list(args.plan))
    )
    done = sum(1 for i in args.plan if i.status == "completed")
    return Outcome(f"Plan updated ({done}/{len(args.plan)} steps completed).", True, Mode.BUILD)


def request_user_input(
    session: Session,
    arguments: RequestUserInputArgs | dict[str, Any] | str,
    ask: AskQuestions | None = None,
) -> Outcome:
    """Ask the user questions with options; only in plan mode.

    With ``ask`` the answers come back at once; without, the questions are
    recorded as pending and the model is told to end its turn.
    Raises :class:`guard.planning.checklist.PayloadError` on a malformed payload.
    """
    session.refresh()
    if session.mode is not Mode.PLAN:
        return Outcome(REQUEST_USER_INPUT_OUTSIDE_PLAN, False, session.mode)
    args = (
        arguments
        if isinstance(arguments, RequestUserInputArgs)
        else parse_request_user_input(arguments)
    )
    events.publish(session, events.UserInputRequested(questions=list(args.questions)))
    if ask is None:
        with session.transaction() as s:
            s.pending.append(
                PendingRequest(
                    kind="request_user_input",
                    at=utc_now(),
                    detail=args.model_dump(mode="json"),
                )
            )
        return Outcome(
            "Your questions were shown to the user. End your turn; the answers will come in"
            " the next message.",
            True,
            Mode.PLAN,
            pending=True,
        )
    try:
        answers = [str(a) for a in ask(args)]
    except Exception as exc:
        return Outcome(f"Could not ask the user: {exc}", False, Mode.PLAN)
    lines = [
        f"Q: {q.question}\nA: {answers[i] if i < len(answers) else '(no answer)'}"
        for i, q in enumerate(args.questions)
    ]
    return Outcome("\n".join(lines), True, Mode.PLAN, answers=answers)
