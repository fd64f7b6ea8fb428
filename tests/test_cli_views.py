"""``guard explain``, ``guard mode``, ``guard plan status`` and ``guard doctor`` answer
without typer (guard/cli/explain_view.py, guard/cli/plan_view.py,
guard/cli/doctor_view.py), with typer's very answers.

Timings are never asserted here (benchmarks/cli.py measures them); what is pinned is
what makes them fast (the modules a run loads) and that the typer-free path says exactly
what the typer command says, with and without an open session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.cli import _main, doctor_view, explain_view, plan_view
from guard.planning._vocabulary import Mode

PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('LOADED ' + ' '.join(m for m in"
    " ('typer', 'click', 'rich', 'pydantic', 'guard.planning.session',"
    " 'guard.planning.event_bus') if m in sys.modules) + '\\n'))\n"
    "from guard.cli import main\n"
    "main()\n"
)
POLICY = (
    'version = 1\n[agents.plan]\nmode = "plan"\ndefault = "deny"\n'
    '[agents.plan.write]\ndeny = ["**", "!{plans}/*.md"]\n'
    '[agents.build]\nmode = "build"\ndefault = "allow"\n'
)


def loaded(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run guard with ARGS; (exit code, the heavy modules it imported)."""
    r = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ), check=False)
    line = [x for x in r.stderr.splitlines() if x.startswith("LOADED")]
    assert line, r.stderr
    return r.returncode, line[-1][len("LOADED"):].strip()


@pytest.fixture
def policy(repo: Path) -> Path:
    p = repo / ".openoxide" / "policy.toml"
    p.write_text(POLICY)
    return p


@pytest.mark.parametrize(
    ("args", "code", "allowed"),
    [
        (["mode"], 0, ""),
        (["plan", "status"], 0, ""),
        (["plan", "status", "--json"], 0, ""),
        (["explain", "write", "src/app.py"], 1, "rich"),
    ],
)
def test_views_load_no_typer_and_no_session_model_without_a_session(
    repo: Path, policy: Path, args: list[str], code: int, allowed: str
) -> None:
    loaded(["check", "write", "src/app.py"], repo)  # the validated-policy cache, as in use
    got = loaded(args, repo)
    assert got == (code, allowed), args


@pytest.mark.parametrize("start", [["session", "start"], ["plan", "start", "Add caching"]])
def test_with_a_session_open_mode_loads_no_session_model(
    repo: Path, policy: Path, start: list[str]
) -> None:
    """``guard mode`` reads the session file without pydantic (guard/planning/session_file.py),
    in build mode and in plan mode, with and without --session."""
    subprocess.run([sys.executable, "-m", "guard", *start], cwd=repo,
                   capture_output=True, timeout=120, check=True)
    loaded(["check", "write", "src/app.py"], repo)  # the validated-policy cache, as in use
    sid = next((repo / ".openoxide/sessions").glob("*.json")).stem
    for args in (["mode"], ["mode", "--session", sid]):
        assert loaded(args, repo) == (0, ""), args


def test_with_a_session_the_views_still_load_no_typer(repo: Path, policy: Path) -> None:
    subprocess.run([sys.executable, "-m", "guard", "plan", "start", "Add caching"], cwd=repo,
                   capture_output=True, timeout=120, check=True)
    for args in (["mode"], ["plan", "status"]):
        code, heavy = loaded(args, repo)
        assert code == 0 and "typer" not in heavy and "click" not in heavy, (args, heavy)


VIEW_LINES = [
    ["doctor"],
    ["doctor", "--json"],
    ["explain", "write", "src/app.py"],
    ["explain", "-a", "build", "write", ".openoxide/plans/p.md"],
    ["explain", "--agent=plan", "--cwd", "src", "read", "app.py"],
    ["explain", "--policy", "builtin:default", "delete", "src/app.py"],
    ["explain", "-a", "plann", "write", "x"],  # an error: the same one
    ["explain", "writ", "x"],
    ["explain", "network", "example.com:443"],
    ["explain", "--cwd", "nowhere", "write", "x"],
    ["mode"],
    ["mode", "-C", "src"],
    ["mode", "--cwd", "nowhere"],
    ["mode", "--session", "nosuch"],
    ["plan", "status"],
    ["plan", "status", "--json"],
    ["plan", "status", "-s", "nosuch"],
    ["plan", "status", "--session=nosuch", "--json"],
    ["plan", "status", "--cwd=src"],
]


def _both(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as fast:
        _main.main(args)
    fast_out = capsys.readouterr()
    with pytest.raises(SystemExit) as slow:
        _main.dispatch(list(args), as_json="--json" in args)
    slow_out = capsys.readouterr()
    assert (fast.value.code or 0) == (slow.value.code or 0), args
    assert fast_out.out == slow_out.out, args
    assert fast_out.err == slow_out.err, args
    return fast_out.out


@pytest.mark.parametrize("args", VIEW_LINES, ids=[" ".join(a) for a in VIEW_LINES])
def test_the_view_answers_as_typer_does(
    repo: Path, policy: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Same stdout, stderr and exit code through the typer-free path and through typer."""
    _both(args, capsys)


def test_the_views_answer_as_typer_does_with_sessions_open(
    repo: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run([sys.executable, "-m", "guard", "session", "start", "--id", "b-1"],
                   cwd=repo, capture_output=True, timeout=120, check=True)
    subprocess.run([sys.executable, "-m", "guard", "plan", "start", "Add caching"], cwd=repo,
                   capture_output=True, timeout=120, check=True)
    (repo / ".openoxide/plans").mkdir(exist_ok=True)
    said = {" ".join(args): _both(args, capsys) for args in (
        ["mode"], ["mode", "--session", "b-1"], ["plan", "status"], ["plan", "status", "--json"],
        ["plan", "status", "-s", "b-1"], ["explain", "write", "src/app.py"])}
    assert said["mode"].startswith("plan\n") and said["mode --session b-1"] == "build\n"
    assert "mode      plan" in said["plan status"] and "Add caching" in said["plan status --json"]


@pytest.mark.parametrize("mode", ["build", "plan"])
def test_the_views_answer_as_typer_does_with_one_session_open(
    repo: Path, policy: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    start = ["session", "start", "--mode", mode] if mode == "build" else ["plan", "start", "X"]
    subprocess.run([sys.executable, "-m", "guard", *start], cwd=repo, capture_output=True,
                   timeout=120, check=True)
    said = _both(["mode"], capsys)
    assert said.startswith(f"{mode}\n") and "the hooks use " in said
    for args in (["mode", "-C", "src"], ["plan", "status"], ["plan", "status", "--json"]):
        _both(args, capsys)


def test_plan_status_says_why_a_plan_file_cannot_be_read(
    repo: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan file swapped for a symlink is reported as unreadable, with the reason, the
    same on both paths (not as the length of an error text)."""
    subprocess.run([sys.executable, "-m", "guard", "plan", "start", "Add caching"], cwd=repo,
                   capture_output=True, timeout=120, check=True)
    status = subprocess.run([sys.executable, "-m", "guard", "plan", "status", "--json"],
                            cwd=repo, capture_output=True, text=True, timeout=120, check=True)
    plan = Path(json.loads(status.stdout)["plan_path"])
    plan.symlink_to(repo / "README.md")  # the plan file is not written yet: a link instead
    said = _both(["plan", "status"], capsys)
    [line] = [x for x in said.splitlines() if x.startswith("plan file ")]
    assert line.endswith("(unreadable: the plan file " + str(plan) + " is a symlink; plan files"
                         " must be regular files (remove the link and write the plan there))"), line
    assert '"plan_exists": true' in _both(["plan", "status", "--json"], capsys)


BROKEN = ["{", '{"id": "s-1"}', '"a string"']


@pytest.mark.parametrize("text", BROKEN)
def test_a_broken_session_file_fails_closed_alike_on_both_paths(
    repo: Path, policy: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corrupt session file: one line naming the file, a non-zero exit, no traceback, the
    same through the typer-free path (the plain reader) and typer."""
    subprocess.run([sys.executable, "-m", "guard", "session", "start", "--id", "s-1"],
                   cwd=repo, capture_output=True, timeout=120, check=True)
    path = repo / ".openoxide/sessions/s-1.json"
    path.write_text(text)
    for args in (["mode"], ["mode", "--session", "s-1"], ["plan", "status"]):
        with pytest.raises(SystemExit) as fast:
            _main.main(args)
        err = capsys.readouterr().err
        assert fast.value.code == 2, args
        assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err, err
        _both(args, capsys)


@pytest.mark.parametrize(
    "args",
    [["--help"], ["plan"], ["plan", "--session"], ["--session", "-x"], ["--json", "--json"],
     ["--cwd", "a", "--cwd", "b"], ["-sID"], ["--bogus"]],
)
def test_mode_and_status_lines_left_to_typer(args: list[str]) -> None:
    assert plan_view.parse_mode(args) is None or args == ["--json", "--json"]
    assert plan_view.parse_status(args) is None


@pytest.mark.parametrize(
    "args",
    [["--help"], ["write"], ["write", "a", "b"], ["--agent"], ["--bogus", "write", "a"],
     ["--", "write", "a"], ["--json", "write", "a"]],
)
def test_explain_lines_left_to_typer(args: list[str]) -> None:
    assert explain_view.parse_explain(args) is None


@pytest.mark.parametrize("args", [["--help"], ["--json", "--json"], ["-x"], ["--jsonx"]])
def test_doctor_lines_left_to_typer(args: list[str]) -> None:
    assert doctor_view.parse_doctor(args) is None


def _busy_plan_session(repo: Path) -> Path:
    """A plan session with a plan file, its own checklist, exits, a pending request, and an
    event log holding every kind of event (checklist updates and decisions among them);
    returns the event log."""
    from guard import effects
    from guard.planning import event_bus as ev
    from guard.planning.checklist import Option, PlanItem, Question, StepStatus
    from guard.planning.session import ExitRecord, PendingRequest, Session

    subprocess.run([sys.executable, "-m", "guard", "plan", "start", "Add caching"], cwd=repo,
                   capture_output=True, timeout=120, check=True)
    session = Session.list_all(repo)[0]
    assert session.plan_path is not None
    Path(session.plan_path).write_text("# Add caching\n\n1. measure\n2. cache\nno newline")
    with session.transaction() as s:
        s.checklist = [PlanItem(step="own step", status=StepStatus.PENDING)]
        s.explanation = "the session's own"
        s.decisions = [ExitRecord(at="2026-01-01T00:00:00Z", decision="refine", text="more"),
                       ExitRecord(at="2026-01-01T00:00:01Z", decision="refused",
                                  plan_path=s.plan_path, by="policy")]
        s.pending = [PendingRequest(kind="plan_exit", at="2026-01-01T00:00:02Z")]
    allow = effects.Decision(effects.Action.ALLOW, "reads are fine", "builtin:default:1")
    deny = effects.Decision(effects.Action.DENY, "plan mode: no \u00e9dits\ttab", "r:2")
    for event in (
        ev.ModeChanged(old=Mode.BUILD, new=Mode.PLAN, reason="start"),
        ev.PlanUpdate(plan=[PlanItem(step="  first ", status=StepStatus.COMPLETED)]),
        ev.Decision.from_decision(allow, agent="plan", tool="Read", source="mcp"),
        ev.PlanDelta(delta="1. measure"),
        ev.PlanCompleted(text="1. measure", path=session.plan_path),
        ev.UserInputRequested(questions=[Question(question="Which cache?", options=[
            Option(label="lru"), Option(label="disk", description="on disk")])]),
        ev.PlanExit(outcome="requested", text="done"),
        ev.Decision.from_decision(deny, tool="Write"),
        ev.Violation(path="src/app.py", kind="write", detail="changed"),
        ev.TurnEnded(turn=1),
        ev.PlanUpdate(turn=1, explanation="refined", source="claude-code TodoWrite",
                      plan=[PlanItem(step="measure", status=StepStatus.COMPLETED),
                            PlanItem(step="cache", status=StepStatus.IN_PROGRESS)]),
    ):
        session.publish(event)
    return session.events_path


def _by_the_models(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    """What ARGS print through the typer-free path, the same through typer, and the same
    again with the hand readers off (the session and event models read every file)."""
    from guard.planning import status_view

    said = _both(args, capsys)
    with monkeypatch.context() as m:
        m.setattr(status_view, "plain_view", lambda path: None)
        m.setattr(status_view, "plain_events", lambda path: None)
        with pytest.raises(SystemExit) as models:
            _main.main(args)
        out = capsys.readouterr()
    with pytest.raises(SystemExit) as fast:
        _main.main(args)
    fast_out = capsys.readouterr()
    assert (fast.value.code, fast_out.out, fast_out.err) == (
        models.value.code, out.out, out.err), args
    return said


def test_plan_status_of_a_busy_session_reads_it_by_hand_as_typer_does(
    repo: Path, policy: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plan file, checklist updates, exits, a pending request and decisions: the typer-free
    path reads the session and its event log by hand (guard/planning/status_view.py) and
    prints what typer prints through the models."""
    from guard.planning.status_view import plain_events, plain_view

    events = _busy_plan_session(repo)
    subprocess.run([sys.executable, "-m", "guard", "check", "write", "src/app.py"], cwd=repo,
                   capture_output=True, timeout=120, check=False)  # an audit record
    assert plain_view(next((repo / ".openoxide/sessions").glob("*.json"))) is not None
    assert len(plain_events(events) or []) == 12  # every line accepted by hand (with plan start's)
    sid = next((repo / ".openoxide/sessions").glob("*.json")).stem
    said = {" ".join(a): _by_the_models(a, capsys, monkeypatch) for a in (
        ["plan", "status"], ["plan", "status", "--json"], ["plan", "status", "-s", sid],
        ["plan", "status", "--cwd", "src", "--json"])}  # fmt: skip
    text = said["plan status"]
    assert "checklist (claude-code TodoWrite): refined" in text
    assert "[in_progress] cache" in text and "own step" not in text
    assert "exit      2026-01-01T00:00:01Z refused by policy: -" in text
    assert "waiting   plan_exit since 2026-01-01T00:00:02Z" in text
    assert "5 lines, digest" in text and "DENY  - Write: plan mode" in text
    assert "ALLOW plan Read: reads are fine" in text


BAD_EVENTS = [
    b"{",
    b'{"type": "decision"}',
    b'{"type": "decision", "at": "t", "action": "maybe", "reason": "r", "rule": "x"}',
    b'{"type": "decision", "at": "t", "action": "allow", "reason": "r", "rule": "x", "y": 1}',
    b'{"type": "forged", "at": "t"}',
    b'{"type": "plan_update", "at": "t", "plan": [{"step": " ", "status": "pending"}]}',
    b'{"type": "turn_ended", "at": "t", "turn": "1"}',  # the model coerces it
    b'{"type": "decision", "at": "t", "action": "deny", "reason": "\\ud800", "rule": "x"}',
    b'{"type": "turn_ended", "at": "t", "turn": 1, "turn": 2}',
    b'{"type": "turn_ended", "at": "t", "turn": NaN}',
    b'\xef\xbb\xbf{"type": "turn_ended", "at": "t", "turn": 1}',
    b'{"type": "plan_delta", "at": "t", "delta": "\xff"}',
    b"[1]",
    b'{"type": ["decision"]}',
]


@pytest.mark.parametrize("line", BAD_EVENTS, ids=range(len(BAD_EVENTS)))
def test_a_damaged_event_line_is_read_by_the_models_on_both_paths(
    repo: Path, policy: Path, line: bytes, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A damaged or forged event line is left to the event models: the same answer (most
    often ``FILE:LINE: not a valid event (...)`` and exit 2) through both paths."""
    from guard.planning.status_view import plain_events

    events = _busy_plan_session(repo)
    with events.open("ab") as handle:
        handle.write(line + b"\n" + b'{"type": "turn_ended", "at": "t", "turn": 2}\n')
    assert plain_events(events) is None
    for args in (["plan", "status"], ["plan", "status", "--json"]):
        _by_the_models(args, capsys, monkeypatch)
    with pytest.raises(SystemExit) as fast:
        _main.main(["plan", "status"])
    err = capsys.readouterr().err
    if fast.value.code:
        assert fast.value.code == 2 and f"{events}:13: not a valid event (" in err, err
        assert err.count("\n") == 1 and "Traceback" not in err, err
