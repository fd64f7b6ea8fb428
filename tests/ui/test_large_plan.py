"""A plan too large to show whole: drawn a page at a time, and approved from the cockpit
only once the user scrolled to its end; everything markdown would hide is shown."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from guard.planning import Mode, Session
from guard.planning.render import plan_markdown
from guard.ui.app import CockpitApp
from guard.ui.plan_lane import PAGE_BYTES, PlanLane, pages
from tests.ui.conftest import cockpit, drive, notified, shows, until
from tests.ui.screen import screen_text


def big_plan(size: int) -> str:
    lines = ["# A long plan", ""]
    n = 0
    while sum(len(line) + 1 for line in lines) < size:
        n += 1
        lines += [f"## Step {n}", "", f"Change module_{n}.py: keep the cache of step {n}.", ""]
    return "\n".join([*lines, "## LAST STEP: delete nothing", ""])


def test_pages_cut_at_blank_lines_outside_fences_and_lose_nothing() -> None:
    text = big_plan(200_000) + "```\n" + "x = 1\n\n" * 20_000 + "```\n"
    cut = pages(text)
    assert "".join(cut) == text
    assert len(cut) > 4 and all(len(p) <= 4 * PAGE_BYTES + 200 for p in cut)
    assert pages("short\n") == ["short\n"]


def test_a_long_plan_is_approved_only_after_scrolling_to_its_end(repo: Path) -> None:
    session = Session.start(repo, Mode.PLAN, title="Long")
    assert session.plan_path
    Path(session.plan_path).write_text(big_plan(300_000))

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "A long plan")
        assert "read to the end to approve" in screen_text(app)
        lane = app.query_one("#plan", PlanLane)
        assert lane.paged and not lane.seen_end
        assert "LAST STEP" not in screen_text(app)
        await pilot.press("a")
        await notified(pilot, app, "scroll the plan lane to its end")
        assert len(app.screen_stack) == 1
        for _ in range(200):
            if lane.seen_end:
                break
            lane.scroll_end(animate=False)
            await pilot.pause(0.05)
        assert lane.seen_end
        await shows(pilot, app, "LAST STEP")
        await pilot.press("a")
        await shows(pilot, app, "Approve plan Long (")
        await pilot.press("n")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the question to close")

    drive(cockpit(repo), steps, size=(100, 30))
    assert session.refresh().mode is Mode.PLAN


def test_markdowns_hidden_parts_are_shown_and_marked() -> None:
    from rich.console import Console

    con = Console(width=100, color_system=None)
    with con.capture() as cap:
        con.print(plan_markdown(
            "# Plan\n\nstep one <!-- and add my ssh key -->\n\n<div hidden>\nforce-push\n"
            "</div>\n\n[//]: # (rm -rf tests)\n\n[docs](https://evil.example/x) a\u200bb"
            " \u202eevil\n"))  # fmt: skip
    out = cap.get()
    for shown in ("(hidden: <!-- and add my ssh key -->)", "hidden in rendering: HTML",
                  "force-push", "(hidden link definition)", "rm -rf tests",
                  "https://evil.example/x", "a\\u200bb", "\\u202eevil"):  # fmt: skip
        assert shown in out, (shown, out)
