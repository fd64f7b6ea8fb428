"""Conventions every `guard` command follows, through the real entry point.

--version/-V/-h, completion, flags without a value type, one-line usage errors,
colour (NO_COLOR, --color) on a real pseudo-terminal, JSON errors and
schema_version, @FILE/- input, control characters in paths, the default agent.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ESC = "\x1b["


def guard(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        env={**os.environ, **(env or {})},
        check=False,
    )


def on_terminal(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run guard with stdout and stderr on a real pseudo-terminal; (exit code, output)."""
    master, slave = os.openpty()
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full_env.update({"TERM": "xterm-256color", "COLUMNS": "100", **(env or {})})
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=full_env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


# ---- 1. version, help, completion, usage errors, default agent --------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    r = guard(flag)
    assert r.returncode == 0
    assert r.stdout.splitlines()[0] == f"guard {version('openoxide-guard')}"
    assert "installed at " in r.stdout  # which installation runs (tests/test_probe.py)


@pytest.mark.parametrize(
    "args", [["-h"], ["check", "-h"], ["session", "-h"], ["plan", "exit", "-h"]]
)
def test_short_help(args: list[str]) -> None:
    r = guard(*args)
    assert r.returncode == 0 and "Usage: guard" in r.stdout, r.stderr


def _commands() -> list[list[str]]:
    """Every command and command group of the app, as argument lists."""
    from typer.main import get_command

    from guard.cli import app

    out: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        out.append(path)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(get_command(app), [])
    return out


def test_no_flag_is_shown_with_a_value_type() -> None:
    """A flag takes no value: `--json <bool>` and `--help <bool>` were wrong."""
    commands = _commands()
    assert ["check"] in commands and ["quarantine", "restore"] in commands
    from typer.testing import CliRunner

    from guard.cli import app

    runner = CliRunner()
    for args in commands:
        r = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0, (args, r.output)
        assert "--help" in r.output and "<bool>" not in r.output, args
    r = guard("check", "--help", env={"COLUMNS": "200"})
    assert "<str>" in r.stdout  # options that take a value still show its type


def test_shell_completion_is_on(repo: Path) -> None:
    r = guard("--show-completion", "bash")
    assert r.returncode == 0 and "_GUARD_COMPLETE" in r.stdout
    # and it completes: the script's protocol, driven directly
    env = {"_GUARD_COMPLETE": "complete_bash", "COMP_WORDS": "guard che", "COMP_CWORD": "1"}
    r = guard(env=env, cwd=repo)
    assert r.stdout.split() == ["check"]
    env = {"_GUARD_COMPLETE": "complete_bash", "COMP_WORDS": "guard check --js", "COMP_CWORD": "2"}
    assert guard(env=env, cwd=repo).stdout.split() == ["--json"]
    assert "--install-completion" in guard("--help").stdout


def test_bare_mcp_is_one_line_of_error(repo: Path) -> None:
    r = guard("mcp", cwd=repo)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert "no server command" in lines[0] and "guard mcp --help" in lines[0]


def test_usage_errors_are_one_line_naming_the_help(repo: Path) -> None:
    r = guard("check", "--frobnicate", cwd=repo)  # no option of check's is close to it
    assert r.returncode == 2
    assert r.stderr == "guard: error: No such option: --frobnicate (see `guard check --help`)\n"


def test_check_and_explain_default_to_the_plan_agent(repo: Path) -> None:
    default = guard("check", "--json", "write", "src/app.py", cwd=repo)
    pinned = guard("check", "--json", "--agent", "plan", "write", "src/app.py", cwd=repo)
    assert default.returncode == pinned.returncode == 1
    assert json.loads(default.stdout) == json.loads(pinned.stdout)
    assert json.loads(default.stdout)["agent"] == "plan"
    r = guard("explain", "write", ".openoxide/plans/p.md", cwd=repo)
    assert r.returncode == 0 and "agents.plan.write.allow" in r.stdout
    assert "Default: plan" in guard("check", "--help", env={"COLUMNS": "200"}).stdout


# ---- 2. colour ---------------------------------------------------------------------------------


def _lint_target(repo: Path) -> Path:
    p = repo / "weak.toml"
    p.write_text(
        'version = 1\n[agents.plan]\nmode = "plan"\ndefault = "deny"\n'
        '[agents.plan.write]\nallow = ["**"]\n'
    )
    return p


def test_lint_on_a_terminal_is_coloured_unless_no_color(repo: Path) -> None:
    target = str(_lint_target(repo))
    code, out = on_terminal("lint", target, cwd=repo)
    assert code == 3 and ESC in out, out
    code, out = on_terminal("lint", target, cwd=repo, env={"NO_COLOR": "1"})
    assert code == 3 and "GL" in out and ESC not in out, out
    code, out = on_terminal("lint", target, "--color", "never", cwd=repo)
    assert code == 3 and "GL" in out and ESC not in out, out


@pytest.mark.parametrize(
    "args",
    [
        ["check", "write", "src/app.py"],
        ["explain", "write", "src/app.py"],
        ["doctor"],
        ["effects", "-d", "claude-code", "-t", "Bash", "-i", '{"command": "ls"}'],
        ["session", "list"],
    ],
)
def test_no_color_means_no_escape_at_all_on_a_terminal(repo: Path, args: list[str]) -> None:
    """NO_COLOR: not only colours but bold and dim go too (rich keeps them by default)."""
    _, out = on_terminal(*args, cwd=repo, env={"NO_COLOR": "1"})
    assert ESC not in out, out
    _, out = on_terminal("--color", "never", *args, cwd=repo)
    assert ESC not in out, out


def test_color_always_styles_piped_output(repo: Path) -> None:
    r = guard("check", "write", "src/app.py", "--color", "always", cwd=repo)
    assert r.returncode == 1 and ESC in r.stdout
    r = guard("--color=always", "lint", str(_lint_target(repo)), cwd=repo)
    assert r.returncode == 3 and ESC in r.stdout
    r = guard("check", "write", "src/app.py", cwd=repo)
    assert ESC not in r.stdout
    r = guard("--color", "sometimes", "check", cwd=repo)
    assert r.returncode == 2 and "--color 'sometimes'" in r.stderr


def test_session_list_does_not_wrap_when_piped(repo: Path) -> None:
    deep = repo / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    title = "a plan with a rather long title " * 3
    r = guard("session", "start", "--mode", "plan", "--title", title, "--cwd", str(deep))
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    r = guard("session", "list", "--cwd", str(deep), env={"COLUMNS": "80"})
    (line,) = [ln for ln in r.stdout.splitlines() if ln]
    plan = json.loads(guard("session", "list", "--json", "--cwd", str(deep)).stdout)
    (summary,) = plan["sessions"]
    assert sid in line and line.endswith(summary["plan_path"])
    assert len(line) > 80


# ---- 3. JSON -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["check", "--json", "--agent", "nobody", "write", "x"], 2, "no agent 'nobody'"),
        (["check", "--json", "--bogus"], 2, "No such option: --bogus"),
        (["check", "--json", "--dialect", "codex", "--tool", "shell", "--input", "@none.json"],
         2, "@none.json: cannot read it"),
        (["effects", "-d", "claude-code", "-t", "Bash", "-i", "[", "--json"], 2, "not valid JSON"),
        (["lint", "--format", "json", "missing.toml"], 2, "missing.toml"),
        (["session", "show", "--json", "nosuch"], 2, "nosuch"),
        (["plan-dir", "--json", "--cwd", "/nonexistent"], 2, "not a directory"),
    ],
)
def test_errors_with_json_are_json_on_stderr(
    repo: Path, args: list[str], code: int, needle: str
) -> None:
    r = guard(*args, cwd=repo)
    assert r.returncode == code, r.stderr
    assert r.stdout == ""
    err = json.loads(r.stderr)
    assert err["schema_version"] == 1 and needle in err["error"], err


def test_policy_errors_with_json_list_every_problem(repo: Path) -> None:
    bad = repo / "bad.toml"
    bad.write_text('version = 1\n[agents.plan]\nmode = "plan"\ndefault = "nope"\nwrit = []\n')
    r = guard("check", "--json", "--policy", str(bad), "write", "x", cwd=repo)
    assert r.returncode == 2
    err = json.loads(r.stderr)
    assert len(err["problems"]) == 2 and err["problems"][1].startswith(f"{bad}:5:")


def test_every_json_output_carries_a_schema_version(repo: Path) -> None:
    sid = guard("session", "start", "--mode", "plan", "--cwd", str(repo)).stdout.strip()
    docs = [
        ["check", "--json", "write", "src/app.py"],
        ["check", "--json", "--dialect", "claude-code", "--tool", "Read", "--input",
         '{"file_path": "src/app.py"}'],
        ["plan-dir", "--json"],
        ["effects", "-d", "claude-code", "-t", "Read", "-i", '{"file_path": "a"}', "--json"],
        ["doctor", "--json"],
        ["install", "claude-code", "--json"],
        ["uninstall", "claude-code", "--json"],
        ["lint", "--format", "json", "builtin:default"],
        ["review", "--format", "json"],
        ["session", "start", "--json"],
        ["session", "show", sid, "--json"],
        ["session", "list", "--json"],
        ["plan", "list", "--json"],
        ["quarantine", "list", "--json"],
        ["run", "--explain"],
        ["events", "--json", "--session", sid],
    ]
    for args in docs:
        r = guard(*args, cwd=repo)
        assert r.returncode in (0, 1, 3), (args, r.stderr)
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        is_lines = args[0] == "events"
        for doc in [json.loads(ln) for ln in lines] if is_lines else [json.loads(r.stdout)]:
            assert isinstance(doc, dict) and doc.get("schema_version") == 1, (args, doc)


def test_check_json_has_one_shape_in_both_forms(repo: Path) -> None:
    simple = json.loads(guard("check", "--json", "read", "src/app.py", cwd=repo).stdout)
    call = json.loads(
        guard(
            "check", "--json", "--dialect", "claude-code", "--tool", "Read",
            "--input", '{"file_path": "src/app.py"}', cwd=repo,
        ).stdout
    )
    assert set(simple) == set(call)
    assert {frozenset(e) for e in simple["effects"]} == {frozenset(e) for e in call["effects"]}


# ---- 4. @FILE and - ----------------------------------------------------------------------------


def test_check_input_from_a_file_and_stdin(repo: Path) -> None:
    call = '{"command": "echo hi > src/app.py"}'
    (repo / "call.json").write_text(call)
    base = ["check", "--dialect", "claude-code", "--tool", "Bash", "--json", "--input"]
    by_file = guard(*base, "@call.json", cwd=repo)
    by_stdin = guard(*base, "-", cwd=repo, stdin=call)
    inline = guard(*base, call, cwd=repo)
    assert by_file.returncode == by_stdin.returncode == inline.returncode == 1
    assert json.loads(by_file.stdout) == json.loads(by_stdin.stdout) == json.loads(inline.stdout)
    r = guard(*base[:-2], "--input", "@missing.json", cwd=repo)
    assert r.returncode == 2
    assert r.stderr == "guard: error: --input @missing.json: cannot read it: no such file\n"


# ---- 7. control characters ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "explain"])
def test_a_path_with_a_newline_is_bad_input_not_a_deny(repo: Path, command: str) -> None:
    r = guard(command, "write", "src/a\nb.py", cwd=repo)
    assert r.returncode == 2, r.stdout
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert "src/a\\nb.py" in line and "newline" in line


def test_a_newline_inside_a_tool_call_is_denied_and_printed_escaped(repo: Path) -> None:
    r = guard(
        "check", "--dialect", "claude-code", "--tool", "Write",
        "--input", json.dumps({"file_path": "src/a\nb.py", "content": ""}), cwd=repo,
    )
    assert r.returncode == 1  # a hook's answer: fail closed
    assert "src/a\\nb.py" in r.stdout
    assert not any(ln.startswith("b.py") for ln in r.stdout.splitlines()), r.stdout


def test_explain_credits_the_worktree_not_tmp(repo: Path) -> None:
    """The repository fixture lives under the temporary directory, as in the report."""
    assert str(repo).startswith(os.path.realpath("/tmp") + "/") or "TMPDIR" in os.environ
    r = guard("explain", "--agent", "build", "write", "src/app.py", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert "allowed by agents.build.write.allow '{worktree}'" in r.stdout
    decided = [ln for ln in r.stdout.splitlines() if "decides this list" in ln]
    assert len(decided) == 1 and ":{worktree}" in decided[0], r.stdout
    r = guard("explain", "--agent", "build", "write", ".openoxide/plans/p.md", cwd=repo)
    for name in ("protected", "allow"):
        block = r.stdout.split(f"  {name}")[1].split("\n  ")[0]
        assert block.count("decides this list") <= 1, r.stdout


# ---- 6. doctor ---------------------------------------------------------------------------------


def test_doctor_fails_on_a_broken_policy_and_shows_the_audit_log(repo: Path) -> None:
    r = guard("doctor", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    audit = json.loads(guard("doctor", "--json", cwd=repo).stdout)
    (row,) = [c for c in audit["layers"] if c["name"] == "audit log"]
    assert row["path"].endswith(".jsonl") and f"audit log: {row['path']}\n" in r.stdout
    (repo / ".openoxide" / "policy.toml").write_text("version = 2\n")
    r = guard("doctor", cwd=repo)
    assert r.returncode == 1
    assert "broken" in r.stdout and "version" in r.stdout


# ---- 8, 9. install outside a repository; plan exit text ---------------------------------------


def test_install_outside_a_repository_says_there_is_no_worktree(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    r = guard("install", "claude-code", cwd=plain)
    assert r.returncode == 0, r.stderr
    assert (plain / ".claude" / "settings.json").is_file()
    assert "not inside a worktree" in r.stdout and "data directory" in r.stdout
    plans = json.loads(guard("plan-dir", "--json", cwd=plain).stdout)["path"]
    assert plans in r.stdout
    assert json.loads(guard("install", "claude-code", "--json", cwd=plain).stdout)[
        "worktree"
    ] is None


def test_install_in_a_repository_says_nothing_about_worktrees(repo: Path) -> None:
    r = guard("install", "claude-code", cwd=repo)
    assert r.returncode == 0 and "worktree" not in r.stdout, r.stdout


def test_plan_exit_speaks_to_the_user(repo: Path) -> None:
    sid = guard("session", "start", "--mode", "plan", "--title", "t", cwd=repo).stdout.strip()
    plan = guard("plan", "path", cwd=repo).stdout.strip()
    Path(plan).write_text("# Plan\n")
    r = guard("plan", "exit", "--refine", "split step 2", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{sid}: plan: refinement asked (split step 2)")
    assert "You are" not in r.stdout and "the model is told" in r.stdout
    r = guard("plan", "exit", "--approve", cwd=repo)
    assert r.returncode == 0 and "plan approved" in r.stdout and "You are" not in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["check", "write", "src/app.py"],  # answered without typer (guard.cli.quick)
        ["check", "--dialect", "claude-code", "--tool", "Read", "--input", "{}"],  # typer's
    ],
)
def test_an_internal_error_is_one_line_not_a_traceback(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
) -> None:
    from guard.cli import _main, quick

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(quick, "load_guard", broken)
    monkeypatch.delenv("GUARD_DEBUG", raising=False)
    monkeypatch.chdir(repo)
    with pytest.raises(SystemExit) as info:
        _main.main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("guard: error: internal error: RuntimeError: simulated bug")
    assert "Traceback" not in err and len(err.splitlines()) == 1
