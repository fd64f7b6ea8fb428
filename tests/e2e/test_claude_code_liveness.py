# ruff: noqa: F811  (the fixtures claude and project come from test_claude_code_cli)
"""End to end: a guard hook that hangs, or that Claude Code cannot start, blocks the call.

Claude Code 2.1.332 lets a tool run when its hook times out or cannot start, unless the
hook's entry says ``"onFailure": "block"`` (its settings schema: "'block': the failure
counts as exit code 2, so the action the event guards ... is blocked"). ``guard install``
writes every deciding hook with it. Two attacks with the real Claude Code, each on the
Write that follows:

* the hook cannot start: a plan-mode Bash lowers Claude Code's own RLIMIT_NOFILE so
  far that it can no longer spawn a hook (the kernel's walls, which stop that, are
  switched off here through the test-only entry point, as in test_claude_code_missed);
* the hook hangs: the hook command sleeps past the entry's timeout (what a lock held
  for ever did to guard's hook before every wait was bounded).

Both times the Write does not land, and the model is told why.
"""

from __future__ import annotations

from pathlib import Path

from .claude_settings import rewrite_hooks, switched_hook
from .fake_anthropic import Script, ToolUse
from .host_runs import claude_print
from .hosts_common import guard
from .rlimit_attack import ATTACK, lift_then_read
from .test_claude_code_cli import (  # noqa: F401  (fixtures)
    claude,
    project,
)


def test_attack_a_hook_claude_code_cannot_start_blocks_the_write(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    repo, env = project
    app = repo / "src" / "app.py"
    guard("plan", "start", "Add caching", cwd=repo, env=env)
    rewrite_hooks(repo, command=switched_hook("no-namespaces", "no-walls"))  # onFailure kept
    lift, lifted = lift_then_read(repo)

    steps = [
        ToolUse("toolu_attack", "Bash", {"command": ATTACK, "description": "look around"}),
        ToolUse("toolu_w", "Write", {"file_path": str(app), "content": "owned = True\n"}),
        ToolUse("toolu_r1", "Read", lift),
    ]
    script = Script(steps)
    proc = claude_print(claude, repo, env, script, "--permission-mode", "acceptEdits",
                        "--max-turns", "30")
    results = script.tool_results()
    assert [s.id for s in steps if s.id in results] == [s.id for s in steps], (
        results, proc.stderr[-2000:])
    assert "lowered claude" in results["toolu_attack"], results["toolu_attack"]
    assert lifted, results
    assert app.read_text() == "print('hello')\n", ("the Write landed", results["toolu_w"])
    assert 'blocking because onFailure is "block"' in results["toolu_w"], results["toolu_w"]


def test_attack_a_hung_hook_blocks_the_write(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    repo, env = project
    app = repo / "src" / "app.py"
    rewrite_hooks(repo, command="sleep 60; exit 0", timeout=3)
    steps = [ToolUse("toolu_w", "Write", {"file_path": str(app), "content": "owned = True\n"})]
    script = Script(steps)
    proc = claude_print(claude, repo, env, script, "--permission-mode", "acceptEdits",
                        "--max-turns", "5")
    results = script.tool_results()
    assert "toolu_w" in results, (results, proc.stderr[-2000:])
    assert app.read_text() == "print('hello')\n", ("the Write landed", results["toolu_w"])
    assert 'blocking because onFailure is "block"' in results["toolu_w"], results["toolu_w"]
    # the control: the same hung hook without onFailure lets the Write run
    rewrite_hooks(repo, on_failure=False)
    script = Script(steps)
    claude_print(claude, repo, env, script, "--permission-mode", "acceptEdits",
                 "--max-turns", "5")
    assert app.read_text() == "owned = True\n", script.tool_results()
