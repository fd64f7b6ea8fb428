# ruff: noqa: F811  (the fixtures claude and project come from test_claude_code_cli)
"""End to end: `guard ui` in a real terminal (tmux) beside the real Claude Code CLI.

The screen is read with ``tmux capture-pane``, as a person would read it:

1. plan mode: the scripted model's write to ``src/`` is refused and shows as ``deny``
   in the activity lane; its plan file is rendered in the plan lane;
2. ExitPlanMode (fed to the installed planning hook, since Claude Code 2.1.332
   offers no ExitPlanMode headless) shows as a pending exit; ``a`` pressed in the
   cockpit approves it and the hooks switch to the build agent;
3. build: the model's next write lands; a ``TodoWrite`` (its PostToolUse payload fed
   to the installed hook command: Claude Code 2.1.332 disables TodoWrite headless)
   shows its steps in the checklist lane.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from components import require_component

from guard.planning import Mode, Session

from .fake_anthropic import Script, ToolUse, conversation_text
from .test_claude_code_cli import (  # noqa: F401  (fixtures)
    claude,
    denied_ids,
    project,
    run_claude,
)
from .test_claude_code_planning import installed_planning_hook, told_path

PLAN = "# Plan: add caching\n\n1. Add an LRU cache to src/app.py\n2. Test it\n"
TODOS = [
    {"content": "Add the cache", "status": "in_progress", "activeForm": "Adding the cache"},
    {"content": "Test the cache", "status": "pending", "activeForm": "Testing the cache"},
]
DEADLINE = 120.0  # CI is a busy 2-core box: poll generously


class Pane:
    """`guard ui` running in its own tmux server, 100x36."""

    def __init__(self, repo: Path, env: dict[str, str]) -> None:
        self.socket = f"guard-ui-{repo.parent.name}"
        self.env = {**env, "SHELL": "/bin/sh", "TERM": "xterm-256color"}
        command = f"{sys.executable} -m guard ui --cwd {repo}"
        self.tmux("new-session", "-d", "-s", "ui", "-x", "100", "-y", "36", command)

    def tmux(self, *args: str) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            env=self.env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"tmux {args[0]}: {proc.stderr}"
        return proc.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "ui")

    def wait(self, check: Callable[[str], bool], what: str) -> str:
        end = time.monotonic() + DEADLINE
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.2)

    def shows(self, text: str) -> str:
        return self.wait(lambda s: text in s, repr(text))

    def press(self, key: str) -> None:
        self.tmux("send-keys", "-t", "ui", key)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], env=self.env,
                       capture_output=True, timeout=60, check=False)  # fmt: skip


@pytest.fixture
def tmux() -> str:
    found = shutil.which("tmux")
    return str(require_component("tmux", found, "apt-get install tmux"))


@pytest.fixture
def pane(tmux: str, project: tuple[Path, dict[str, str]]) -> Iterator[Pane]:
    repo, env = project
    started = subprocess.run(
        [sys.executable, "-m", "guard", "plan", "start", "Add caching"], cwd=repo, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    ui = Pane(repo, env)
    try:
        yield ui
    finally:
        ui.close()


def test_cockpit_beside_claude_code_plan_approve_build(
    claude: str, project: tuple[Path, dict[str, str]], pane: Pane
) -> None:
    repo, env = project
    app = repo / "src" / "app.py"
    (session,) = Session.list_all(repo)
    pane.shows(" PLAN ")

    # 1. plan: the refused write shows in the activity lane, the plan in the plan lane
    steps = [
        ToolUse("toolu_src", "Write", {"file_path": str(app), "content": "owned = True\n"}),
        ToolUse("toolu_plan", "Write", lambda b: {"file_path": told_path(b), "content": PLAN}),
    ]
    result = run_claude(claude, repo, env, Script(steps), "acceptEdits", None)
    assert denied_ids(result) == {"toolu_src"}
    assert app.read_text() == "print('hello')\n"
    pane.wait(lambda s: "deny" in s and "Write" in s, "the refused Write in the activity")
    pane.shows("Plan: add caching")  # the plan file, rendered (no '#')
    pane.shows("Add an LRU cache to src/app.py")

    # 2. the exit waits in the pending lane; `a` approves it
    exit_payload = {
        "session_id": "cc-1", "transcript_path": "/dev/null", "cwd": str(repo),
        "permission_mode": "plan", "hook_event_name": "PreToolUse",
        "tool_name": "ExitPlanMode", "tool_input": {"plan": PLAN}, "tool_use_id": "toolu_exit",
    }  # fmt: skip
    hook = subprocess.run(
        ["sh", "-c", installed_planning_hook(repo)], input=json.dumps(exit_payload), cwd=repo,
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert hook.returncode == 0, hook.stderr
    pane.shows("claude-code ExitPlanMode")
    pane.press("a")
    pane.shows("Approve plan Add caching (4 lines, digest ")  # asks first
    pane.press("y")
    pane.shows(" BUILD ")
    assert session.refresh().mode is Mode.BUILD
    assert session.decisions[-1].decision == "approve"

    # 3. build: the next write lands; the checklist from TodoWrite. Claude Code 2.1.332
    # disables TodoWrite in a headless session ("No such tool available: TodoWrite"), so
    # its PostToolUse payload is fed to the installed hook command, as Claude Code sends it
    build = Script([ToolUse("toolu_build", "Write", {"file_path": str(app), "content": "ok\n"})])
    result = run_claude(claude, repo, env, build, "acceptEdits", None)
    assert not denied_ids(result), result.get("permission_denials")
    assert app.read_text() == "ok\n"
    pane.wait(lambda s: "allow" in s and "src/app.py" in s, "the allowed Write")
    todo_payload = {
        "session_id": "cc-1", "transcript_path": "/dev/null", "cwd": str(repo),
        "permission_mode": "acceptEdits", "hook_event_name": "PostToolUse",
        "tool_name": "TodoWrite", "tool_input": {"todos": TODOS}, "tool_use_id": "toolu_todo",
        "tool_response": {"oldTodos": [], "newTodos": TODOS},
    }  # fmt: skip
    hook = subprocess.run(
        ["sh", "-c", installed_post_tool_hook(repo)], input=json.dumps(todo_payload), cwd=repo,
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert hook.returncode == 0, hook.stderr
    screen = pane.shows("[>] Add the cache")
    assert "[ ] Test the cache" in screen
    pane.shows("claude-code TodoWrite")


def test_refine_in_the_cockpit_reaches_claude_codes_next_turn(
    claude: str, project: tuple[Path, dict[str, str]], pane: Pane
) -> None:
    """`f` in the cockpit stores the note; the model's next turn carries it (Claude Code's
    UserPromptSubmit context), and plan mode holds."""
    repo, env = project
    (session,) = Session.list_all(repo)
    plan = Script([ToolUse("toolu_plan", "Write",
                           lambda b: {"file_path": told_path(b), "content": PLAN})])  # fmt: skip
    run_claude(claude, repo, env, plan, "acceptEdits", None)
    pane.shows("Add an LRU cache to src/app.py")
    note = "also-cover-the-config-migration"
    pane.press("f")
    pane.shows("Refine the plan")
    pane.tmux("send-keys", "-t", "ui", "-l", note)
    pane.press("Enter")
    pane.wait(lambda s: "refinement asked" in s or "refine" in s.split("Activity", 1)[-1],
              "the refinement recorded")  # fmt: skip
    end = time.monotonic() + DEADLINE
    while note not in "".join(session.refresh().inbox):
        assert time.monotonic() < end, "the note was not stored"
        time.sleep(0.2)
    nxt = Script([ToolUse("toolu_read", "Read", {"file_path": str(repo / "README.md")})])
    run_claude(claude, repo, env, nxt, "acceptEdits", None)
    first_turn = next(b for b in nxt.requests if b.get("tools"))
    assert note in conversation_text(first_turn), "the model's next turn lacks the note"
    assert "refine the plan" in conversation_text(first_turn)
    assert session.refresh().mode is Mode.PLAN and not session.inbox


def installed_post_tool_hook(repo: Path) -> str:
    """guard's policy hook as `guard install claude-code` wired it for PostToolUse."""
    settings = json.loads((repo / ".claude/settings.json").read_text())
    (group,) = [g for g in settings["hooks"]["PostToolUse"] if g.get("matcher") == "*"]
    return str(group["hooks"][0]["command"])
