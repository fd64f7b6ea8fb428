"""CI never passes by skipping: a missing real component skips locally and fails under CI=true.

Each case runs a real pytest session in a subprocess on a small test tree
that uses tests/components.py exactly as the suite's conftest does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from components import pytest_runtest_makereport  # noqa: F401
"""

MISSING = """
import pytest
from components import require_component

@pytest.fixture(scope="session")
def tool():
    return require_component("the frobnicator CLI", "/nonexistent/frob", "npm install failed")

def test_uses_it(tool):
    assert tool
"""

PRESENT = """
import sys
from components import require_component

def test_uses_it():
    assert require_component("python", sys.executable).exists()
"""

PLAIN_SKIP = """
import pytest

def test_skips():
    pytest.skip("the host CLI needs a login")
"""


def session(
    tmp_path: Path, files: dict[str, str], ci: str | None
) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, text in files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
        check=False,
    )


def test_a_missing_component_skips_on_a_laptop(tmp_path: Path) -> None:
    proc = session(tmp_path, {"e2e/test_a.py": MISSING}, ci=None)
    assert proc.returncode == 0, proc.stdout
    assert "1 skipped" in proc.stdout
    assert "the frobnicator CLI is not available at /nonexistent/frob" in proc.stdout


@pytest.mark.parametrize("where", ["e2e/test_a.py", "mcp/test_a.py"])
def test_a_missing_component_fails_the_run_in_ci(tmp_path: Path, where: str) -> None:
    proc = session(tmp_path, {where: MISSING}, ci="true")
    assert proc.returncode == 1, proc.stdout
    assert "skipped" not in proc.stdout.splitlines()[-1]
    assert "npm install failed" in proc.stdout and "CI=true" in proc.stdout


def test_a_present_component_runs_in_ci(tmp_path: Path) -> None:
    proc = session(tmp_path, {"e2e/test_a.py": PRESENT}, ci="true")
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout


def test_any_skip_of_an_end_to_end_test_fails_in_ci(tmp_path: Path) -> None:
    """The net under the helper: a test that skips by itself is caught too."""
    assert session(tmp_path, {"e2e/test_b.py": PLAIN_SKIP}, ci=None).returncode == 0
    proc = session(tmp_path, {"e2e/test_b.py": PLAIN_SKIP}, ci="true")
    assert proc.returncode == 1 and "needs a login" in proc.stdout, proc.stdout
    elsewhere = session(tmp_path / "x", {"unit/test_b.py": PLAIN_SKIP}, ci="true")
    assert elsewhere.returncode == 0, elsewhere.stdout  # unit tests keep their own skips
