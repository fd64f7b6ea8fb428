"""A CLI that starts fast: ``guard --version``, ``guard check`` and ``guard lint`` answer
without typer, rich or pydantic (guard/cli/quick.py), with typer's very answers.

Timings are never asserted here (benchmarks/cli.py measures them); what is pinned is
what makes them fast (the modules a run loads) and that the quick path says exactly
what the typer command says.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.cli import _main, quick

HEAVY = ("typer", "rich", "pydantic", "click")
PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('LOADED ' + ' '.join(m for m in"
    f" {HEAVY!r} if m in sys.modules) + '\\n'))\n"
    "from guard.cli import main\n"
    "main()\n"
)
POLICY = (
    'version = 1\n[agents.plan]\nmode = "plan"\ndefault = "deny"\n'
    '[agents.plan.write]\ndeny = ["**", "!{plans}/*.md"]\n'
)
BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "cli.py"


def loaded(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run guard with ARGS; (exit code, stdout, the heavy modules it imported)."""
    r = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ), check=False)
    line = [x for x in r.stderr.splitlines() if x.startswith("LOADED")]
    assert line, r.stderr
    return r.returncode, r.stdout, line[-1][len("LOADED"):].strip()


@pytest.fixture
def policy(repo: Path) -> Path:
    p = repo / ".openoxide" / "policy.toml"
    p.write_text(POLICY)
    return p


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--version"], 0),
        (["-V"], 0),
        (["check", "write", "src/app.py"], 1),
        (["check", "--agent", "plan", "--json", "read", "src/app.py"], 1),
        (["lint", ".openoxide/policy.toml"], 0),
        (["lint", "--format", "json"], 0),
    ],
)
def test_quick_commands_load_no_typer_rich_or_pydantic(
    repo: Path, policy: Path, args: list[str], code: int
) -> None:
    """The second run of a command on a policy loads it from the validated cache (the first
    one validated it with pydantic and kept it, as guard run does)."""
    first = loaded(args, repo)
    assert first[0] == code, first
    again = loaded(args, repo)
    assert again[0] == code and again[1] == first[1], (first, again)
    assert again[2] == "", f"{args}: imported {again[2]}"


def test_a_changed_policy_is_validated_again_by_pydantic(repo: Path, policy: Path) -> None:
    """The cache is by content: an edited policy is never taken from it."""
    loaded(["check", "write", "src/app.py"], repo)
    policy.write_text(POLICY.replace('default = "deny"', 'default = "ask"'))
    code, _, heavy = loaded(["check", "read", "src/app.py"], repo)
    assert code == 3 and "pydantic" in heavy
    policy.write_text(POLICY.replace('default = "deny"', 'default = "maybe"'))
    code, _, _ = loaded(["check", "read", "src/app.py"], repo)
    assert code == 2  # a bad policy is still a clear error, never a stale answer


def test_help_and_other_forms_still_go_to_typer(repo: Path, policy: Path) -> None:
    for args in (["check", "--help"], ["lint", "--list-rules"],
                 ["check", "--dialect", "claude-code", "--tool", "Read", "--input", "{}"]):
        _, _, heavy = loaded(args, repo)
        assert "typer" in heavy, args


@pytest.mark.parametrize(
    "args",
    [
        ["check", "write", "src/app.py"],
        ["check", "read", "src/app.py", "--agent", "plan"],
        ["check", "-a", "plan", "--json", "write", ".openoxide/plans/p.md"],
        ["check", "--policy", "builtin:default", "write", "src/app.py"],
        ["check", "--cwd", "src", "--json", "write", "app.py"],
        ["check", "--worktree=.", "delete", "src/app.py"],
        ["check", "--agent", "plann", "write", "src/app.py"],  # an error: the same one
        ["check", "writ", "src/app.py"],
        ["check", "--cwd", "nowhere", "write", "x"],
        ["lint"],
        ["lint", ".openoxide/policy.toml", "--format", "github"],
        ["lint", "-f", "sarif", ".openoxide/policy.toml"],
        ["lint", "--fail-level", "note", ".openoxide/policy.toml"],
        ["lint", "missing.toml"],
        ["--version"],
    ],
)
def test_the_quick_path_answers_as_typer_does(
    repo: Path,
    policy: Path,
    args: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Same stdout, stderr and exit code through guard.cli.quick and through typer."""
    assert args == ["--version"] or (quick.parse_check(args[1:]) if args[0] == "check"
                                     else quick.parse_lint(args[1:])) is not None
    with pytest.raises(SystemExit) as fast:
        _main.main(args)
    fast_out = capsys.readouterr()
    with pytest.raises(SystemExit) as slow:
        _main.dispatch(list(args), as_json="--json" in args or "json" in args)
    slow_out = capsys.readouterr()
    assert (fast.value.code or 0) == (slow.value.code or 0)
    assert fast_out.out == slow_out.out
    assert fast_out.err == slow_out.err


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        ["write"],
        ["write", "a", "b"],
        ["--agent"],
        ["--agent", "-x", "write", "a"],
        ["--agent=", "write", "a"],
        ["--bogus", "write", "a"],
        ["-ajson", "write", "a"],
        ["--", "write", "a"],
        ["--dialect", "claude-code", "--tool", "Bash"],
        ["--agent", "plan", "--agent", "build", "write", "a"],
    ],
)
def test_check_lines_the_quick_reader_leaves_to_typer(args: list[str]) -> None:
    assert quick.parse_check(args) is None


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--list-rules"], ["--explain", "GL001"], ["--format", "xml"],
     ["--fail-level", "fatal"], ["--format"], ["--", "a.toml"]],
)
def test_lint_lines_the_quick_reader_leaves_to_typer(args: list[str]) -> None:
    assert quick.parse_lint(args) is None


def test_benchmark_check_exits_non_zero_on_a_miss() -> None:
    """benchmarks/cli.py --check: a goal no process can meet is a miss (exit 1), and one
    every process meets is not; the ratios are printed last either way."""
    def bench(goal: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(BENCH), "--rounds", "1", "--goal-x", goal,
                               "--doctor-x", goal, "--tab-ms", goal, "--check"],
                              capture_output=True, text=True, timeout=600, check=False)

    miss = bench("0.001")
    assert miss.returncode == 1, miss.stdout + miss.stderr
    assert "missed by guard --help, guard mode, guard plan status, guard check" in miss.stdout
    assert miss.stdout.splitlines()[-1].startswith("ratio guard doctor")
    met = bench("1000000")
    assert met.returncode == 0, met.stdout + met.stderr
    assert "all met" in met.stdout
