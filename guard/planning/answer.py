"""What the user answers: a plan exit (approve, reject, refine) and the model's questions.

One implementation for every front end that lets a person answer: ``guard plan exit``,
``guard plan answer`` and the cockpit (``guard ui``) call these, so the result is the
same whichever the user picked. Each raises :class:`~guard.effects.GuardError` with a
message saying what to do when the answer cannot be taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from guard.effects import GuardError
from guard.planning._vocabulary import Mode
from guard.planning.artifact import count_lines, plan_digest, plan_text, read_plan_bytes
from guard.planning.handshake import Outcome, UserDecision, plan_exit
from guard.planning.session import Session

Choice = Literal["approve", "reject", "refine"]


_HEX64 = re.compile(r"[0-9a-f]{64}")


class PlanChanged(GuardError):
    """An approval refused because the plan file is no longer the text the user was shown."""


@dataclass(frozen=True, slots=True)
class ShownPlan:
    """The plan as it is now, in the words of the approval question."""

    title: str
    lines: int
    digest: str
    path: str

    def question(self) -> str:
        """``Approve plan TITLE (N lines, digest …)?``: what the user says yes to."""
        return f"Approve plan {self.title} ({self.lines} lines, digest {self.digest[:12]})?"


def current_plan(session: Session) -> ShownPlan | None:
    """The session's plan file now (None when it is missing or empty): what an approval covers."""
    data = read_plan_bytes(session)
    if data is None or not plan_text(data).strip():
        return None
    title = session.title or (session.plan_path or "plan").rsplit("/", 1)[-1]
    return ShownPlan(title, count_lines(data), plan_digest(data), session.plan_path or "")


@dataclass(frozen=True, slots=True)
class ExitAnswered:
    """The outcome of the user's answer to a plan exit, and a summary for the user."""

    outcome: Outcome
    said: str


def answer_exit(
    session: Session, choice: Choice, text: str = "", *, digest: str | None = None
) -> ExitAnswered:
    """Approve, reject (``text`` is the reason) or refine (``text`` is the note) the plan.

    Approval is refused while the plan file is missing or empty, and, with ``digest`` (the
    :func:`~guard.planning.artifact.plan_digest` of the plan the user was shown), when the
    file's bytes are not that plan any more (:class:`PlanChanged`). The answer is recorded
    and handed to the model on its next tool call or prompt, whichever host it runs in.
    """
    if digest is not None and not _HEX64.fullmatch(digest):
        raise GuardError(
            f"--digest {digest!r}: give the whole SHA-256 (64 lowercase hex digits) that"
            " `guard plan exit --approve` or `guard plan status` printed"
        )
    words = text.strip()
    if choice == "reject" and not words:
        raise GuardError("a rejection needs a reason the model can act on")
    if choice == "refine" and not words:
        raise GuardError("a refinement needs a note saying what to change")
    session.refresh()
    if session.mode is not Mode.PLAN:
        raise GuardError(f"session {session.id} is not in plan mode; there is no plan to exit")
    decision = (
        UserDecision.approve(digest=digest)
        if choice == "approve"
        else UserDecision.reject(words)
        if choice == "reject"
        else UserDecision.refine(words)
    )
    outcome = plan_exit(session, decision, notify_model=True)
    if not outcome.ok and choice == "approve":
        raise (PlanChanged if outcome.stale else GuardError)(outcome.text)
    plan = session.plan_path or "the plan file"
    if choice == "approve":
        approved = session.refresh().decisions[-1].plan_sha256 or "?"
        said = f"plan approved ({plan}, digest {approved}); the session is in build mode now"
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
