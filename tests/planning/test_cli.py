from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from guard.cli import app
from guard.effects import GuardError
from guard.planning import Mode, Session, event_bus, publish, read_events, update_plan

from .conftest import write_plan_file

runner = CliRunner()


def guard(*args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; a GuardError maps to what the entry point prints (exit 2)."""
    result = runner.invoke(app, list(args))
    if isinstance(result.exception, GuardError):
        return 2, result.stdout, f"guard: error: {result.exception}\n"
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def guard_proc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_session_start_list_show(repo: Path) -> None:
    code, out, _ = guard("session", "start", "--cwd", str(repo))
    assert code == 0
    sid = out.strip()
    assert Session.load(sid, repo).mode is Mode.BUILD
    code, out, _ = guard("session", "list", "--cwd", str(repo), "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)["sessions"]] == [sid]
    update_plan(
        Session.load(sid, repo),
        {
            "plan": [
                {"step": "Parse input", "status": "completed"},
                {"step": "Write output", "status": "in_progress"},
                {"step": "Document", "status": "pending"},
            ]
        },
    )
    code, out, _ = guard("session", "show", sid, "--cwd", str(repo))
    assert code == 0
    assert "✓ Parse input" in out and "→ Write output" in out and "• Document" in out
    assert "Checklist" in out and "Plan document" in out


def test_session_show_renders_both_lanes_distinctly(repo: Path) -> None:
    s = Session.start(repo, "plan", title="Two lanes")
    write_plan_file(s, "# The Plan Title\n\n- first\n")
    code, out, _ = guard("session", "show", "--cwd", str(repo))
    assert code == 0
    assert "The Plan Title" in out and "# The Plan Title" not in out, "markdown is rendered"
    assert out.index("Checklist") < out.index("Plan document")
    code, out, _ = guard("session", "show", "--cwd", str(repo), "--json")
    data = json.loads(out)
    assert data["mode"] == "plan" and data["plan"].startswith("# The Plan Title")


def test_mode_prints_and_enters_plan(repo: Path, session: Session) -> None:
    code, out, _ = guard("mode", "--session", session.id, "--cwd", str(repo))
    assert (code, out) == (0, "build\n")
    code, out, _ = guard("mode", "plan", "-s", session.id, "--title", "Do X", "--cwd", str(repo))
    assert code == 0 and "do-x.md" in out
    assert session.refresh().mode is Mode.PLAN


def test_mode_build_is_refused_in_plan_mode(repo: Path, plan_session: Session) -> None:
    """Attack: leaving plan mode by the back door (`guard mode build`) instead of an approval."""
    proc = guard_proc("mode", "build", "--session", plan_session.id, cwd=repo)
    assert proc.returncode == 2
    assert "guard plan exit --approve" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, "one line"
    assert plan_session.refresh().mode is Mode.PLAN


def test_plan_path_show_list(repo: Path, plan_session: Session) -> None:
    code, out, _ = guard("plan", "path", "--cwd", str(repo))
    assert code == 0 and out.strip() == plan_session.plan_path
    code, _, err = guard("plan", "show", "--cwd", str(repo))
    assert code == 2 and "does not exist yet" in err
    write_plan_file(plan_session, "# Plan\n\nbody\n")
    code, out, _ = guard("plan", "show", "--raw", "--cwd", str(repo))
    assert (code, out) == (0, "# Plan\n\nbody\n")
    code, out, _ = guard("plan", "list", "--cwd", str(repo), "--json")
    rows = json.loads(out)["plans"]
    assert [(r["session"], r["path"]) for r in rows] == [(plan_session.id, plan_session.plan_path)]


def test_plan_path_without_plan_mode_is_a_clear_error(repo: Path, session: Session) -> None:
    proc = guard_proc("plan", "path", cwd=repo)
    assert proc.returncode == 2 and "guard mode plan" in proc.stderr


def test_plan_exit_cli_refuses_empty_plan_then_approves(repo: Path, plan_session: Session) -> None:
    proc = guard_proc("plan", "exit", "--approve", cwd=repo)
    assert proc.returncode == 2 and "refused" in proc.stderr
    assert plan_session.refresh().mode is Mode.PLAN
    write_plan_file(plan_session)
    proc = guard_proc("plan", "exit", "--approve", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert plan_session.refresh().mode is Mode.BUILD
    assert "approved" in plan_session.inbox[-1], "the model is told on its next tool call"


def test_plan_exit_cli_reject_and_refine_keep_plan_mode(repo: Path, plan_session: Session) -> None:
    write_plan_file(plan_session)
    code, out, _ = guard("plan", "exit", "--reject", "too broad", "--cwd", str(repo))
    assert code == 0 and "plan" in out
    code, out, _ = guard("plan", "exit", "--refine", "add rollback", "--cwd", str(repo))
    assert code == 0
    s = plan_session.refresh()
    assert s.mode is Mode.PLAN
    assert [d.decision for d in s.decisions] == ["reject", "refine"]
    assert "too broad" in s.inbox[0] and "add rollback" in s.inbox[1]


def test_plan_exit_cli_needs_exactly_one_choice(repo: Path, plan_session: Session) -> None:
    for args in ([], ["--approve", "--reject", "x"], ["--reject", "  "], ["--refine", ""]):
        code, _, err = guard("plan", "exit", *args, "--cwd", str(repo))
        assert code == 2, (args, err)
    assert plan_session.refresh().mode is Mode.PLAN
    assert plan_session.decisions == []


def test_no_session_is_a_clear_error(repo: Path) -> None:
    proc = guard_proc("session", "show", cwd=repo)
    assert proc.returncode == 2 and "guard plan start TITLE" in proc.stderr
    proc = guard_proc("mode", "plan", "--session", "../x", cwd=repo)
    assert proc.returncode == 2 and "invalid session id" in proc.stderr


def test_events_lists_and_follows_across_processes(repo: Path, session: Session) -> None:
    publish(session, event_bus.Violation(path="/etc/x", kind="write", source="monitor"))
    code, out, _ = guard("events", "--json", "--cwd", str(repo))
    assert code == 0 and json.loads(out)["type"] == "violation"
    code, out, _ = guard("events", "--cwd", str(repo))
    assert "VIOLATION" in out
    follower = subprocess.Popen(
        [sys.executable, "-m", "guard", "events", "--follow", "--json", "--session", session.id],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert follower.stdout is not None
        assert json.loads(follower.stdout.readline())["type"] == "violation"
        # another process publishes while the follower runs
        subprocess.run(
            [sys.executable, "-m", "guard", "mode", "plan", "--session", session.id],
            cwd=repo,
            check=True,
            capture_output=True,
        )
        line = follower.stdout.readline()
        assert json.loads(line)["type"] == "mode_changed"
    finally:
        follower.terminate()
        follower.wait(timeout=30)
    assert [e.type for e in read_events(session)] == ["violation", "mode_changed"]


def test_help_teaches_with_examples() -> None:
    for cmd in (
        ["session", "--help"],
        ["plan", "--help"],
        ["plan", "exit", "--help"],
        ["mode", "--help"],
        ["events", "--help"],
    ):
        code, out, _ = guard(*cmd)
        assert code == 0 and "guard " in out, cmd


def test_example_runs_and_shows_both_lanes(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "planning_loop.py"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "update_plan is a TODO/checklist tool and is not allowed in Plan mode" in out
    assert "plan_exit refused" in out and "refine the plan" in out and "approved" in out
    assert "Checklist" in out and "Plan document" in out
    assert "✓ Test edge cases" in out
    assert "item.completed" in out
    assert list(tmp_path.iterdir()) == [], "the example cleans up after itself"
    del start


def test_plan_answer_delivers_answers_to_the_model(repo: Path, plan_session: Session) -> None:
    from guard.planning import handle_tool_call

    q = {"question": "Which store?", "options": [{"label": "SQLite"}, {"label": "Redis"}]}
    r = handle_tool_call(plan_session, "request_user_input", {"questions": [q]})
    assert not r.is_error and "End your turn" in r.text
    code, _, err = guard("plan", "answer", "a", "b", "--cwd", str(repo))
    assert code == 2 and "1 question(s)" in err and "Which store?" in err
    code, out, _ = guard("plan", "answer", "SQLite", "--cwd", str(repo))
    assert code == 0, out
    assert plan_session.refresh().pending == []
    nxt = handle_tool_call(plan_session, "plan_exit", {})
    assert "Q: Which store?\nA: SQLite" in nxt.text
    code, _, err = guard("plan", "answer", "again", "--cwd", str(repo))
    assert code == 2 and "no pending questions" in err


def test_guard_mode_plan_accepts_a_pending_plan_enter(repo: Path, session: Session) -> None:
    from guard.planning import handle_tool_call

    r = handle_tool_call(session, "plan_enter", {"title": "Later"})
    assert "waits for the user" in r.text and session.refresh().mode is Mode.BUILD
    code, _, _ = guard("mode", "plan", "--session", session.id, "--cwd", str(repo))
    assert code == 0
    s = session.refresh()
    assert s.mode is Mode.PLAN and s.pending == [] and s.plan_path
    assert s.plan_path.endswith("-later.md")
    assert "accepted plan mode" in s.inbox[-1]
