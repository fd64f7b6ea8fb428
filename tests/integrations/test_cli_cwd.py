"""-C/--cwd and -w/--worktree: one spelling, one metavar, one help and one check on every
command that takes them, and a command that finds its worktree from the current directory
(install, uninstall, doctor, watch, quarantine, run) takes -C like the others."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.cli import completion
from guard.cli.options import CWD_HELP, WORKTREE_HELP

#: commands whose -C means something of their own (a checkout to replay against, the
#: directory a tool call ran in); the spelling and metavar are still the common ones
OWN_MEANING = {"effects", "replay", "review"}

#: what each command needs besides -C to get as far as reading it
NEEDS = {
    "check": ["write", "x"],
    "explain": ["write", "x"],
    "effects": ["--dialect", "claude-code", "--tool", "Bash"],
    "install": ["claude-code"],
    "uninstall": ["claude-code"],
    "mcp": ["--", "true"],
    "replay": ["x"],
    "run": ["--", "true"],
    "quarantine show": ["x"],
    "quarantine restore": ["x"],
    "session end": ["x"],
    "plan start": ["x"],
    "plan resume": ["x"],
    "plan answer": ["x"],
    "mode": ["plan"],
}


def _typer_commands() -> dict[str, dict[str, tuple[list[str], str | None, str]]]:
    """Each command path -> {option name: (its names, metavar, help)}, from typer's app."""
    import typer.main

    from guard.cli._app import app

    out: dict[str, dict[str, tuple[list[str], str | None, str]]] = {}

    def walk(cmd: Any, path: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, f"{path} {name}".strip())
            return
        out[path] = {p.name or "": (list(p.opts), p.metavar, getattr(p, "help", "") or "")
                     for p in cmd.params if p.param_type_name == "option"}

    walk(typer.main.get_command(app), "")
    return out


COMMANDS = _typer_commands()
WITH_CWD = sorted(p for p, opts in COMMANDS.items() if "cwd" in opts)


def test_every_cwd_and_worktree_option_is_spelt_the_same() -> None:
    problems = []
    for path, opts in COMMANDS.items():
        if "worktree" in opts:
            names, metavar, help_text = opts["worktree"]
            if (names, metavar, help_text) != (["--worktree", "-w"], "DIR", WORKTREE_HELP):
                problems.append(f"{path}: -w is {names} {metavar} {help_text!r}")
            if "cwd" not in opts:  # the help of -w names --cwd
                problems.append(f"{path}: takes -w but not -C")
        if "cwd" in opts:
            names, metavar, help_text = opts["cwd"]
            if (names, metavar) != (["--cwd", "-C"], "DIR"):
                problems.append(f"{path}: -C is {names} {metavar}")
            if path.split()[0] not in OWN_MEANING and not help_text.startswith(
                    CWD_HELP.removesuffix(" Default: the current directory.")):
                problems.append(f"{path}: -C help {help_text!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", ["install", "uninstall", "doctor", "watch", "run",
                                  "quarantine list", "lint", "audit verify"])
def test_commands_that_work_from_the_current_directory_take_c(path: str) -> None:
    assert "cwd" in COMMANDS[path], f"guard {path} has no -C"


@pytest.mark.parametrize("path", WITH_CWD)
def test_a_cwd_that_is_no_directory_is_one_line_of_bad_input(path: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", *path.split(), "-C", str(missing), *NEEDS.get(path, [])],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr == f"guard: error: --cwd {missing}: not a directory\n", proc.stderr
    assert not missing.exists()  # nothing made there (a session store, a plan directory)


@pytest.mark.parametrize("path", ["check", "explain", "plan-dir", "run", "quarantine list",
                                  "watch"])
def test_a_worktree_that_is_no_directory_is_one_line_of_bad_input(
    path: str, tmp_path: Path
) -> None:
    missing = tmp_path / "missing"
    args = [*path.split(), "-w", str(missing), *NEEDS.get(path, [])]
    proc = subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr == f"guard: error: --worktree {missing}: not a directory\n"
    assert not missing.exists()


def test_install_doctor_and_uninstall_with_c_act_on_that_worktree(
    repo: Path, env: dict[str, str], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def guard(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True,
                              text=True, cwd=elsewhere, env=env, timeout=120, check=False)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc

    installed = json.loads(guard("install", "claude-code", "-C", str(repo), "--json").stdout)
    assert installed["worktree"] == str(repo)
    assert (repo / ".claude/settings.json").exists()
    assert not (elsewhere / ".claude").exists()
    doctor = json.loads(guard("doctor", "-C", str(repo), "--json").stdout)
    assert [h["host"] for h in doctor["hosts"] if h["status"] == "ok"] == ["claude-code"]
    guard("uninstall", "claude-code", "--cwd", str(repo))
    assert not (repo / ".claude").exists()


def test_lint_with_c_lints_the_policy_found_there(repo: Path, tmp_path: Path) -> None:
    (repo / ".openoxide").mkdir(exist_ok=True)
    (repo / ".openoxide/policy.toml").write_text(
        'version = 1\nextends = ["builtin:default"]\n[agents.x]\nmode = "build"\n'
        'default = "ask"\n[agents.x.exec]\ndeny = ["//**/rm"]\n')
    for extra in ([], ["--format", "json"], ["-f", "sarif", "--fail-level", "note"]):
        proc = subprocess.run([sys.executable, "-m", "guard", "lint", "-C", str(repo), *extra],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              check=False)
        assert proc.returncode == 3 and "GL107" in proc.stdout, (extra, proc.stdout,
                                                                 proc.stderr)


def test_run_with_c_starts_the_command_there(repo: Path, env: dict[str, str],
                                             tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "-q", "--no-monitor", "-C", str(repo), "--",
         "pwd"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
        check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(repo)


def test_the_completion_table_offers_c_wherever_w_is() -> None:
    for path, (_, _, options, _) in completion.table()["commands"].items():
        names = {n for option in options for n in option[0]}
        if "-w" in names:
            assert "-C" in names, path
