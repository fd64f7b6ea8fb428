"""`guard effects` and `guard check --dialect` driven through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from guard.cli import app
from guard.effects import GuardError

runner = CliRunner()


def test_effects_text_output() -> None:
    r = runner.invoke(
        app,
        [
            "effects",
            "--dialect",
            "claude-code",
            "--tool",
            "Bash",
            "--input",
            '{"command": "cat a > b"}',
        ],
    )
    assert r.exit_code == 0, r.output
    lines = [ln.split("#")[0].split() for ln in r.output.splitlines()]
    assert lines == [["tool", "bash"], ["read", "a"], ["write", "b"]]


def test_effects_json_output() -> None:
    r = runner.invoke(
        app,
        [
            "effects",
            "-d",
            "mcp",
            "-t",
            "move_file",
            "--json",
            "--input",
            '{"source": "a", "destination": "b"}',
        ],
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [(e["kind"], e["target"]) for e in data["effects"]] == [
        ("tool", "move"),
        ("read", "a"),
        ("delete", "a"),
        ("write", "b"),
    ]


def test_effects_input_from_file_and_stdin(tmp_path: Path) -> None:
    f = tmp_path / "call.json"
    f.write_text('{"file_path": "x.md", "content": "y"}')
    r = runner.invoke(app, ["effects", "-d", "gemini", "-t", "write_file", "-i", f"@{f}"])
    assert r.exit_code == 0 and "write  x.md" in r.output
    r = runner.invoke(
        app, ["effects", "-d", "opencode", "-t", "bash", "-i", "-"], input='{"command": "rm z"}'
    )
    assert r.exit_code == 0 and "delete  z" in r.output


def test_effects_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cases = [
        (["-d", "nope", "-t", "x"], "unknown dialect 'nope'"),
        (["-d", "claude-code", "-t", "Read", "-i", "{"], "--input is not valid JSON"),
        (["-d", "claude-code", "-t", "Read", "-i", "[1]"], "--input must be a JSON object"),
        (["-d", "claude-code", "-t", "Read", "-i", "{}"], "missing field 'file_path'"),
        (["-d", "claude-code", "-t", "Read", "-i", f"@{tmp_path}/none.json"], "cannot read it"),
        (["-d", "claude-code", "-t", "Read", "--cwd", f"{tmp_path}/none"], "not a directory"),
    ]
    for args, message in cases:
        r = runner.invoke(app, ["effects", *args])
        assert isinstance(r.exception, GuardError), (args, r.output, r.exception)
        assert message in str(r.exception), (args, str(r.exception))
    # through the real entry point: one line on stderr, exit code 2, no traceback
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "guard",
            "effects",
            "-d",
            "claude-code",
            "-t",
            "Read",
            "-i",
            '{"file_path": 7}',
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.strip().splitlines() == [
        "guard: error: claude-code tool 'Read': field 'file_path' must be a string (the file to"
        " read, a path), got int: 7"
    ]


def test_effects_help_teaches_with_examples() -> None:
    r = runner.invoke(app, ["effects", "--help"])
    assert r.exit_code == 0
    assert "guard effects --dialect claude-code --tool Bash" in r.output


def test_check_with_a_dialect_denies_a_plan_mode_shell_write(repo: Path) -> None:
    """Attack: `echo > file` through Claude Code's Bash tool, checked by hand."""
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "guard",
            "check",
            "--agent",
            "plan",
            "--dialect",
            "claude-code",
            "--tool",
            "Bash",
            "--input",
            '{"command": "echo hi > src/app.py"}',
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        check=False,
    )
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["decision"] == "deny"
    shown = [(e["kind"], e["target"], e["detail"], e["decision"]) for e in out["effects"]]
    assert ("write", "src/app.py", "redirection >", "deny") in shown
