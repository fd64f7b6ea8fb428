from __future__ import annotations

from pathlib import Path

import pytest

from guard.planning import (
    Mode,
    Session,
    UserDecision,
    handle_tool_call,
    plan_enter,
    plan_exit,
    read_events,
)
from guard.planning.handshake import EnterRequest, ExitRequest

from .conftest import write_plan_file


def test_plan_enter_asks_and_on_yes_fixes_the_plan_path(session: Session) -> None:
    asked: list[EnterRequest] = []

    def ask(req: EnterRequest) -> bool:
        asked.append(req)
        return True

    out = plan_enter(session, ask, title="Cache the index")
    assert out.ok and out.mode is Mode.PLAN
    assert asked and asked[0].session == session.id and asked[0].title == "Cache the index"
    stored = Session.load(session.id, session.project)
    assert stored.mode is Mode.PLAN
    assert stored.plan_path and stored.plan_path.endswith("-cache-the-index.md")
    assert stored.plan_path in out.text
    assert [e.type for e in read_events(stored)] == ["mode_changed"]


def test_plan_enter_declined_stays_in_build(session: Session) -> None:
    out = plan_enter(session, False)
    assert not out.ok and out.mode is Mode.BUILD
    assert Session.load(session.id, session.project).mode is Mode.BUILD
    assert Session.load(session.id, session.project).plan_path is None


def test_plan_enter_when_asking_fails_stays_in_build(session: Session) -> None:
    def broken(_req: EnterRequest) -> bool:
        raise OSError("no terminal")

    out = plan_enter(session, broken)
    assert not out.ok and "no terminal" in out.text
    assert Session.load(session.id, session.project).mode is Mode.BUILD


def test_plan_enter_without_asker_is_recorded_pending(session: Session) -> None:
    out = plan_enter(session, None, title="T")
    assert out.pending and out.mode is Mode.BUILD
    stored = Session.load(session.id, session.project)
    assert [p.kind for p in stored.pending] == ["plan_enter"]
    assert stored.mode is Mode.BUILD


def test_plan_path_does_not_change_while_in_plan_mode(plan_session: Session) -> None:
    first = plan_session.plan_path
    out = plan_enter(plan_session, True, title="Another title")
    assert out.ok and plan_session.refresh().plan_path == first


@pytest.mark.parametrize("content", [None, "", "   \n\t\n"])
def test_plan_exit_refused_without_a_written_plan(
    plan_session: Session, content: str | None
) -> None:
    """Attack: leaving plan mode with no plan at all (nothing for the user to approve)."""
    if content is not None:
        write_plan_file(plan_session, content)
    asked: list[ExitRequest] = []

    def approve(req: ExitRequest) -> UserDecision:
        asked.append(req)
        return UserDecision.approve()

    out = plan_exit(plan_session, approve)
    assert not out.ok and out.mode is Mode.PLAN
    assert "refused" in out.text and str(plan_session.plan_path) in out.text
    assert asked == [], "the user must not be asked to approve an empty plan"
    stored = plan_session.refresh()
    assert stored.mode is Mode.PLAN and stored.decisions[-1].decision == "refused"


def test_plan_exit_refused_also_for_a_direct_approval_without_plan(plan_session: Session) -> None:
    out = plan_exit(plan_session, UserDecision.approve())
    assert not out.ok and plan_session.refresh().mode is Mode.PLAN


def test_plan_exit_refuses_a_symlinked_plan_file(plan_session: Session, tmp_path: Path) -> None:
    """Attack: the plan file is a link to some other (non-empty) file the user never saw."""
    other = tmp_path / "elsewhere.md"
    other.write_text("# a plan from elsewhere\n")
    assert plan_session.plan_path
    Path(plan_session.plan_path).symlink_to(other)
    out = plan_exit(plan_session, UserDecision.approve())
    assert not out.ok and plan_session.refresh().mode is Mode.PLAN


def test_plan_exit_approve_switches_to_build(plan_session: Session) -> None:
    write_plan_file(plan_session)
    seen: list[ExitRequest] = []

    def ask(req: ExitRequest) -> UserDecision:
        seen.append(req)
        return UserDecision.approve()

    out = plan_exit(plan_session, ask, summary="short")
    assert out.ok and out.mode is Mode.BUILD
    assert seen[0].plan.startswith("# Plan") and seen[0].summary == "short"
    stored = plan_session.refresh()
    assert stored.mode is Mode.BUILD and stored.decisions[-1].decision == "approve"
    assert [e.type for e in read_events(stored)][-2:] == ["mode_changed", "plan_exit"]


@pytest.mark.parametrize(
    ("decision", "words"),
    [
        (UserDecision.reject("too risky, keep the old API"), "too risky, keep the old API"),
        (UserDecision.refine("also migrate the tests"), "also migrate the tests"),
    ],
)
def test_reject_and_refine_keep_plan_mode_and_return_the_users_words(
    plan_session: Session, decision: UserDecision, words: str
) -> None:
    write_plan_file(plan_session)
    out = plan_exit(plan_session, lambda _req: decision)
    assert not out.ok and out.mode is Mode.PLAN
    assert words in out.text and "plan_exit again" in out.text
    stored = plan_session.refresh()
    assert stored.mode is Mode.PLAN
    assert stored.decisions[-1].decision == decision.choice.value
    assert stored.decisions[-1].text == words


def test_plan_exit_when_asking_fails_stays_in_plan(plan_session: Session) -> None:
    write_plan_file(plan_session)

    def broken(_req: ExitRequest) -> UserDecision:
        raise RuntimeError("dialog crashed")

    out = plan_exit(plan_session, broken)
    assert not out.ok and "dialog crashed" in out.text
    assert plan_session.refresh().mode is Mode.PLAN


def test_plan_exit_with_a_non_decision_answer_stays_in_plan(plan_session: Session) -> None:
    """Attack: an asker returning a truthy non-decision (e.g. "yes") must not count as approval."""
    write_plan_file(plan_session)
    out = plan_exit(plan_session, lambda _req: "yes")  # type: ignore[arg-type,return-value]
    assert not out.ok and plan_session.refresh().mode is Mode.PLAN


def test_plan_exit_outside_plan_mode_is_refused(session: Session) -> None:
    out = plan_exit(session, UserDecision.approve())
    assert not out.ok and out.mode is Mode.BUILD


def test_pending_exit_answered_later_reaches_the_model(plan_session: Session) -> None:
    """The no-stuck-loop path: model asks via the tool, user answers in another process (CLI)."""
    write_plan_file(plan_session)
    first = handle_tool_call(plan_session, "plan_exit", {"summary": "ready"})
    assert not first.is_error and "waits for the user" in first.text
    assert [p.kind for p in plan_session.refresh().pending] == ["plan_exit"]
    # the user, elsewhere:
    other_process_view = Session.load(plan_session.id, plan_session.project)
    plan_exit(other_process_view, UserDecision.refine("split step 1"), notify_model=True)
    stored = plan_session.refresh()
    assert stored.pending == [] and stored.mode is Mode.PLAN
    nxt = handle_tool_call(
        plan_session,
        "request_user_input",
        {"questions": [{"question": "Keep both?", "options": [{"label": "yes"}, {"label": "no"}]}]},
    )
    assert "split step 1" in nxt.text and nxt.text.startswith("Messages from the user:")
    assert plan_session.refresh().inbox == []
    again = handle_tool_call(plan_session, "plan_exit", {})
    assert "split step 1" not in again.text, "a message is delivered once"


def test_every_exit_answer_is_recorded_in_order(plan_session: Session) -> None:
    plan_exit(plan_session, UserDecision.approve())  # refused: no plan yet
    write_plan_file(plan_session)
    plan_exit(plan_session, UserDecision.reject("no"))
    plan_exit(plan_session, UserDecision.refine("more"))
    plan_exit(plan_session, UserDecision.approve())
    stored = plan_session.refresh()
    assert [d.decision for d in stored.decisions] == ["refused", "reject", "refine", "approve"]
    outcomes = [e.outcome for e in read_events(stored) if e.type == "plan_exit"]  # type: ignore[union-attr]
    assert outcomes == ["refused", "reject", "refine", "approve"]


def test_approval_does_not_cover_a_plan_changed_during_review(plan_session: Session) -> None:
    """Attack: the plan file is swapped after the user read it but before they approved."""
    write_plan_file(plan_session, "# Plan\n\n1. harmless\n")

    def user_reads_then_file_changes(req: ExitRequest) -> UserDecision:
        assert "harmless" in req.plan
        write_plan_file(plan_session, "# Plan\n\n1. rm -rf everything\n")
        return UserDecision.approve()

    out = plan_exit(plan_session, user_reads_then_file_changes)
    assert not out.ok and "changed while the user was reviewing" in out.text
    assert plan_session.refresh().mode is Mode.PLAN


def test_approval_records_the_digest_of_the_approved_plan(plan_session: Session) -> None:
    import hashlib

    text = "# Plan\n\n1. exact text\n"
    write_plan_file(plan_session, text)
    assert plan_exit(plan_session, lambda _r: UserDecision.approve()).ok
    record = plan_session.refresh().decisions[-1]
    assert record.decision == "approve"
    assert record.plan_sha256 == hashlib.sha256(text.encode()).hexdigest()
