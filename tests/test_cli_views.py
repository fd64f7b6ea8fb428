"""``guard explain``, ``guard mode``, ``guard plan status`` and ``guard doctor`` answer
without typer (guard/cli/explain_view.py, guard/cli/plan_view.py,
guard/cli/doctor_view.py), with typer's very answers.

Timings are never asserted here (benchmarks/cli.py measures them); what is pinned is
what makes them fast (the modules a run loads) and that the typer-free path says exactly
what the typer command says, with and without an open session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.cli import _main, doctor_view, explain_view, plan_view

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
