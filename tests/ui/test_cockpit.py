"""`guard ui` driven headless: every lane, every key, against real session files and hooks."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from guard.planning import Mode, Session, handshake
from guard.planning.current import describe_current_agent
from guard.ui.app import CockpitApp
from tests.ui.conftest import (
    claude_write,
    cockpit,
    drive,
    hook,
    notified,
    shows,
    type_text,
    until,
)
from tests.ui.screen import screen_text

PLAN = "# Add caching\n\n1. Read the **config** loader\n2. Cache parsed files\n"
QUESTIONS = {
    "questions": [
        {"question": "Which store?", "options": [{"label": "SQLite"}, {"label": "Redis"}]},
        {"question": "Keep the old API?", "options": [{"label": "yes"}, {"label": "no"}]},
    ]
}


def plan_session(repo: Path, *, written: bool = True) -> Session:
    session = Session.start(repo, Mode.PLAN, title="Add caching")
    if written:
        assert session.plan_path
        Path(session.plan_path).write_text(PLAN)
    return session


def test_header_lanes_and_keys_fit_an_80x24_terminal(repo: Path) -> None:
    session = plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        screen = await shows(pilot, app, "Cache parsed files")
        for seen in (
            f"worktree {repo}",
            f"session {session.id} (open)",
            " PLAN ",
            "hooks plan: plan mode of session",
            "Checklist",
            "Pending",
            "Plan",
            "Activity",
            "build -> plan",  # the session's start, in the activity lane
            "a approve",
        ):
            assert seen in screen, (seen, screen)
        assert len(screen.splitlines()) == 24
        assert max(len(line) for line in screen.splitlines()) <= 80

    drive(cockpit(repo), steps)


def test_checklist_lane_follows_update_plan_live(repo: Path) -> None:
    session = Session.start(repo, Mode.BUILD)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "no checklist yet")
        handshake.update_plan(
            session,
            {
                "explanation": "caching first",
                "plan": [
                    {"step": "Write the parser", "status": "completed"},
                    {"step": "Add tests", "status": "in_progress"},
                    {"step": "Update docs", "status": "pending"},
                ],
            },
        )
        screen = await shows(pilot, app, "Update docs")
        assert "[x] Write the parser" in screen
        assert "[>] Add tests" in screen
        assert "[ ] Update docs" in screen
        assert "caching first" in screen
        assert "1/3 done" in screen

    drive(cockpit(repo), steps)


def test_plan_lane_renders_the_file_as_it_is_written(repo: Path) -> None:
    session = plan_session(repo, written=False)
    assert session.plan_path

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "the plan file is not written yet")
        Path(session.plan_path or "").write_text("# Add caching\n\n1. first **step**\n")
        screen = await shows(pilot, app, "first step")  # markdown rendered: no ** left
        assert Path(session.plan_path or "").name[:30] in screen
        with open(session.plan_path or "", "a") as f:
            f.write("2. second step\n")
        await shows(pilot, app, "second step")

    drive(cockpit(repo), steps)


def test_a_refused_write_shows_in_activity_with_reason_and_rule(repo: Path) -> None:
    plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "build -> plan")
        # the attack: the model writes source code in plan mode, through the real hook
        assert hook(repo, claude_write(repo, "src/app.py")) == "deny"
        screen = await shows(pilot, app, "deny")
        assert "Write" in screen
        assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
        table = app.query_one("#activity")
        await until(pilot, lambda: "reason" in screen_text(app), "the detail of the line")
        assert table is not None
        detail = screen_text(app).split("╰", 3)[-1]
        assert "DENY" in detail and "rule" in detail and "reason" in detail

    drive(cockpit(repo), steps)


def test_activity_filters_by_decision_and_host(repo: Path) -> None:
    plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        hook(repo, claude_write(repo, "src/app.py"))
        await shows(pilot, app, "deny")
        await pilot.press("d")  # deny first: the refusals are what a user looks for
        await until(pilot, lambda: "decision: deny" in screen_text(app), "the deny filter")
        assert "last 1 ·" in screen_text(app)
        await pilot.press("d", "d")  # ask, allow
        await until(pilot, lambda: "decision: allow" in screen_text(app), "the allow filter")
        assert " deny " not in screen_text(app).split("Activity", 1)[1]
        await pilot.press("d", "d", "d", "d", "d")  # confined, violation, plan, all, deny
        await until(pilot, lambda: "decision: deny" in screen_text(app), "the deny filter")
        await pilot.press("h")
        await until(pilot, lambda: "host: claude-code" in screen_text(app), "the host filter")
        assert "last 1 ·" in screen_text(app)

    drive(cockpit(repo), steps)


def test_approve_key_switches_the_hooks_to_build_and_the_write_lands(repo: Path) -> None:
    session = plan_session(repo)
    assert hook(repo, claude_write(repo, "src/app.py")) == "deny"

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, " PLAN ")
        await pilot.press("a")
        await shows(pilot, app, "Approve plan")  # asks first: title, lines, digest
        assert "lines, digest " in screen_text(app)
        await pilot.press("y")
        await shows(pilot, app, " BUILD ")

    drive(cockpit(repo), steps)
    assert Session.load(session.id, repo).mode is Mode.BUILD
    assert describe_current_agent(repo, env={}).mode is Mode.BUILD
    assert hook(repo, claude_write(repo, "src/app.py")) == "allow"
    last = Session.load(session.id, repo).decisions[-1]
    assert (last.decision, last.by) == ("approve", "user")


def test_approve_is_not_offered_without_a_plan_file_and_plan_mode_holds(repo: Path) -> None:
    session = plan_session(repo, written=False)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, " PLAN ")
        await shows(pilot, app, "not written yet")
        assert app.check_action("approve", ()) is False  # not in the footer, not run
        await pilot.press("a")
        await pilot.pause(0.3)
        assert len(app.screen_stack) == 1  # no question: nothing to approve

    drive(cockpit(repo), steps)
    assert Session.load(session.id, repo).mode is Mode.PLAN


def _answer_in_ui(repo: Path, key: str, words: str) -> Session:
    session = plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, " PLAN ")
        await pilot.press(key)
        await until(pilot, lambda: len(app.screen_stack) > 1, "the prompt")
        await type_text(pilot, words)
        await pilot.press("enter")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the prompt to close")

    drive(cockpit(repo), steps)
    return Session.load(session.id, repo)


def _answer_in_cli(repo: Path, option: str, words: str) -> Session:
    from guard.cli import main

    session = plan_session(repo)
    try:
        main(["plan", "exit", option, words, "--session", session.id, "--cwd", str(repo)])
    except SystemExit as exc:
        assert exc.code == 0
    return Session.load(session.id, repo)


def test_reject_and_refine_keys_record_what_the_cli_records(repo: Path) -> None:
    for key, option, words, choice in (
        ("r", "--reject", "too risky", "reject"),
        ("f", "--refine", "split step two", "refine"),
    ):
        ui = _answer_in_ui(repo, key, words)
        cli = _answer_in_cli(repo, option, words)
        for s in (ui, cli):
            assert s.mode is Mode.PLAN
            assert s.decisions[-1].decision == choice
            assert words in s.decisions[-1].text
        assert [m.replace(ui.plan_path or "", "P") for m in ui.inbox] == [
            m.replace(cli.plan_path or "", "P") for m in cli.inbox
        ]
        for s in (ui, cli):
            s.end("test")


def test_reject_needs_a_reason(repo: Path) -> None:
    session = plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, " PLAN ")
        await pilot.press("r")
        await until(pilot, lambda: len(app.screen_stack) > 1, "the prompt")
        await pilot.press("enter")
        await notified(pilot, app, "needs a reason")

    drive(cockpit(repo), steps)
    assert Session.load(session.id, repo).decisions == []


def test_escape_cancels_a_prompt_without_answering(repo: Path) -> None:
    session = plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, " PLAN ")
        await pilot.press("f")
        await until(pilot, lambda: len(app.screen_stack) > 1, "the prompt")
        await type_text(pilot, "never sent")
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the prompt to close")

    drive(cockpit(repo), steps)
    assert Session.load(session.id, repo).decisions == []


def test_questions_are_answered_in_place(repo: Path) -> None:
    session = plan_session(repo)
    handshake.request_user_input(session, QUESTIONS)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        screen = await shows(pilot, app, "Which store?")
        assert "i answer" in screen
        await pilot.press("i")
        await until(pilot, lambda: len(app.screen_stack) > 1, "the questions")
        await type_text(pilot, "SQLite")
        await pilot.press("enter")
        await type_text(pilot, "yes")
        await pilot.press("enter")
        await shows(pilot, app, "nothing waits for you")

    drive(cockpit(repo), steps)
    s = Session.load(session.id, repo)
    assert not [p for p in s.pending if p.kind == "request_user_input"]
    assert s.inbox[-1] == (
        "Answers from the user:\nQ: Which store?\nA: SQLite\nQ: Keep the old API?\nA: yes"
    )


def test_start_plan_mode_with_a_title_then_end_the_session(repo: Path) -> None:
    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, "none open")
        await pilot.press("p")
        await until(pilot, lambda: len(app.screen_stack) > 1, "the title prompt")
        await type_text(pilot, "Add caching")
        await pilot.press("enter")
        await shows(pilot, app, " PLAN ")
        await shows(pilot, app, "Add caching")
        assert describe_current_agent(repo, env={}).mode is Mode.PLAN
        await pilot.press("e")
        await until(pilot, lambda: len(app.screen_stack) > 1, "the confirmation")
        await pilot.press("y")
        await shows(pilot, app, "none open")

    drive(cockpit(repo), steps)
    (only,) = Session.list_all(repo)
    assert only.title == "Add caching"
    assert only.status == "ended"
    assert describe_current_agent(repo, env={}).session is None


def test_switch_shows_another_session_of_the_worktree(repo: Path) -> None:
    older = Session.start(repo, Mode.BUILD, title="older work")
    newer = plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, newer.id)
        await pilot.press("s")
        await until(pilot, lambda: len(app.screen_stack) > 1, "the session list")
        await shows(pilot, app, "older work")
        await pilot.press("end", "enter")  # follow, newer, older: the last
        await shows(pilot, app, f"session {older.id}")
        assert " BUILD " in screen_text(app)

    drive(cockpit(repo), steps)


def test_help_lists_every_key_and_closes(repo: Path) -> None:
    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await pilot.press("question_mark")
        screen = await shows(pilot, app, "the plan-mode cockpit")
        for key in ("a   approve", "r   reject", "f   ask for a refinement", "i   answer",
                    "p   start plan mode", "e   end the session", "s   switch",
                    "d   filter by decision", "h   filter by host"):  # fmt: skip
            assert key in screen, key
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1, "help to close")

    drive(cockpit(repo), steps)


def test_a_corrupt_session_file_is_shown_not_a_crash(repo: Path) -> None:
    session = plan_session(repo)

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        await shows(pilot, app, " PLAN ")
        session.path.write_text("{not json")
        await shows(pilot, app, "problem:")
        await pilot.press("a")  # refused with the reason, the app goes on
        await pilot.pause(0.2)
        assert app.is_running

    drive(cockpit(repo), steps)
