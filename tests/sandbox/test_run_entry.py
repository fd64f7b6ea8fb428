"""``guard run``'s own entry: a plain command line starts without typer; everything else
(help, usage errors) is still said by the typer command, in the same words as before.

The fast reader (:func:`guard.cli.run_plain.parse`) is checked against typer itself:
the options it gives for plain command lines, the options it knows, and the words
and exit codes of help and errors through the real entry point.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from shlex import quote as shlex_quote
from typing import Any

import pytest
from sandbox_support import Tree, clean_env, guard_argv, needs_landlock

from guard.cli import run_plain


def _entry(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        guard_argv(*args),
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean_env(), "COLUMNS": "100", "NO_COLOR": "1", **(env or {})},
        timeout=120,
        check=False,
    )


def _typer_options(args: list[str], monkeypatch: pytest.MonkeyPatch) -> run_plain.RunOptions:
    """The options typer's `guard run` command hands to execute for ``args``."""
    from guard.cli import run

    seen: list[run_plain.RunOptions] = []

    def record(options: run_plain.RunOptions) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr(run, "execute", record)
    code = run.run_app(args=args, prog_name="guard run", standalone_mode=False)
    assert code == 0 and len(seen) == 1, (args, code)
    return seen[0]


@pytest.mark.parametrize(
    "args",
    [
        ["--", "true"],
        ["true"],
        ["-a", "build", "--writable", "cache", "--writable=/srv/x", "-q", "--restore", "ls", "-la"],
        [
            "--policy=builtin:default", "-w", "wt/", "--audit", "a.jsonl", "--no-monitor",
            "--allow-unconfined", "--quiet", "--", "sh", "-c", "echo -- x",
        ],
        ["--agent=plan", "-p", "policy.toml", "ls", "--", "--help"],
        ["--worktree", ".", "--", "--weird-name", "-q"],
        ["-", "x"],  # "-" is a word, not an option, to typer too
    ],
)  # fmt: skip
def test_a_plain_command_line_is_read_as_typer_reads_it(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run_plain.parse(list(args))
    assert fast is not None, args
    assert fast == _typer_options(list(args), monkeypatch)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--agent", "plan"],  # no command: typer's path says so
        ["--help"],
        ["-h", "--", "true"],
        ["--explain"],
        ["--bogus", "--", "true"],
        ["-qa", "plan", "--", "true"],  # bundled short options
        ["-aplan", "--", "true"],
        ["--agent"],
        ["--agent", "--", "true"],  # a value that looks like an option
        ["--agent=", "--", "true"],
        ["--restore=yes", "--", "true"],
    ],
)
def test_anything_but_a_plain_command_line_is_left_to_typer(args: list[str]) -> None:
    assert run_plain.parse(list(args)) is None


def test_the_fast_reader_knows_exactly_the_options_of_the_typer_command() -> None:
    """A new option on the typer command must be taught to the reader (or left to typer)."""
    import typer.main

    from guard.cli.run import run_app

    command = typer.main.get_command(run_app)
    flags: set[str] = set()
    valued: set[str] = set()
    for param in command.params:
        if getattr(param, "is_flag", False):
            flags.update(param.opts)
        elif param.param_type_name == "option":
            valued.update(param.opts)
    assert set(run_plain._FLAGS) == flags - {"--explain"}  # --explain runs nothing: typer's
    assert set(run_plain._VALUED) == valued


def _full_app_message(args: list[str]) -> str:
    """The message the whole application (every command on it) gives for ``guard run ARGS``."""
    from guard.cli import app

    with pytest.raises(Exception) as info:
        app(args=["run", *args], prog_name="guard", standalone_mode=False)
    fmt: Any = info.value.format_message  # type: ignore[attr-defined]
    return str(fmt()).rstrip(".")


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus", "--", "true"],
        ["--agent"],
        ["--restore=yes", "--", "true"],
        ["-qx", "--", "true"],
        ["--writable"],
    ],
)
def test_usage_errors_are_one_line_in_typer_s_words(args: list[str]) -> None:
    proc = _entry("run", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    expected = f"guard: error: {_full_app_message(args)} (see `guard run --help`)\n"
    assert proc.stderr == expected


def test_usage_errors_are_json_with_json(tmp_path: Path) -> None:
    proc = _entry("run", "--json", "--", "true", cwd=tmp_path)
    assert proc.returncode == 2
    doc = json.loads(proc.stderr)
    assert doc["schema_version"] == 1 and "--json" in doc["error"]


def test_help_is_the_whole_application_s_help_of_run() -> None:
    from typer.testing import CliRunner

    from guard.cli import app

    env = {"COLUMNS": "100", "NO_COLOR": "1"}
    whole = CliRunner().invoke(app, ["run", "--help"], env=env, prog_name="guard")
    assert whole.exit_code == 0
    for flag in ("--help", "-h"):
        proc = _entry("run", flag)
        assert proc.returncode == 0 and proc.stderr == ""
        assert proc.stdout == whole.output
    assert "Usage: guard run [OPTIONS] [-- COMMAND [ARGS]...]..." in whole.output
    bare = _entry("run")  # no arguments: the help, and a one-line error
    assert bare.returncode == 2
    assert bare.stdout.rstrip() == whole.output.rstrip()
    assert bare.stderr == "guard: error: no command given (see `guard run --help`)\n"


@needs_landlock
def test_an_error_after_the_fast_reading_is_said_as_typer_s_path_says_it(tree: Tree) -> None:
    fast = _entry("run", "--agent", "nobody", "--", "true", cwd=tree.worktree)
    slow = _entry("run", "-anobody", "--", "true", cwd=tree.worktree)  # typer reads this one
    assert fast.returncode == slow.returncode == 2
    assert fast.stderr == slow.stderr
    assert len(fast.stderr.splitlines()) == 1 and "nobody" in fast.stderr
    no_cmd = _entry("run", "--no-monitor", "--", "no-such-program-xyz", cwd=tree.worktree)
    assert no_cmd.returncode == 127  # as shells say: not found
    assert no_cmd.stderr.endswith("guard: error: command not found: 'no-such-program-xyz'"
                                  " (not on PATH)\n")


@needs_landlock
def test_a_plain_run_imports_neither_typer_nor_rich(tree: Tree) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *guard_argv("run", "-q", "--", "true")[1:]],
        capture_output=True, text=True, cwd=tree.worktree, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "guard.monitor" in imported and "guard.sandbox.supervise" in imported
    top = {name.split(".")[0] for name in imported}
    assert not top & {"typer", "rich", "click", "markdown_it", "pygments"}, top
    others = {n for n in imported if n.startswith("guard.cli.")}
    assert others == {"guard.cli._base", "guard.cli._main", "guard.cli.run_plain"}, others


@pytest.mark.parametrize("args", [["--", "true"], ["-qa", "plan", "--", "true"]])
def test_ctrl_c_before_the_command_starts_is_one_line_on_either_path(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C while the policy loads (before signals are forwarded) is no traceback:
    the plain path (``--``) and typer's (bundled options) both exit 130 quietly."""
    from guard.cli import _main, run

    def interrupted(options: run_plain.RunOptions) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_plain, "execute", interrupted)
    monkeypatch.setattr(run, "execute", interrupted)
    with pytest.raises(SystemExit) as info:
        _main.main(["run", *args])
    assert info.value.code == 130
    assert capsys.readouterr().err == ""


@needs_landlock
@pytest.mark.parametrize(
    ("closed", "monitor"),
    [(">&-", ["--no-monitor"]), (">&- 2>&-", ["--no-monitor"]), (">&-", [])],
)
def test_a_plain_run_started_without_stdout_runs_its_command(
    tree: Tree, closed: str, monitor: list[str]
) -> None:
    """guard run started with its stdout (and stderr) closed, as a host may start it: the
    command runs and its exit status is guard's (it was an internal error: guard flushed a
    stream Python had as None before forking the helper). The monitor-free exit skips the
    interpreter's teardown; the usual one is checked too."""
    marker = tree.plans / "ran.md"
    argv = guard_argv("run", "-q", *monitor, "--", "bash", "-c", f"touch {marker}; exit 7")
    line = " ".join([*map(shlex_quote, argv), closed])
    proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                          cwd=tree.worktree, env=clean_env(), timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 7, proc.stderr
    assert "internal error" not in proc.stderr
    assert marker.exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [(["--agent", "nosuchagent", "--", "true"], "no agent 'nosuchagent'"),
     (["--"], "no command given"), ([], "no command given")],
)  # fmt: skip
@pytest.mark.parametrize("closed", ["", "2>&-", "<&- >&- 2>&-"])
def test_a_refusal_before_the_streams_are_held_exits_2_whatever_the_streams(
    tree: Tree, args: list[str], said: str, closed: str
) -> None:
    """An unknown agent or no command: ``guard run`` exits 2 whether its stderr is open (the
    message there) or closed (no message, the same status), and the command never runs."""
    line = " ".join([*map(shlex_quote, guard_argv("run", *args)), closed])
    proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                          cwd=tree.worktree, env=clean_env(), timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    if "2>&-" not in closed:
        assert f"guard: error: {said}" in proc.stderr, proc.stderr
    else:
        assert proc.stderr == ""
