"""Drive the real cockpit (Textual's headless pilot) over real guard state in a git worktree."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from guard.ui.app import CockpitApp
from guard.ui.state import Cockpit, HostLine
from tests.ui.screen import screen_text

#: Generous: CI is a busy 2-core box. A condition is polled, never slept for.
DEADLINE = 60.0

Steps = Callable[[Pilot[None], CockpitApp], Awaitable[None]]


def no_hosts(_cwd: str) -> list[HostLine]:
    return []


def cockpit(repo: Path, session_id: str | None = None) -> Cockpit:
    return Cockpit(repo, session_id, hosts=no_hosts)


def drive(source: Cockpit, steps: Steps, size: tuple[int, int] = (80, 24)) -> CockpitApp:
    """Run the app headless at ``size``, run ``steps`` against it, close it."""
    app = CockpitApp(source)

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await steps(pilot, app)

    asyncio.run(main())
    return app


async def until(pilot: Pilot[None], check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` (the app keeps running) until it holds; fail naming ``what``."""
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def shows(pilot: Pilot[None], app: CockpitApp, text: str) -> str:
    """Wait until the screen shows ``text``; returns the screen."""
    await until(pilot, lambda: text in screen_text(app), f"{text!r} on screen")
    return screen_text(app)


async def notified(pilot: Pilot[None], app: CockpitApp, text: str) -> str:
    """Wait for a notification containing ``text`` (wrapped on screen, whole here)."""

    def said() -> list[str]:
        return [n.message for n in app._notifications if text in n.message]

    await until(pilot, lambda: bool(said()), f"a notification saying {text!r}")
    return said()[-1]


async def type_text(pilot: Pilot[None], text: str) -> None:
    await pilot.press(*["space" if c == " " else c for c in text])


def claude_write(repo: Path, path: str) -> dict[str, Any]:
    """A PreToolUse payload for a Write, in the shape Claude Code 2.1.332 sends."""
    return {
        "session_id": "0b7c6f2e-0000-4000-8000-000000000001",
        "transcript_path": str(repo / "transcript.jsonl"),
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(repo / path), "content": "x = 1\n"},
        "tool_use_id": "toolu_01ABC",
    }


def hook(repo: Path, payload: dict[str, Any]) -> str:
    """The real hook pipeline (the same as the hook process); the host's decision word."""
    from guard.hooks.front_door import decide

    answer = decide("claude-code", json.dumps(payload), env={}, cwd=str(repo))
    if answer.exit_code:
        return "block"
    out: dict[str, Any] = json.loads(answer.stdout)
    return str(out["hookSpecificOutput"]["permissionDecision"])
