"""Codex, Gemini, OpenCode and Cursor hooks: each host's payloads and the answers it honours.

Codex payloads are the ones Codex CLI 0.171.0 sent (``Bash`` for every shell call,
``apply_patch`` with the body in ``command``); Gemini's those of 0.61.0; OpenCode's
those guard's plugin sends for 1.18.33.

Decided through the hook pipeline in-process (`decide_hook`); the process boundary,
exit codes and fail-closed paths are exercised by test_claude_code.py and test_hookd.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import HookRunner
from .payloads import (
    answer_of,
    claude_payload,
    codex_payload,
    cursor_payload,
    gemini_payload,
    opencode_payload,
)

# -- Codex: only a deny blocks, so ask is answered as deny and allow as silence --------


def test_codex_plan_agent_shell_redirection_is_denied(repo: Path, decide_hook: HookRunner) -> None:
    """Attack: the plan agent writes source through Codex's shell tool."""
    p = codex_payload("Bash", {"command": "echo hi > src/app2.py"}, repo)
    out = answer_of(decide_hook("codex", p, "--agent", "plan"))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert out["hookEventName"] == "PreToolUse"


def test_codex_allow_is_silent(repo: Path, decide_hook: HookRunner) -> None:
    p = codex_payload("Bash", {"command": "echo x > src/y"}, repo)
    proc = decide_hook("codex", p, "--agent", "build")
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr


def test_codex_ask_becomes_deny(repo: Path, decide_hook: HookRunner) -> None:
    """Codex ignores ask; answering it would let the secret read through."""
    (repo / ".env").write_text("TOKEN=1\n")
    p = codex_payload("Bash", {"command": "cat .env"}, repo)
    p2 = codex_payload("read_file", {"file_path": str(repo / ".env")}, repo)
    for payload in (p, p2):
        proc = decide_hook("codex", payload, "--agent", "plan")
        if proc.returncode == 2:
            continue  # the dialect does not know the tool: blocked all the same
        out = answer_of(proc)["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny"


def test_codex_permission_mode_plan_selects_plan_agent(repo: Path, decide_hook: HookRunner) -> None:
    p = codex_payload("Bash", {"command": "echo x > src/y"}, repo)
    p["permission_mode"] = "plan"
    out = answer_of(decide_hook("codex", p))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"


def test_codex_bad_payload_blocks(decide_hook: HookRunner) -> None:
    proc = decide_hook("codex", {"hook_event_name": "PreToolUse", "tool_name": "Bash"})
    assert proc.returncode == 2 and "tool_input" in proc.stderr


@pytest.mark.parametrize("name", ["Bash", "shell", "exec_command", "shell_command"])
def test_codex_read_only_shell_runs_in_plan_mode(
    name: str, repo: Path, decide_hook: HookRunner
) -> None:
    """0.171 sends Bash; a plan agent must still run `ls` and `git --no-optional-locks status`
    (older names too); plain `git status` rewrites the index, so it is refused."""
    for command in ("ls src", "git --no-optional-locks status"):
        proc = decide_hook("codex", codex_payload(name, {"command": command}, repo),
                           "--agent", "plan")
        assert proc.returncode == 0 and proc.stdout == "", (command, proc.stdout, proc.stderr)
    proc = decide_hook("codex", codex_payload(name, {"command": "git status"}, repo),
                       "--agent", "plan")
    out = answer_of(proc)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and ".git/index" in out["permissionDecisionReason"]


def test_codex_bash_is_analysed_in_build_mode(repo: Path, decide_hook: HookRunner) -> None:
    """Attack (seen with 0.171 before `Bash` was mapped): append to Codex's own config."""
    p = codex_payload("Bash", {"command": "echo x >> ~/.codex/config.toml"}, repo)
    out = answer_of(decide_hook("codex", p, "--agent", "build"))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "protected" in out["permissionDecisionReason"]


PATCH = (
    "*** Begin Patch\n*** Update File: src/app.py\n@@\n-print('hello')\n+print('owned')\n"
    "*** End Patch\n"
)


def test_codex_apply_patch_into_src_is_denied_plan_file_allowed(
    repo: Path, decide_hook: HookRunner
) -> None:
    p = codex_payload("apply_patch", {"command": PATCH}, repo)
    out = answer_of(decide_hook("codex", p, "--agent", "plan"))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "src/app.py" in out["permissionDecisionReason"]
    plan = "*** Begin Patch\n*** Add File: .openoxide/plans/p.md\n+# Plan\n*** End Patch\n"
    proc = decide_hook("codex", codex_payload("apply_patch", {"command": plan}, repo),
                       "--agent", "plan")
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout


# -- Unknown tool names: analysed by their input, never waved through ---------------------


@pytest.mark.parametrize(
    ("host", "payload"),
    [
        ("codex", codex_payload),
        ("claude-code", claude_payload),
        ("gemini", gemini_payload),
        ("opencode", opencode_payload),
    ],
)
def test_unknown_shell_tool_cannot_write_a_protected_path_in_build_mode(
    host: str, payload: Any, repo: Path, home: Path, decide_hook: HookRunner
) -> None:
    """Attack: a host renames its shell tool ('Shellx'); the build agent appends to a
    protected file through it. The hook process decides; the file must stay unchanged."""
    target = home / ".codex/config.toml"
    target.parent.mkdir(exist_ok=True)
    target.write_text("model = 'x'\n")
    p = payload("Shellx", {"command": "echo x >> ~/.codex/config.toml"}, repo)
    proc = decide_hook(host, p, "--agent", "build")
    assert proc.returncode == 2 or "deny" in proc.stdout, proc.stdout
    assert "protected" in (proc.stdout + proc.stderr)
    assert target.read_text() == "model = 'x'\n"


@pytest.mark.parametrize("field", ["file_path", "path", "filePath", "notebook_path"])
def test_unknown_write_tool_is_a_write_of_its_path(
    field: str, repo: Path, decide_hook: HookRunner
) -> None:
    """Attack: a new write tool ('write_file_v2') the plan agent uses on src/."""
    p = codex_payload("write_file_v2", {field: str(repo / "src/app.py"), "content": "x"}, repo)
    out = answer_of(decide_hook("codex", p, "--agent", "plan"))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"


def test_guessed_tools_are_flagged_in_the_audit_log(
    repo: Path, home: Path, decide_hook: HookRunner
) -> None:
    from guard.analysis import GUESSED
    from guard.audit.logfile import read

    decide_hook("codex", codex_payload("Shellx", {"command": "ls"}, repo), "--agent", "build")
    [log] = home.rglob("audit/*.jsonl")
    [record] = list(read(log))
    assert record["tool_name"] == "Shellx"
    assert GUESSED in record["effects"][0]["detail"]


# -- Gemini: {"decision", "reason"}; no ask -----------------------------------------


def test_gemini_plan_agent_write_file_is_denied(repo: Path, decide_hook: HookRunner) -> None:
    p = gemini_payload("write_file", {"file_path": str(repo / "src/n.py"), "content": "x"}, repo)
    out = answer_of(decide_hook("gemini", p, "--agent", "plan"))
    assert out["decision"] == "deny" and out["reason"].startswith("guard: ")


def test_gemini_plan_file_is_allowed(repo: Path, decide_hook: HookRunner) -> None:
    p = gemini_payload(
        "write_file", {"file_path": str(repo / ".openoxide/plans/p.md"), "content": "x"}, repo
    )
    assert answer_of(decide_hook("gemini", p, "--agent", "plan"))["decision"] == "allow"


def test_gemini_ask_becomes_deny(repo: Path, decide_hook: HookRunner) -> None:
    (repo / ".env").write_text("TOKEN=1\n")
    p = gemini_payload("read_file", {"file_path": str(repo / ".env")}, repo)
    out = answer_of(decide_hook("gemini", p, "--agent", "plan"))
    assert out["decision"] == "deny" and "cannot ask" in out["reason"]


def test_gemini_without_mode_is_build(repo: Path, decide_hook: HookRunner) -> None:
    p = gemini_payload("write_file", {"file_path": str(repo / "src/n.py"), "content": "x"}, repo)
    assert answer_of(decide_hook("gemini", p))["decision"] == "allow"


def test_gemini_real_payload_run_shell_command(repo: Path, decide_hook: HookRunner) -> None:
    """0.61.0 sends relative paths and run_shell_command {command, description}."""
    p = gemini_payload("run_shell_command", {"command": "echo x > src/y", "description": "w"},
                       repo)
    assert answer_of(decide_hook("gemini", p, "--agent", "plan"))["decision"] == "deny"
    p = gemini_payload("write_file", {"file_path": "src/app.py", "content": "x"}, repo)
    assert answer_of(decide_hook("gemini", p, "--agent", "plan"))["decision"] == "deny"
    p = gemini_payload("run_shell_command", {"command": "ls", "description": "list"}, repo)
    assert answer_of(decide_hook("gemini", p, "--agent", "plan"))["decision"] == "allow"


# -- OpenCode: the plugin's payload; {"decision", "reason"}; no ask -----------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write", {"filePath": "src/app.py", "content": "x"}),
        ("edit", {"filePath": "src/app.py", "oldString": "hello", "newString": "x"}),
        ("bash", {"command": "echo x > src/y", "description": "w"}),
        ("patch", {"patchText": PATCH}),
    ],
)
def test_opencode_plan_agent_writes_are_denied(
    tool: str, args: dict[str, Any], repo: Path, decide_hook: HookRunner
) -> None:
    out = answer_of(decide_hook("opencode", opencode_payload(tool, args, repo), "--agent", "plan"))
    assert out["decision"] == "deny" and out["reason"].startswith("guard: ")


def test_opencode_plan_file_and_read_only_shell_are_allowed(
    repo: Path, decide_hook: HookRunner
) -> None:
    for tool, args in (("write", {"filePath": ".openoxide/plans/p.md", "content": "x"}),
                       ("bash", {"command": "ls src", "description": "list"}),
                       ("read", {"filePath": "src/app.py"})):
        out = answer_of(decide_hook("opencode", opencode_payload(tool, args, repo),
                                    "--agent", "plan"))
        if tool == "bash":  # a plan-mode shell command runs confined (guard.sandbox.confiner)
            assert out["decision"] == "allow", out
            assert "run_confined.py" in out["args"]["command"], out
            continue
        assert out == {"decision": "allow"}, (tool, out)


@pytest.mark.parametrize("target", [".opencode/plugin/guard.js", "~/.config/opencode/plugin/x.js",
                                    "~/.gemini/trustedFolders.json"])
def test_build_agent_cannot_unwire_opencode_or_gemini(
    target: str, repo: Path, decide_hook: HookRunner
) -> None:
    """Attack: the build agent rewrites guard's plugin or distrusts the workspace."""
    p = opencode_payload("write", {"filePath": target, "content": "export {}"}, repo)
    out = answer_of(decide_hook("opencode", p, "--agent", "build"))
    assert out["decision"] == "deny" and "protected" in out["reason"], out


def test_opencode_ask_becomes_deny(repo: Path, decide_hook: HookRunner) -> None:
    (repo / ".env").write_text("TOKEN=1\n")
    p = opencode_payload("read", {"filePath": str(repo / ".env")}, repo)
    out = answer_of(decide_hook("opencode", p, "--agent", "plan"))
    assert out["decision"] == "deny" and "cannot ask" in out["reason"]


# -- Cursor: {"permission", "user_message", "agent_message"} ----------------------------


def test_cursor_shell_redirection_is_denied(repo: Path, decide_hook: HookRunner) -> None:
    p = cursor_payload("beforeShellExecution", repo, command="echo x > src/y", cwd=str(repo))
    out = answer_of(decide_hook("cursor", p, "--agent", "plan"))
    assert out["permission"] == "deny"
    assert out["user_message"] == out["agent_message"] and "guard:" in out["agent_message"]


def test_cursor_shell_allowed_for_build(repo: Path, decide_hook: HookRunner) -> None:
    p = cursor_payload("beforeShellExecution", repo, command="echo x > src/y", cwd=str(repo))
    assert answer_of(decide_hook("cursor", p, "--agent", "build")) == {"permission": "allow"}


def test_cursor_read_of_secret_is_denied_not_asked(repo: Path, decide_hook: HookRunner) -> None:
    """beforeReadFile knows only allow/deny: guard's ask must not become an allow."""
    (repo / ".env").write_text("TOKEN=1\n")
    p = cursor_payload("beforeReadFile", repo, file_path=str(repo / ".env"), content="TOKEN=1")
    out = answer_of(decide_hook("cursor", p, "--agent", "plan"))
    assert out["permission"] == "deny"


def test_cursor_read_of_source_is_allowed(repo: Path, decide_hook: HookRunner) -> None:
    p = cursor_payload("beforeReadFile", repo, file_path=str(repo / "src/app.py"), content="")
    assert answer_of(decide_hook("cursor", p, "--agent", "plan"))["permission"] == "allow"


def test_cursor_mcp_tool_input_as_json_string(repo: Path, decide_hook: HookRunner) -> None:
    """Cursor sends tool_input as a JSON string; a write to src/ must still be seen."""
    args = json.dumps({"path": str(repo / "src/n.py"), "content": "x"})
    p = cursor_payload(
        "beforeMCPExecution",
        repo,
        tool_name="write_file",
        tool_input=args,
        command="mcp-server-filesystem",
    )
    proc = decide_hook("cursor", p, "--agent", "plan")
    assert proc.returncode == 2 or answer_of(proc)["permission"] == "deny", proc.stdout


def test_cursor_unknown_event_blocks(repo: Path, decide_hook: HookRunner) -> None:
    proc = decide_hook("cursor", cursor_payload("afterFileEdit", repo, file_path="x"))
    assert proc.returncode == 2 and "afterFileEdit" in proc.stderr


def test_opencode_answers_allow_confined_with_the_rewritten_args(repo: Path) -> None:
    """The plugin copies `args` into output.args: OpenCode then runs the confined command."""
    from guard.gate import Verdict, VerdictAction
    from guard.hosts.opencode.hook import ADAPTER

    hook = ADAPTER.parse(opencode_payload("bash", {"command": "make", "description": "d"}, repo))
    verdict = Verdict(VerdictAction.ALLOW_CONFINED, "runs confined", "guard.confined",
                      hook.call, "plan", updated_input={"command": "guard run -- make"})
    answer = json.loads(ADAPTER.answer(verdict, hook).stdout)
    assert answer["decision"] == "allow"
    assert answer["args"] == {"command": "guard run -- make", "description": "d"}
    denied = Verdict(VerdictAction.DENY, "no", "r", hook.call, "plan")
    assert json.loads(ADAPTER.answer(denied, hook).stdout) == {"decision": "deny",
                                                               "reason": "guard: no [r]"}


# -- every host: a plan session guard cannot read is a refusal ------------------------

#: A read each host's hook sends: allowed in either mode, so only the session can refuse it.
READS = {
    "claude-code": lambda repo: claude_payload(
        "Read", {"file_path": str(repo / "src/app.py")}, repo),
    "codex": lambda repo: codex_payload("Bash", {"command": "cat src/app.py"}, repo),
    "gemini": lambda repo: gemini_payload(
        "read_file", {"file_path": str(repo / "src/app.py")}, repo),
    "opencode": lambda repo: opencode_payload(
        "read", {"filePath": str(repo / "src/app.py")}, repo),
    "cursor": lambda repo: cursor_payload(
        "beforeShellExecution", repo, command="cat src/app.py", cwd=str(repo)),
}


@pytest.mark.parametrize("host", sorted(READS))
def test_a_plan_session_whose_file_cannot_be_read_blocks_every_host_s_hook(
    host: str, repo: Path, run_hook: HookRunner
) -> None:
    """Fail closed: the worktree's open plan session has a directory where its file was
    (unreadable, even to root). Each host's hook, as its own process, refuses the call
    and names the file, instead of deciding as if no session were open (build)."""
    from guard.planning import Session

    session = Session.start(repo, "plan", title="unreadable")
    session.path.unlink()
    session.path.mkdir()
    proc = run_hook(host, READS[host](repo))
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == ""
    assert "cannot read session file" in proc.stderr and session.path.name in proc.stderr
