"""What the user answers: a plan exit (approve, reject, refine) and the model's questions.

One implementation for every front end that lets a person answer: ``guard plan exit``,
``guard plan answer`` and the cockpit (``guard ui``) call these, so the result is the
same whichever the user picked. Each raises :class:`~guard.effects.GuardError` with a
message saying what to do when the answer cannot be taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from guard.effects import GuardError
from guard.planning._vocabulary import Mode
from guard.planning.handshake import Outcome, UserDecision, plan_exit
from guard.planning.session import Session

Choice = Literal["approve", "reject", "refine"]


@dataclass(frozen=True, slots=True)
class ExitAnswered:
    """The outcome of the user's answer to a plan exit, and a summary for the user."""

    outcome: Outcome
    said: str


def answer_exit(session: Session, choice: Choice, text: str = "") -> ExitAnswered:
    """Approve, reject (``text`` is the reason) or refine (``text`` is the note) the plan.

    Approval is refused while the plan file is missing or empty; the answer is
    recorded and handed to the model on its next planning tool call.
    """
    words = text.strip()
    if choice == "reject" and not words:
        raise GuardError("a rejection needs a reason the model can act on")
    if choice == "refine" and not words:
        raise GuardError("a refinement needs a note saying what to change")
    session.refresh()
    if session.mode is not Mode.PLAN:
        raise GuardError(f"session {session.id} is not in plan mode; there is no plan to exit")
    decision = (
        UserDecision.approve()
        if choice == "approve"
        else UserDecision.reject(words)
        if choice == "reject"
        else UserDecision.refine(words)
    )
    outcome = plan_exit(session, decision, notify_model=True)
    if not outcome.ok and choice == "approve":
        raise GuardError(outcome.text)
    plan = session.plan_path or "the plan file"
    if choice == "approve":
        said = f"plan approved ({plan}); the session is in build mode now"
    elif choice == "reject":
        said = f"plan rejected ({words}); still in plan mode, the model reworks {plan}"
    else:
        said = (
            f"refinement asked ({words}); still in plan mode, the model updates {plan} and"
            " asks again"
        )
    return ExitAnswered(outcome, said)


def pending_questions(session: Session) -> list[str]:
    """The questions of the model's latest pending ``request_user_input`` ([] for none)."""
    pending = [p for p in session.pending if p.kind == "request_user_input"]
    if not pending:
        return []
    return [str(q.get("question", "?")) for q in pending[-1].detail.get("questions", [])]


def answer_questions(session: Session, answers: list[str]) -> None:
    """Record one answer per pending question, in order, for the model's next planning call."""
    session.refresh()
    pending = [p for p in session.pending if p.kind == "request_user_input"]
    if not pending:
        raise GuardError(
            f"session {session.id} has no pending questions (see `guard session show`)"
        )
    questions = pending_questions(session)
    if len(answers) != len(questions):
        listed = "; ".join(f"{n + 1}. {q}" for n, q in enumerate(questions))
        raise GuardError(
            f"{len(questions)} question(s) wait for an answer, got {len(answers)}: {listed}"
        )
    if any(not a.strip() for a in answers):
        raise GuardError("every question needs a non-empty answer")
    lines = [f"Q: {q}\nA: {a}" for q, a in zip(questions, answers, strict=True)]
    with session.transaction() as s:
        s.pending = [p for p in s.pending if p is not None and p != pending[-1]]
        s.inbox.append("Answers from the user:\n" + "\n".join(lines))
