"""The cockpit as the live view: activity gets a third of the screen, paths relative to the
worktree with the file name kept, keys always on screen, host plan-mode refusals shown
with no guard session, the model's options listed and picked by number."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from guard.planning import Mode, Session
from guard.planning.handshake import request_user_input
from guard.ui.app import CockpitApp
from tests.ui.conftest import claude_write, cockpit, drive, hook, shows, type_text, until


@pytest.mark.parametrize("size", [(80, 24), (180, 45)])
def test_activity_gets_a_third_and_the_keys_stay_on_screen(
    repo: Path, size: tuple[int, int]
) -> None:
    Session.start(repo, Mode.PLAN, title="Live")

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        screen = await shows(pilot, app, " PLAN ")
        assert app.query_one("#activity").outer_size.height * 3 >= size[1]
        last = screen.rstrip("\n").split("\n")[-2:]
        assert "? help" in last[1] and "q quit" in last[1], last
        assert "r reject" in last[0] and "f refine" in last[0], last

    drive(cockpit(repo), steps, size=size)


def test_a_host_plan_mode_refusal_shows_with_no_guard_session(repo: Path) -> None:
    deep = "src/" + "/".join(f"level{n}" for n in range(8)) + "/settings_loader.py"

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "none open")
        payload = claude_write(repo, deep)
        payload["permission_mode"] = "plan"  # Claude Code's own plan mode, no guard session
        assert hook(repo, payload) == "deny"
        screen = await shows(pilot, app, "settings_loader.py")  # the file name is kept
        row = next(line for line in screen.splitlines() if "settings_loader.py" in line)
        assert "deny" in row and str(repo) not in row  # relative to the worktree

    drive(cockpit(repo), steps)


def test_the_answer_dialog_lists_the_options_and_picks_by_number(repo: Path) -> None:
    session = Session.start(repo, Mode.PLAN, title="Ask")
    request_user_input(session, {"questions": [{"question": "Which store?", "options": [
        {"label": "SQLite", "description": "no server"}, {"label": "PostgreSQL"}]}]})  # fmt: skip

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "question(s) from the model")
        await pilot.press("i")
        screen = await shows(pilot, app, "1) SQLite — no server")
        assert "2) PostgreSQL" in screen
        await type_text(pilot, "2")
        await pilot.press("enter")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the dialog to close")

    drive(cockpit(repo), steps)
    assert "Q: Which store?\nA: PostgreSQL" in session.refresh().inbox[-1]
