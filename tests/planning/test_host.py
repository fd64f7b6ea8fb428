"""The planning side of Claude Code's hooks: context at each turn, ExitPlanMode as plan_exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from guard.hooks.settings_file import read_settings
from guard.planning import Mode, Session, UserDecision, plan_exit
from guard.planning.host import answer, planning_command
from guard.setup.install import install, uninstall

PLAN = "# Plan\n\n1. cache\n"


def call(repo: Path, event: str, **extra: Any) -> tuple[int, dict[str, Any], str]:
    payload = {"session_id": "cc", "cwd": str(repo), "hook_event_name": event, **extra}
    got = answer(json.dumps(payload), ["claude-code"], env={})
    return got.exit_code, json.loads(got.stdout) if got.stdout else {}, got.stderr


def exit_call(repo: Path, event: str, plan: str = PLAN, mode: str = "default") -> Any:
    return call(
        repo,
        event,
        tool_name="ExitPlanMode",
        tool_input={"plan": plan},
        tool_use_id="toolu_1",
        permission_mode=mode,
    )


def context(repo: Path, event: str = "UserPromptSubmit") -> str:
    code, out, _ = call(repo, event, prompt="go")
    assert code == 0
    return str(out.get("hookSpecificOutput", {}).get("additionalContext", ""))


def test_each_turn_states_mode_plan_file_and_approval(repo: Path) -> None:
    assert context(repo) == "", "no session, no plan mode: nothing to say"
    s = Session.start(repo, "plan", title="Add caching")
    for event in ("SessionStart", "UserPromptSubmit"):
        text = context(repo, event)
        assert f"write your plan to {s.plan_path}" in text and "guard plan exit --approve" in text
        assert "ExitPlanMode" in text
    assert s.plan_path
    Path(s.plan_path).write_text(PLAN)
    assert plan_exit(s, UserDecision.approve()).ok
    assert "approved the plan" in context(repo)


def test_context_without_session_follows_the_host_plan_mode(repo: Path) -> None:
    code, out, _ = call(repo, "UserPromptSubmit", prompt="go", permission_mode="plan")
    text = out["hookSpecificOutput"]["additionalContext"]
    assert code == 0 and f"directly in {repo}/.openoxide/plans" in text


def test_a_broken_state_is_told_not_a_blocked_prompt(repo: Path) -> None:
    s = Session.start(repo, "plan")
    s.path.write_text("{not json")
    code, out, _ = call(repo, "UserPromptSubmit", prompt="go")
    assert code == 0 and "refused" in out["hookSpecificOutput"]["additionalContext"]


def test_exit_plan_mode_records_the_plan_and_asks(repo: Path) -> None:
    s = Session.start(repo, "plan", title="x")
    code, out, _ = exit_call(repo, "PreToolUse")
    said = out["hookSpecificOutput"]
    assert code == 0 and said["permissionDecision"] == "ask"
    assert s.plan_path and Path(s.plan_path).read_text() == PLAN
    assert s.refresh().mode is Mode.PLAN and [p.kind for p in s.pending] == ["plan_exit"]
    code, out, _ = exit_call(repo, "PostToolUse")
    assert code == 0 and "approved" in out["hookSpecificOutput"]["additionalContext"]
    assert s.refresh().mode is Mode.BUILD and s.decisions[-1].decision == "approve"


def test_a_written_plan_file_is_not_overwritten_by_the_tool_text(repo: Path) -> None:
    s = Session.start(repo, "plan", title="x")
    assert s.plan_path
    Path(s.plan_path).write_text("# the file the model wrote\n")
    exit_call(repo, "PreToolUse", plan="# something else\n")
    assert Path(s.plan_path).read_text() == "# the file the model wrote\n"


def test_no_plan_at_all_is_refused_with_the_path(repo: Path) -> None:
    s = Session.start(repo, "plan", title="x")
    code, out, _ = exit_call(repo, "PreToolUse", plan="  ")
    said = out["hookSpecificOutput"]
    assert code == 0 and said["permissionDecision"] == "deny"
    assert f"write your plan to {s.plan_path}" in said["permissionDecisionReason"]


def test_the_tool_running_is_not_approval_unless_the_user_was_asked(repo: Path) -> None:
    """Attack: the model calls ExitPlanMode where guard's ask never reached the user."""
    s = Session.start(repo, "plan", title="x")
    assert s.plan_path
    Path(s.plan_path).write_text(PLAN)
    exit_call(repo, "PostToolUse")  # no PreToolUse: guard did not ask
    assert s.refresh().mode is Mode.PLAN
    exit_call(repo, "PreToolUse")
    exit_call(repo, "PostToolUse", mode="bypassPermissions")  # the host asks nobody
    assert s.refresh().mode is Mode.PLAN
    exit_call(repo, "PreToolUse")
    Path(s.plan_path).write_text(PLAN + "3. and also delete everything\n")
    exit_call(repo, "PostToolUse")  # the plan changed after the user saw it
    assert s.refresh().mode is Mode.PLAN


def test_no_plan_session_leaves_exit_plan_mode_to_the_policy_hook(repo: Path) -> None:
    code, out, err = exit_call(repo, "PreToolUse")
    assert (code, out, err) == (0, {}, "")


def test_a_malformed_tool_payload_blocks(repo: Path) -> None:
    got = answer(b"[1, 2", ["claude-code"], env={})
    assert got.exit_code == 2 and "planning hook" in got.stderr


def test_install_wires_the_planning_side_and_uninstall_removes_it(repo: Path) -> None:
    install("claude-code", "project", cwd=repo)
    install("claude-code", "project", cwd=repo)
    hooks = read_settings(repo / ".claude/settings.json")["hooks"]
    assert sorted(hooks) == ["PostToolUse", "PreToolUse", "SessionStart", "UserPromptSubmit"]
    assert [g.get("matcher") for g in hooks["PreToolUse"]] == ["*", "ExitPlanMode"]
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert "-m guard.planning.host claude-code" in command
    uninstall("claude-code", "project", cwd=repo)
    assert "hooks" not in read_settings(repo / ".claude/settings.json")


def test_the_installed_command_runs(repo: Path) -> None:
    s = Session.start(repo, "plan", title="x")
    command = planning_command(f"{sys.executable} -I /x/_client.py claude-code --agent plan",
                               "claude-code")
    assert command is not None and "--agent plan" in command
    payload = json.dumps({"cwd": str(repo), "hook_event_name": "SessionStart"})
    proc = subprocess.run(
        ["sh", "-c", command], input=payload, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"write your plan to {s.plan_path}" in said


def test_headless_claude_code_is_told_what_works_there(repo: Path) -> None:
    """``claude -p`` has no ExitPlanMode tool (its hooks see CLAUDE_CODE_ENTRYPOINT=sdk-cli):
    the context names what ends plan mode there, ``guard plan exit --approve``, and never
    tells the model to call a tool it does not have."""
    s = Session.start(repo, "plan", title="Headless")
    payload = {"session_id": "cc", "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
               "prompt": "go"}
    got = answer(json.dumps(payload), ["claude-code"], env={"CLAUDE_CODE_ENTRYPOINT": "sdk-cli"})
    text = json.loads(got.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"write your plan to {s.plan_path}" in text
    assert "guard plan exit --approve" in text and "headless" in text
    assert "call ExitPlanMode" not in text
    interactive = answer(json.dumps(payload), ["claude-code"],
                         env={"CLAUDE_CODE_ENTRYPOINT": "cli"})
    assert "call ExitPlanMode" in json.loads(interactive.stdout)["hookSpecificOutput"][
        "additionalContext"]
