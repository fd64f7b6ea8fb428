"""SVG snapshots of the cockpit's main screens at 80x24 and 180x45, and NO_COLOR.

The state is fixed here (a View built by hand) so that the pictures do not change with
paths, ids or clocks; tests/ui/test_cockpit.py drives the same app over real state.
Update after a deliberate change: pytest tests/ui/test_snapshots.py --snapshot-update
(the README's screenshot is tests/ui/__snapshots__/test_snapshots/test_plan_waits_for_approval.svg).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import deque
from typing import Any

import pytest

from guard.planning.checklist import PlanItem, StepStatus
from guard.ui.app import CockpitApp
from guard.ui.state import Activity, HostLine, Pending, View

PLAN = """\
# Add caching to the config loader

## Steps
1. Read how `load_config` parses files
2. Cache parsed files by path and mtime
3. Invalidate on write; test both paths

## Risks
- stale reads after an editor's atomic rename
"""


class FixedSource:
    """A Source whose state never changes; actions say what they would do."""

    streamed_plan = ""

    def __init__(self, view: View) -> None:
        self.view = view
        self.calls: list[tuple[str, Any]] = []

    def refresh(self) -> bool:
        return False

    def watched(self) -> set[str]:
        return set()

    def hosts(self) -> list[HostLine]:
        return self.view.hosts or []

    def _said(self, name: str, *args: Any) -> str:
        self.calls.append((name, args))
        return f"{name} {args}"

    def answer_exit(self, choice: str, text: str = "", digest: str | None = None) -> str:
        return self._said("answer_exit", choice, text, digest)

    def answer_questions(self, answers: list[str]) -> str:
        return self._said("answer_questions", answers)

    def accept_plan_mode(self) -> str:
        return self._said("accept_plan_mode")

    def start_plan(self, title: str) -> str:
        return self._said("start_plan", title)

    def end_session(self) -> str:
        return self._said("end_session")

    def switch(self, session_id: str | None) -> str:
        return self._said("switch", session_id)


def planning_view() -> View:
    at = "2026-12-05T09:12:0{}.000000Z"
    activity: deque[Activity] = deque(maxlen=100)
    for n, (action, tool, what, reason) in enumerate(
        [
            ("allow", "Read", "Read src/config.py", "read allowed for the plan agent"),
            ("allow_confined", "Bash", "Bash rg load_config", "shell runs confined"),
            ("deny", "Write", "Write src/config.py", "plan mode: only the plan file"),
            ("allow", "Write", "Write .openoxide/plans/add-caching.md", "the plan file"),
        ]
    ):
        activity.append(
            Activity(
                at=at.format(n), kind="decision", action=action, host="claude-code",
                tool=tool, summary=what, reason=reason, rule="agents.plan.write.deny:1 **",
                agent="plan", source="hook", effects=(f"write {what.split()[-1]}",),
            )
        )  # fmt: skip
    return View(
        worktree="/home/dev/src/shop",
        session_id="20261205-5e551011",
        session_status="open",
        title="Add caching",
        mode="plan",
        agent="plan",
        agent_why="plan mode of session 20261205-5e551011 (the newest open session)",
        hosts=[HostLine("claude-code", "ok", True), HostLine("codex", "ok", False)],
        checklist=[
            PlanItem(step="Read the config loader", status=StepStatus.COMPLETED),
            PlanItem(step="Write the plan", status=StepStatus.IN_PROGRESS),
            PlanItem(step="Ask about invalidation", status=StepStatus.PENDING),
        ],
        checklist_from="claude-code TodoWrite",
        plan_path="/home/dev/src/shop/.openoxide/plans/20261205T091200Z-add-caching.md",
        plan_text=PLAN,
        plan_digest=hashlib.sha256(PLAN.encode()).hexdigest(),
        plan_lines=PLAN.count("\n"),
        activity=activity,
        appended=len(activity),
        pending=[
            Pending(
                "plan_exit",
                "2026-12-05T09:12:09.000000Z",
                "plan exit (claude-code ExitPlanMode)",
            )
        ],
    )


def app_for(view: View) -> CockpitApp:
    return CockpitApp(FixedSource(view), check_hosts=False)  # type: ignore[arg-type]


def test_plan_waits_for_approval(snap_compare: Any) -> None:
    assert snap_compare(app_for(planning_view()), terminal_size=(80, 24))


def test_plan_waits_for_approval_wide(snap_compare: Any) -> None:
    """At 180x45 the activity lane gets a third of the screen, the plan lane the rest."""
    assert snap_compare(app_for(planning_view()), terminal_size=(180, 45))


def test_approve_asks_with_title_lines_and_digest(snap_compare: Any) -> None:
    assert snap_compare(app_for(planning_view()), press=["a"], terminal_size=(80, 24))


def test_help_screen(snap_compare: Any) -> None:
    assert snap_compare(app_for(planning_view()), press=["question_mark"], terminal_size=(80, 24))


def test_questions_dialog(snap_compare: Any) -> None:
    view = planning_view()
    asked = ("Which store?", "Keep the old API?")
    view.pending = [
        Pending("request_user_input", "2026-12-05T09:12:09.000000Z", "2 questions", asked)
    ]
    assert snap_compare(app_for(view), press=["i", *"SQLite"], terminal_size=(80, 24))


def test_empty_worktree(snap_compare: Any) -> None:
    assert snap_compare(app_for(View(worktree="/home/dev/src/shop", hosts=[])))


def test_no_color_draws_in_greys_only(
    snap_compare: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_for(planning_view())
    assert app.no_color
    assert snap_compare(app, terminal_size=(80, 24))
    with_colour = screenshot(False, monkeypatch)
    without = screenshot(True, monkeypatch)
    assert tinted(with_colour), "the colour screen should have colours to take away"
    assert tinted(without) == [], f"colours under NO_COLOR: {tinted(without)[:5]}"


#: The SVG frame rich draws around every screenshot (title, window buttons): not the app.
FRAME = {"c5c8c6", "ff5f57", "febc2e", "28c840"}


def tinted(svg: str) -> list[str]:
    colours = {c.lower() for c in re.findall(r"#([0-9a-fA-F]{6})\b", svg)} - FRAME
    return sorted(c for c in colours if len({c[0:2], c[2:4], c[4:6]}) > 1)


def screenshot(no_color: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    svg: list[str] = []

    async def main() -> None:
        app = app_for(planning_view())
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            svg.append(app.export_screenshot())

    asyncio.run(main())
    return svg[0]
