# ruff: noqa: F811  (the fixtures claude and project come from test_claude_code_cli)
"""End to end: README's planning walkthrough with the real Claude Code CLI.

guard is installed once (``guard install claude-code --project``, as the
fixture does), no environment variable is set, Claude Code is never
reconfigured. ``guard plan start`` puts the worktree in plan mode; a scripted
model that finds the plan path **in the conversation** (the context guard
injects, or a refusal reason) writes its plan there while its writes to
``src/`` are refused; ``guard plan exit --approve`` approves it; the next
Claude Code run writes ``src/``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from guard.planning import Mode, Session

from .fake_anthropic import Script, ToolUse, conversation_text
from .test_claude_code_cli import (  # noqa: F401  (fixtures)
    audit_records,
    claude,
    denied_ids,
    project,
    run_claude,
    snapshot,
)

TOLD = re.compile(r"write your plan to (/\S+?\.md)")
PLAN = "# Plan: add caching\n\n1. Add an LRU cache to src/app.py\n2. Test it\n"


def told_path(body: dict[str, Any]) -> str:
    """The plan path the conversation so far tells the model (the latest mention)."""
    found = TOLD.findall(conversation_text(body))
    assert found, "guard never told the model where to write its plan"
    return str(found[-1])


def guard(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_walkthrough_plan_approve_build(claude: str, project: tuple[Path, dict[str, str]]) -> None:
    repo, env = project
    app = repo / "src" / "app.py"
    started = guard(repo, env, "plan", "start", "Add caching")
    assert started.returncode == 0, started.stderr
    (session,) = Session.list_all(repo)
    assert session.plan_path and f"Plan file: {session.plan_path}" in started.stdout

    # 1. plan: the write to src/ is refused, the plan lands where guard said
    src_before = snapshot(repo / "src")
    steps = [
        ToolUse("toolu_src", "Write", {"file_path": str(app), "content": "owned = True\n"}),
        ToolUse("toolu_plan", "Write", lambda b: {"file_path": told_path(b), "content": PLAN}),
    ]
    script = Script(steps)
    result = run_claude(claude, repo, env, script, "acceptEdits", None)
    assert denied_ids(result) == {"toolu_src"}, result.get("permission_denials")
    assert snapshot(repo / "src") == src_before
    refusal = script.tool_results()["toolu_src"]
    assert f"write your plan to {session.plan_path}" in refusal, refusal
    assert Path(session.plan_path).read_text() == PLAN
    first = next(b for b in script.requests if b.get("tools"))
    assert session.plan_path in conversation_text(first), "context injected before any refusal"
    # claude -p has no ExitPlanMode: the model is told what ends plan mode there
    assert "guard plan exit --approve" in conversation_text(first)
    assert "call ExitPlanMode" not in conversation_text(first)

    # 2. review and approve, outside the host
    status = guard(repo, env, "plan", "status")
    assert status.returncode == 0 and f"plan file {session.plan_path}" in status.stdout
    assert "DENY  plan Write" in status.stdout, status.stdout
    shown = guard(repo, env, "plan", "show", "--raw")
    assert shown.returncode == 0 and shown.stdout == PLAN
    approved = guard(repo, env, "plan", "exit", "--approve")
    assert approved.returncode == 0, approved.stderr
    assert "the hooks now use build" in approved.stdout
    assert session.refresh().mode is Mode.BUILD

    # 3. build: the same installation, no restart with other settings
    build = Script([ToolUse("toolu_build", "Write", {"file_path": str(app), "content": "ok\n"})])
    result = run_claude(claude, repo, env, build, "acceptEdits", None)
    assert not denied_ids(result), result.get("permission_denials")
    assert app.read_text() == "ok\n"


def installed_planning_hook(repo: Path) -> str:
    settings = json.loads((repo / ".claude/settings.json").read_text())
    (group,) = [g for g in settings["hooks"]["PreToolUse"] if g.get("matcher") == "ExitPlanMode"]
    return str(group["hooks"][0]["command"])


def test_exit_plan_mode_keeps_the_plan_and_waits_for_the_user(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    """Claude Code's ExitPlanMode {plan} is guard's plan_exit.

    Claude Code 2.1.332 offers no ExitPlanMode in a headless (-p) session, so
    the installed hook command is fed the PreToolUse payload Claude Code sends;
    the rest (approval, the next run) goes through the real CLI.
    """
    repo, env = project
    assert guard(repo, env, "plan", "start", "Add caching").returncode == 0
    (session,) = Session.list_all(repo)
    payload = {
        "session_id": "cc-1",
        "transcript_path": "/dev/null",
        "cwd": str(repo),
        "permission_mode": "plan",
        "hook_event_name": "PreToolUse",
        "tool_name": "ExitPlanMode",
        "tool_input": {"plan": PLAN},
        "tool_use_id": "toolu_exit",
    }
    hook = subprocess.run(
        ["sh", "-c", installed_planning_hook(repo)],
        input=json.dumps(payload),
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert hook.returncode == 0, hook.stderr
    said = json.loads(hook.stdout)["hookSpecificOutput"]
    assert said["permissionDecision"] == "ask" and "guard plan exit --approve" in said[
        "permissionDecisionReason"
    ]
    assert session.plan_path and Path(session.plan_path).read_text() == PLAN
    assert session.refresh().mode is Mode.PLAN, "asking is not approving"
    assert guard(repo, env, "plan", "exit", "--approve").returncode == 0
    app = repo / "src" / "app.py"
    build = Script([ToolUse("toolu_build", "Write", {"file_path": str(app), "content": "ok\n"})])
    result = run_claude(claude, repo, env, build, "acceptEdits", None)
    assert not denied_ids(result) and app.read_text() == "ok\n"


def test_two_worktrees_never_cross(
    claude: str, project: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Planning in one worktree changes nothing for another wired the same way."""
    repo, env = project
    other = tmp_path / "other"
    (other / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(other)], check=True, env=env)
    assert guard(other, env, "install", "claude-code", "--project").returncode == 0
    assert guard(repo, env, "plan", "start", "Only here").returncode == 0
    target = other / "src" / "b.py"
    script = Script([ToolUse("toolu_b", "Write", {"file_path": str(target), "content": "b\n"})])
    result = run_claude(claude, other.resolve(), env, script, "acceptEdits", None)
    assert not denied_ids(result) and target.read_text() == "b\n"
    write_a = {"file_path": str(repo / "src/a.py"), "content": "a"}
    here = Script([ToolUse("toolu_a", "Write", write_a)])
    result = run_claude(claude, repo, env, here, "acceptEdits", None)
    assert denied_ids(result) == {"toolu_a"} and not (repo / "src/a.py").exists()


def test_plan_agent_creates_the_plan_directory_and_nothing_else(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    """`mkdir -p .openoxide/plans && cat > .openoxide/plans/p.md` runs; attacks: a directory
    below the plan directory, one in src/, one through `..`."""
    repo, env = project
    assert not (repo / ".openoxide" / "plans").exists()
    make_plan = "mkdir -p .openoxide/plans && cat > .openoxide/plans/p.md <<'EOF'\n# Plan\nEOF"
    steps = [
        ToolUse("toolu_plan", "Bash", {"command": make_plan, "description": "write the plan"}),
        ToolUse("toolu_sub", "Bash", {"command": "mkdir -p .openoxide/plans/sub"}),
        ToolUse("toolu_src", "Bash", {"command": "mkdir -p src/evil"}),
        ToolUse("toolu_up", "Bash", {"command": "mkdir -p .openoxide/plans/../../src/up"}),
    ]
    result = run_claude(claude, repo, env, Script(steps), "acceptEdits", "plan")
    assert denied_ids(result) == {"toolu_sub", "toolu_src", "toolu_up"}
    assert (repo / ".openoxide/plans/p.md").read_text() == "# Plan\n"
    assert not (repo / ".openoxide/plans/sub").exists()
    assert not (repo / "src/evil").exists() and not (repo / "src/up").exists()


def test_plan_mode_follows_the_agent_into_a_submodule(
    claude: str, project: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Attack (issue 28): the model works in a submodule, where the nearest `.git` has no
    guard session, when the user starts plan mode in the outer worktree; it then writes
    the outer src/ with Write and with Bash. Both are refused, the disk is unchanged, and
    the real Claude Code session id is bound to the plan session.

    (In plan mode every Bash command runs confined, so a `cd` there does not move Claude
    Code's shell: the model is moved into the submodule just before the plan starts, in
    the same Claude Code run; the scripted model starts the plan when it asks for step 2.)
    """
    repo, env = project
    origin = tmp_path / "lib-origin"
    origin.mkdir()
    (origin / "lib.py").write_text("X = 1\n")
    for args, where in (
        (["init", "-q", "."], origin), (["add", "."], origin), (["commit", "-qm", "lib"], origin),
        (["-c", "protocol.file.allow=always", "submodule", "add", "-q", f"file://{origin}",
          "sub"], repo),
        (["commit", "-qm", "add sub"], repo),
    ):  # fmt: skip
        subprocess.run(["git", *args], cwd=where, env=env, check=True, capture_output=True)
    app = repo / "src" / "app.py"
    before = snapshot(repo / "src")
    started: list[subprocess.CompletedProcess[str]] = []

    def plan_starts_now(body: dict[str, Any]) -> dict[str, Any]:
        if not started:  # the user starts plan mode while the model sits in sub/
            started.append(guard(repo, env, "plan", "start", "Refactor"))
        return {"command": "pwd", "description": "where am I"}

    steps = [
        ToolUse("toolu_cd", "Bash", {"command": f"cd {repo / 'sub'}", "description": "go"}),
        ToolUse("toolu_pwd", "Bash", plan_starts_now),
        ToolUse("toolu_write", "Write", {"file_path": str(app), "content": "owned = True\n"}),
        ToolUse("toolu_bash", "Bash",
                {"command": "echo owned > ../src/app.py", "description": "write"}),
    ]  # fmt: skip
    script = Script(steps)
    result = run_claude(claude, repo, env, script, "acceptEdits", None)
    assert started and started[0].returncode == 0, started
    (session,) = Session.list_all(repo)
    assert snapshot(repo / "src") == before, "the outer src/ is unchanged"
    results = script.tool_results()
    assert str(repo / "sub") in results["toolu_pwd"], "Claude Code kept the cwd the model chose"
    assert {"toolu_write", "toolu_bash"} <= denied_ids(result), (result, results)
    assert session.plan_path and session.plan_path in results["toolu_write"]
    records = [r for r in audit_records(Path(env["HOME"])) if r.get("tool_use_id")]
    by_id = {r["tool_use_id"]: r for r in records}
    assert by_id["toolu_write"]["decision"] == "deny" and by_id["toolu_bash"]["decision"] == "deny"
    assert by_id["toolu_bash"]["cwd"] == str(repo / "sub"), "the call came from the submodule"
    host = by_id["toolu_write"]["session_id"]
    assert session.refresh().host_sessions == [host], "the agent run is bound to the session"
    assert not (repo / "sub" / ".openoxide").exists()


def test_plan_mode_follows_the_agent_into_an_added_dir(
    claude: str, project: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Attack (issue 39): while building, the model `cd`s into a folder Claude Code was
    given with ``--add-dir`` (outside every worktree); the user then runs ``guard plan
    start`` in the worktree; the model writes the worktree's src/ with ``python3 -c``,
    whose target no analysis sees. The run was seen in the worktree while building, so
    plan mode follows it: the command runs confined with the worktree read-only, src/ is
    unchanged, and the worktree's audit log records the call as the plan agent's."""
    repo, env = project
    added = tmp_path / "added"
    added.mkdir()
    added = added.resolve()
    app = repo / "src" / "app.py"
    before = snapshot(repo / "src")
    started: list[subprocess.CompletedProcess[str]] = []

    def plan_starts_now(body: dict[str, Any]) -> dict[str, Any]:
        if not started:  # the user starts plan mode while the model sits in the added dir
            started.append(guard(repo, env, "plan", "start", "Refactor"))
        return {"command": "pwd", "description": "where am I"}

    sneaky = f"python3 -c \"open('{app}', 'w').write('owned = True')\""
    steps = [
        ToolUse("toolu_cd", "Bash", {"command": f"cd {added}", "description": "go"}),
        ToolUse("toolu_pwd", "Bash", plan_starts_now),
        ToolUse("toolu_py", "Bash", {"command": sneaky, "description": "write"}),
    ]
    script = Script(steps)
    run_claude(claude, repo, env, script, "acceptEdits", None, "--add-dir", str(added))
    assert started and started[0].returncode == 0, started
    (session,) = Session.list_all(repo)
    results = script.tool_results()
    assert str(added) in results["toolu_pwd"], "Claude Code kept the cwd the model chose"
    assert snapshot(repo / "src") == before, (results, "the worktree's src/ is unchanged")
    records = [r for r in audit_records(Path(env["HOME"])) if r.get("tool_use_id")]
    by_id = {r["tool_use_id"]: r for r in records}
    sneak = by_id["toolu_py"]
    assert sneak["cwd"] == str(added), "the call came from the added dir"
    assert sneak["decision"] == "allow_confined" and sneak["agent"] == "plan", sneak
    assert by_id["toolu_cd"]["agent"] == "build", "the run was building when it was seen"
    logs = {p.name for p in Path(env["HOME"]).rglob("audit/*.jsonl")}
    assert all(n.startswith("repo-") for n in logs), ("one log: the worktree's", logs)
    assert session.refresh().host_sessions == [sneak["session_id"]], "bound to the session"
