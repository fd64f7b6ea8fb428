"""Which plan-mode shell calls become allow_confined, through the real gate and hook runner.

The wrapped command is then run for real by bash, as the host would, and the
disk is checked.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import Tree, needs_landlock, switches_on

from guard.decide import Guard
from guard.effects import ToolCall
from guard.gate import Gate, VerdictAction
from guard.hooks import front_door
from guard.sandbox.confiner import ShellConfiner

pytestmark = needs_landlock


def gate_for(tree: Tree, policy: str | None = None, **kw: Any) -> Gate:
    g = Guard.load(policy=policy, worktree=tree.worktree)
    return Gate(guard=g, agent="plan", sessions=False, confiner=ShellConfiner(**kw))


def bash(tree: Tree, command: str) -> ToolCall:
    return ToolCall("claude-code", "Bash", {"command": command, "timeout": 5}, str(tree.worktree))


def test_a_read_only_command_runs_confined_and_answers_like_the_original(tree: Tree) -> None:
    v = gate_for(tree).decide(bash(tree, "cat src/app.py"))
    assert v.action is VerdictAction.ALLOW_CONFINED, v.reason
    assert v.rule == "guard.confined" and "read-only by analysis" in v.reason
    assert v.updated_input is not None
    wrapped = v.updated_input["command"]
    assert "run_confined.py" in wrapped
    out = subprocess.run(["bash", "-c", wrapped], cwd=tree.worktree, capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, "print('original')\n")


def test_a_program_the_analyser_cannot_prove_read_only_runs_confined_and_cannot_write(
    tree: Tree,
) -> None:
    cmd = "python3 -c \"open('src/app.py', 'w').write('owned')\""
    v = gate_for(tree).decide(bash(tree, cmd))
    assert v.action is VerdictAction.ALLOW_CONFINED, v.reason
    assert "cannot prove read-only" in v.reason
    assert v.updated_input is not None
    out = subprocess.run(
        ["bash", "-c", v.updated_input["command"]], cwd=tree.worktree, capture_output=True,
        text=True,
    )  # fmt: skip
    # the read-only view refuses it first (EROFS); Landlock (EACCES) stands behind it
    assert out.returncode == 1 and "Read-only file system" in out.stderr
    assert tree.victim.read_text() == "print('original')\n"


def test_a_write_the_analysis_sees_stays_denied_with_its_reason(tree: Tree) -> None:
    v = gate_for(tree).decide(bash(tree, "echo owned > src/app.py"))
    assert v.action is VerdictAction.DENY
    assert "src/app.py" in v.reason and v.updated_input is None


def test_network_questions_and_explicit_denies_stand(tree: Tree, tmp_path: Path) -> None:
    assert gate_for(tree).decide(bash(tree, "curl https://example.com")).action is (
        VerdictAction.ASK
    )
    policy = tmp_path / "p.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n[agents.plan.exec]\ndeny = ["//**/python3"]\n'
    )
    v = gate_for(tree, str(policy)).decide(bash(tree, "python3 -c 'print(1)'"))
    assert v.action is VerdictAction.DENY, v.reason


def test_policy_without_confine_keeps_analysis_only(tree: Tree, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n[agents.plan.sandbox]\nconfine = false\n'
    )
    g = gate_for(tree, str(policy))
    assert g.decide(bash(tree, "cat src/app.py")).action is VerdictAction.ALLOW
    assert g.decide(bash(tree, "python3 -c 'print(1)'")).action is VerdictAction.ASK


def test_the_walls_test_seam_is_said_and_a_policy_that_requires_walls_refuses(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The no-walls test switch (the one the hook_missed test uses to let a command reach the
    host's limits) never weakens confinement silently: the hook's reason says the walls are
    off, `guard doctor` reports it as broken, and a policy that requires walls refuses."""
    from guard.sandbox.confine import NO_WALLS
    from guard.setup.doctor import namespaces_check

    switched = "a test entry point switched them off"
    switches_on(monkeypatch, NO_WALLS)
    v = gate_for(tree).decide(bash(tree, "cat src/app.py"))
    assert v.action is VerdictAction.ALLOW_CONFINED and switched in v.reason
    assert v.updated_input is not None and "--walls" not in v.updated_input["command"]
    check = namespaces_check()
    assert check.status == "broken" and switched in check.detail
    policy = tmp_path / "p.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n[agents.plan.sandbox]\nrequire = ["ipc"]\n'
    )
    refused = gate_for(tree, str(policy)).decide(bash(tree, "cat src/app.py"))
    assert refused.action is VerdictAction.DENY and switched in refused.reason
    switches_on(monkeypatch)
    v = gate_for(tree).decide(bash(tree, "cat src/app.py"))
    assert v.updated_input is not None and "--walls" in v.updated_input["command"]
    assert switched not in v.reason


def test_attack_the_walls_test_switches_are_not_read_from_the_environment(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook, hookd and `guard run` inherit their environment from whoever started them
    (an agent's build-mode command can start hookd): the variables that once switched the
    walls off change nothing."""
    from guard.sandbox import confine

    monkeypatch.setenv("GUARD_TEST_NO_WALLS", "1")
    monkeypatch.setenv("GUARD_TEST_NO_NAMESPACES", "1")
    assert confine.walls_off() == "" and confine.test_switches() == []
    assert "treated as unavailable" not in confine.namespaces_unavailable()
    v = gate_for(tree).decide(bash(tree, "cat src/app.py"))
    assert v.updated_input is not None and "--walls" in v.updated_input["command"]


def test_without_kernel_confinement_the_analysis_decides_alone(tree: Tree) -> None:
    g = gate_for(tree, available="this kernel was built without Landlock")
    assert g.decide(bash(tree, "cat src/app.py")).action is VerdictAction.ALLOW
    assert g.decide(bash(tree, "python3 -c 'print(1)'")).action is VerdictAction.ASK


def test_build_agent_and_other_tools_are_not_confined(tree: Tree) -> None:
    g = Guard.load(worktree=tree.worktree)
    build = Gate(guard=g, agent="build", sessions=False, confiner=ShellConfiner())
    assert build.decide(bash(tree, "cat src/app.py")).action is VerdictAction.ALLOW
    read = ToolCall("claude-code", "Read", {"file_path": str(tree.victim)}, str(tree.worktree))
    assert gate_for(tree).decide(read).action is VerdictAction.ALLOW


def payload(tree: Tree, command: str) -> str:
    return json.dumps({
        "hook_event_name": "PreToolUse", "tool_name": "Bash", "session_id": "s",
        "tool_input": {"command": command}, "cwd": str(tree.worktree),
    })  # fmt: skip


@pytest.mark.parametrize(
    ("host", "rewrites"), [("claude-code", True), ("codex", False)]
)  # fmt: skip
def test_hook_rewrites_only_for_hosts_that_can(
    tree: Tree, host: str, rewrites: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Codex cannot run a rewritten call: its shell stays analysis-only, and a read-only
    command stays a plain allow there."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    command = "git --no-optional-locks status --short"
    answer = front_door.decide(host, payload(tree, command), agent="plan")
    text = answer.stdout
    assert ("run_confined.py" in text) is rewrites, text
    if host == "claude-code":
        out = json.loads(text)["hookSpecificOutput"]
        assert out["permissionDecision"] == "allow"
        assert "run_confined.py" in out["updatedInput"]["command"]
