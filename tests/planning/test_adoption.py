"""The plan file name cannot dead-end the handshake: the session adopts the plan written."""

from __future__ import annotations

from pathlib import Path

from guard.planning import Mode, Session, UserDecision, plan_exit


def test_a_plan_written_under_another_name_is_adopted(plan_session: Session) -> None:
    other = Path(plan_session.plans_dir) / "other.md"
    other.write_text("# My plan\n\n1. cache\n")
    out = plan_exit(plan_session, UserDecision.approve())
    assert out.ok and out.mode is Mode.BUILD, out.text
    assert plan_session.refresh().plan_path == str(other)
    assert plan_session.decisions[-1].plan_path == str(other)


def test_files_from_before_the_session_are_not_adopted(repo: Path) -> None:
    plans = repo / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    (plans / "old.md").write_text("# an old plan of someone else\n")
    s = Session.start(repo, "plan", title="new")
    out = plan_exit(s, UserDecision.approve())
    assert not out.ok and "does not exist" in out.text and s.refresh().mode is Mode.PLAN
    (plans / "old.md").write_text("# rewritten during this session\n")
    assert plan_exit(s, UserDecision.approve()).ok


def test_two_new_files_are_ambiguous_and_named(plan_session: Session) -> None:
    plans = Path(plan_session.plans_dir)
    (plans / "a.md").write_text("# a\n")
    (plans / "b.md").write_text("# b\n")
    out = plan_exit(plan_session, UserDecision.approve())
    assert not out.ok and "a.md" in out.text and "b.md" in out.text
    assert plan_session.plan_path and Path(plan_session.plan_path).name.endswith("greeting.md")
    Path(plan_session.plan_path).write_text("# the fixed path always works\n")
    assert plan_exit(plan_session, UserDecision.approve()).ok


def test_another_sessions_plan_is_never_adopted(repo: Path) -> None:
    """Two concurrent sessions in one worktree: b must not take a's plan as its own."""
    a = Session.start(repo, "plan", title="a")
    b = Session.start(repo, "plan", title="b")
    assert a.plan_path
    Path(a.plan_path).write_text("# a's plan\n")
    out = plan_exit(b, UserDecision.approve())
    assert not out.ok and b.refresh().mode is Mode.PLAN and b.plan_path != a.plan_path


def test_a_symlink_is_never_adopted(plan_session: Session, repo: Path) -> None:
    """Attack: a link named like a plan pointing at src/ becomes the approved plan."""
    target = repo / "app.py"
    target.write_text("print('hi')\n")
    (Path(plan_session.plans_dir) / "link.md").symlink_to(target)
    out = plan_exit(plan_session, UserDecision.approve())
    assert not out.ok and plan_session.refresh().mode is Mode.PLAN
