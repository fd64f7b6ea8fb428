"""The planning runtime's files against the real shipped policy and evaluator."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import Effect, Guard
from guard.effects import Action, ToolCall
from guard.gate import Gate, VerdictAction
from guard.paths import PathError
from guard.planning import Session, event_bus, publish, publish_current, read_events, write_plan


@pytest.mark.parametrize("agent", ["plan", "build"])
@pytest.mark.parametrize("kind", ["write", "delete"])
def test_agents_cannot_touch_session_state(repo: Path, agent: str, kind: str) -> None:
    """Attack: the model rewrites its session file (mode: build) or its event log to escape."""
    s = Session.start(repo, "plan", title="x")
    publish(s, event_bus.TurnEnded(turn=0))
    g = Guard.load(worktree=repo, cwd=repo)
    make = Effect.write if kind == "write" else Effect.delete
    for target in (s.path, s.events_path, s.lock_path, repo / ".openoxide/sessions/new.json"):
        d = g.decide(agent, [make(str(target))], cwd=repo)
        assert d.action is Action.DENY, (agent, kind, target, d)


def test_plan_agent_may_write_exactly_its_plan_artifact(repo: Path) -> None:
    s = Session.start(repo, "plan", title="Add caching")
    assert s.plan_path
    g = Guard.load(worktree=repo, cwd=repo)
    assert g.decide("plan", [Effect.write(s.plan_path)], cwd=repo).action is Action.ALLOW
    assert g.decide("plan", [Effect.write(str(repo / "src/x.py"))]).action is Action.DENY
    write_plan(s, "# plan\n")
    assert g.decide("plan", [Effect.write(s.plan_path)], cwd=repo).action is Action.ALLOW


def test_fallback_session_state_is_protected_too(plain_dir: Path) -> None:
    """Attack: outside a git repo the state lives in guard's data dir; it is protected there."""
    s = Session.start(plain_dir, "plan", title="y")
    g = Guard.load(cwd=plain_dir)
    assert g.decide("plan", [Effect.write(str(s.path))], cwd=plain_dir).action is Action.DENY
    assert s.plan_path
    assert g.decide("plan", [Effect.write(s.plan_path)], cwd=plain_dir).action is Action.ALLOW


def test_real_decisions_publish_as_typed_events(repo: Path) -> None:
    s = Session.start(repo, "plan", title="z")
    g = Guard.load(worktree=repo, cwd=repo)
    d = g.decide("plan", [Effect.write(str(repo / "src/x.py"))], cwd=repo)
    event = event_bus.Decision.from_decision(d, agent="plan", tool="write", source="test")
    publish_current(repo, event)
    ev = read_events(s)[-1]
    assert isinstance(ev, event_bus.Decision)
    assert ev.action is Action.DENY and ev.rule == d.rule and ev.session == s.id


def _bash(g: Guard, repo: Path, command: str) -> Action:
    from guard.analysis import effects_of
    from guard.effects import ToolCall

    call = ToolCall("claude-code", "Bash", {"command": command}, str(repo))
    return g.decide("plan", effects_of(call), cwd=repo).action


def test_plan_agent_may_create_the_plan_directory_and_nothing_else(repo: Path) -> None:
    """Attacks: mkdir beside, below or through the plan directory, or with a mode."""
    g = Guard.load(worktree=repo, cwd=repo)
    allowed = [
        "mkdir -p .openoxide/plans && cat > .openoxide/plans/p.md <<'EOF'\n# plan\nEOF",
        "mkdir .openoxide",
        "mkdir -p -v .openoxide/plans",
    ]
    for command in allowed:
        assert _bash(g, repo, command) is Action.ALLOW, command
    denied = [
        "mkdir -p .openoxide/plans/sub",
        "mkdir .openoxide/sessions",
        "mkdir -m 777 .openoxide/plans",
        "mkdir --mode=777 .openoxide/plans",
        "mkdir -p .openoxide/plans/../../src/x",
        "mkdir src",
        "mkdir -p .openoxide/plans && touch .openoxide/plans/x.sh",
        f"mkdir {repo.parent}/elsewhere",
    ]
    for command in denied:
        assert _bash(g, repo, command) is Action.DENY, command


def test_mkdir_of_the_plan_directory_through_a_link_is_refused(repo: Path) -> None:
    """Attack: .openoxide/plans is a link to src/new; mkdir -p would create src/new.

    Guard refuses a linked plan directory outright: loading the policy there fails with
    the fix, and the gate turns that failure into a deny for the call."""
    (repo / ".openoxide").mkdir()
    (repo / ".openoxide" / "plans").symlink_to(repo / "src" / "new")
    with pytest.raises(PathError, match="symlink"):
        Guard.load(worktree=repo, cwd=repo)
    gate = Gate(agent="plan", env={}, sessions=False)
    for command in ("mkdir -p .openoxide/plans", "mkdir -p .openoxide/plans/deeper"):
        verdict = gate.decide(ToolCall("claude-code", "Bash", {"command": command}, str(repo)))
        assert verdict.action is VerdictAction.DENY, command
        assert "symlink" in verdict.reason


def test_the_build_agent_is_unaffected_by_the_mkdir_rule(repo: Path) -> None:
    g = Guard.load(worktree=repo, cwd=repo)
    e = Effect.mkdir(str(repo / "src" / "pkg"))
    assert g.decide("build", [e], cwd=repo).action is Action.ALLOW
    assert g.decide("plan", [e], cwd=repo).action is Action.DENY
