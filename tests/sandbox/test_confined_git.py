"""`git status` and `git diff` in plan mode: confined where the host runs a rewritten call.

Both refresh the stat cache in .git/index when they can. On a host whose hook can
rewrite a call (Claude Code, Gemini CLI, OpenCode) guard runs them confined: the
kernel makes .git read-only, git skips the refresh and still answers correctly. On a
host that cannot (Codex, Cursor) the analysis decides alone: the refusal stands and
names the spelling that only reads. The commands run for real, through the hooks'
answers, on a repository whose stat cache is stale; the index is checked afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import Tree, needs_landlock

from guard.hooks import front_door

pytestmark = needs_landlock

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def shell_payload(host: str, tree: Tree, command: str) -> str:
    cwd = str(tree.worktree)
    if host == "cursor":
        fields: dict[str, Any] = {"command": command, "cwd": cwd}
        return json.dumps({"conversation_id": "c-1", "generation_id": "g-1",
                           "hook_event_name": "beforeShellExecution",
                           "workspace_roots": [cwd], **fields})
    tool, event = {"claude-code": ("Bash", "PreToolUse"), "codex": ("Bash", "PreToolUse"),
                   "gemini": ("run_shell_command", "BeforeTool"),
                   "opencode": ("bash", "tool.execute.before")}[host]
    return json.dumps({"hook_event_name": event, "tool_name": tool, "session_id": "s",
                       "tool_input": {"command": command}, "cwd": cwd})


def rewritten(host: str, answer: dict[str, Any]) -> str:
    """The command the host runs instead, from its hook's answer."""
    if host == "claude-code":
        out = answer["hookSpecificOutput"]
        assert out["permissionDecision"] == "allow", out
        command = out["updatedInput"]["command"]
    elif host == "gemini":
        assert answer["decision"] == "allow", answer
        command = answer["hookSpecificOutput"]["tool_input"]["command"]
    else:
        assert answer["decision"] == "allow", answer
        command = answer["args"]["command"]
    assert isinstance(command, str) and "run_confined.py" in command
    return command


@pytest.fixture
def stale(tree: Tree) -> Tree:
    """A repository whose index caches stale stat data: one file changed, one only touched."""
    (tree.worktree / "src" / "other.py").write_text("x = 1\n")
    subprocess.run([*GIT, "-C", str(tree.worktree), "add", "src"], check=True)
    subprocess.run([*GIT, "-C", str(tree.worktree), "commit", "-qm", "first"], check=True)
    tree.victim.write_text("print('changed')\n")
    later = os.stat(tree.victim).st_mtime_ns + 2_000_000_000
    os.utime(tree.victim, ns=(later, later))
    os.utime(tree.worktree / "src" / "other.py", ns=(later, later))  # same content
    return tree


def index_state(tree: Tree) -> tuple[bytes, int, int]:
    index = tree.worktree / ".git" / "index"
    st = index.stat()
    return index.read_bytes(), st.st_mtime_ns, st.st_ino


@pytest.mark.parametrize("host", ["claude-code", "gemini", "opencode"])
def test_git_status_and_diff_run_confined_and_answer_correctly_with_the_index_untouched(
    stale: Tree, host: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    before = index_state(stale)
    outputs = []
    for command in ("git status --porcelain", "git diff", "git status"):
        answer = front_door.decide(host, shell_payload(host, stale, command), agent="plan")
        wrapped = rewritten(host, json.loads(answer.stdout))
        run = subprocess.run(["bash", "-c", wrapped], cwd=stale.worktree, capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0, (command, run.stderr)
        outputs.append(run.stdout)
    porcelain, diff, long = outputs
    reader = subprocess.run([*GIT, "--no-optional-locks", "status", "--porcelain"],
                            cwd=stale.worktree, capture_output=True, text=True, check=True)
    assert porcelain == reader.stdout  # what the spelling that only reads answers
    assert " M src/app.py\n" in porcelain and "other.py" not in porcelain  # read, unchanged
    assert "-print('original')\n+print('changed')" in diff and "other.py" not in diff
    assert "modified:   src/app.py" in long and "other.py" not in long
    assert index_state(stale) == before
    assert not (stale.worktree / ".git" / "index.lock").exists()
    # the test can fail: unconfined, the same command refreshes the stale cache
    subprocess.run(["git", "status", "--porcelain"], cwd=stale.worktree, check=True,
                   capture_output=True)
    assert index_state(stale) != before


@pytest.mark.parametrize("host", ["codex", "cursor"])
@pytest.mark.parametrize(
    ("command", "spelling"),
    [("git status", "`git --no-optional-locks status` only reads"),
     ("git diff", "`git -c diff.autoRefreshIndex=false diff`")],
)
def test_hosts_that_cannot_rewrite_a_call_refuse_it_naming_the_read_only_spelling(
    stale: Tree, host: str, command: str, spelling: str, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    answer = json.loads(
        front_door.decide(host, shell_payload(host, stale, command), agent="plan").stdout
    )
    if host == "codex":
        out = answer["hookSpecificOutput"]
        decision, reason = out["permissionDecision"], out["permissionDecisionReason"]
    else:
        decision, reason = answer["permission"], answer["agent_message"]
    assert decision == "deny" and spelling in reason, reason


def test_a_cache_write_into_the_plan_directory_is_not_excused(stale: Tree) -> None:
    """The plan directory is writable under confinement: git's index there would be
    written, so a repository inside it keeps the refusal."""
    from guard.decide import Guard
    from guard.effects import ToolCall
    from guard.gate import Gate, VerdictAction
    from guard.sandbox.confiner import ShellConfiner

    nested = stale.plans / "nested"
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    gate = Gate(guard=Guard.load(worktree=stale.worktree), agent="plan", sessions=False,
                confiner=ShellConfiner())
    call = ToolCall("claude-code", "Bash", {"command": f"git -C {nested} status"},
                    str(stale.worktree))
    verdict = gate.decide(call)
    assert verdict.action is VerdictAction.DENY and ".git/index" in verdict.reason
