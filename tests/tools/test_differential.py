"""The shell analyser against real execution: every allowed command changes nothing.

See differential.py for the generator and the scratch world. CI runs a fixed seed and
a bounded number of cases; a longer campaign runs the module as a script.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.tools import differential


def test_allowed_commands_change_nothing_outside_the_plan_directory(tmp_path: Path) -> None:
    """Attack: every generated command (options in every accepted syntax, evaluating
    constructs, descriptor and /proc redirections) that plan mode allows is run for
    real; the scratch worktree, its .git, HOME and TMPDIR must be left as they were."""
    res = differential.run(3000, seed=20261203, base=tmp_path / "scratch", budget_s=60)
    assert not res.escapes, "\n".join(res.escapes)
    # not vacuous: a good share of the generated commands is allowed and really runs
    assert res.cases >= 100 and res.allowed > res.cases // 10, (res.allowed, res.cases)


def test_the_generator_writes_when_guard_is_not_asked(tmp_path: Path) -> None:
    """The snapshot sees writes: a command that writes outside the plan directory is
    noticed (run directly, without the analyser's verdict)."""
    repo, env = differential.make_scratch(tmp_path / "s")
    plans = repo / differential.PLANS
    before = differential.snapshot(tmp_path / "s", plans)
    subprocess.run(["bash", "-c", "sort -o src/app.py nums.txt"], cwd=repo, env=env, check=True)
    after = differential.snapshot(tmp_path / "s", plans)
    assert before != after
    (plans / "new.md").write_text("x")
    assert differential.snapshot(tmp_path / "s", plans) == after  # the plan dir is not compared


@pytest.mark.parametrize(("mode", "cases", "least"), [
    ("bytes", 400, 20), ("fuzz", 400, 5), ("mini", 300, 30),
])
def test_what_bash_and_sed_read_differently_never_runs(mode: str, cases: int, least: int,
                                                       tmp_path: Path) -> None:
    """Attack, by mode: "bytes" hides ``touch pwned`` behind control characters, backslash
    combinations, Unicode spaces and stray ``$``, in heredoc bodies of every form and in
    PS4/PROMPT_COMMAND/BASH_ENV values run by ``set -x`` and new shells; "fuzz" mutates
    the red-team corpus byte by byte; "mini" writes sed scripts (every delimiter, escaped
    delimiters, bracket expressions, e/w/r, a\\ text) and find/xargs/jq/awk/git -c lines.
    Every allowed command runs in bash for real and must change nothing; an allowed sed
    script must also pass GNU sed's --sandbox."""
    res = differential.run(cases, seed=20261205, base=tmp_path / "scratch", budget_s=30,
                           mode=mode)
    assert not res.escapes, "\n".join(res.escapes)
    assert res.cases >= 50 and res.allowed >= least, (res.allowed, res.cases)


@pytest.mark.parametrize(("mode", "cases", "least"), [
    ("grammar", 1500, 100), ("fuzz", 400, 3), ("mini", 300, 10),
])
def test_what_codex_runs_directly_in_plan_mode_changes_nothing(
        mode: str, cases: int, least: int, tmp_path: Path) -> None:
    """Attack, by mode (as above): on Codex (and Cursor) the hook's allow is the last word,
    so every command its plan mode lets run directly (guard's grammar, read-only by the
    tables) runs for real, with bash and with dash, and must change nothing."""
    res = differential.run(cases, seed=20261207, base=tmp_path / "scratch", budget_s=60,
                           mode=mode, host="codex")
    assert not res.escapes, "\n".join(res.escapes)
    assert res.cases >= 50 and res.allowed >= least, (res.allowed, res.cases)


def test_codex_plan_mode_runs_no_byte_trick_directly(tmp_path: Path) -> None:
    """Attack: the "bytes" commands (control characters, backslash combinations, Unicode
    spaces, stray ``$``, heredocs, PS4/PROMPT_COMMAND/BASH_ENV) are all outside guard's
    grammar: on Codex none runs directly, each would have to take the confined form."""
    res = differential.run(400, seed=20261207, base=tmp_path / "scratch", budget_s=60,
                           mode="bytes", host="codex")
    assert res.cases >= 50 and res.allowed == 0 and not res.escapes, res
