"""`guard ui` on the command line: registered lazily, clear errors, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GUARD = [sys.executable, "-c", "from guard.cli import main; main()"]


def run(
    *args: str, code: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", code] if code else GUARD
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_the_command_tree_lists_ui_without_importing_textual() -> None:
    probe = (
        "import sys; from guard.cli import _app;"
        " names = [c.name for c in _app.app.registered_commands];"
        " print('textual' in sys.modules, 'ui' in names)"
    )
    proc = run(code=probe)
    assert proc.stdout.split() == ["False", "True"], proc.stderr


def test_help_describes_the_keys() -> None:
    proc = run("ui", "--help")
    assert proc.returncode == 0, proc.stderr
    for words in ("plan-mode cockpit", "a approve", "NO_COLOR", "--session", "--cwd"):
        assert words in proc.stdout, words


def test_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    proc = run("ui", "--cwd", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("guard: error:"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_textual_the_error_names_the_extra(repo: Path) -> None:
    code = "import sys; sys.modules['textual'] = None; from guard.cli import main; main()"
    proc = run("ui", "--cwd", str(repo), code=code)
    assert proc.returncode == 2
    assert "pip install 'openoxide-guard[ui]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_unknown_session_is_a_clear_error(repo: Path) -> None:
    proc = run("ui", "--cwd", str(repo), "--session", "20261205-00000000")
    assert proc.returncode == 2
    assert "no session '20261205-00000000'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_a_terminal_it_is_one_line_and_exit_2(repo: Path) -> None:
    """A new user pipes it, or runs it from a script: no escape codes, no hang."""
    proc = run("ui", "--cwd", str(repo))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "needs a terminal" in proc.stderr, proc.stderr
    assert proc.stdout == "" and "\x1b" not in proc.stderr
