"""Install beyond a clone: build an sdist and a wheel (`python -m build`) from a copy
of the source tree, delete the copy, install the wheel into a fresh virtualenv and
use it from elsewhere: the shipped policies are found, and the hook command that
`guard install` writes still answers hook calls.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".hypothesis",
)


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bin directory of a fresh virtualenv holding guard installed from its wheel."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=IGNORE)
    dist = base / "dist"
    r = run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "BuildBackendWarning" not in r.stderr
    shutil.rmtree(source)  # from here on, no source tree
    (wheel,) = dist.glob("openoxide_guard-*.whl")
    venv = base / "venv"
    r = run([sys.executable, "-m", "venv", str(venv)])
    assert r.returncode == 0, r.stderr
    r = run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    assert r.returncode == 0, r.stderr[-3000:]
    yield venv / "bin"


def test_the_sdist_and_wheel_hold_the_shipped_policies(installed: Path) -> None:
    dist = installed.parent.parent / "dist"
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "guard/policies/default.toml" in names and "guard/policies/readonly.toml" in names
    assert "guard/py.typed" in names
    assert not any(n.startswith(("tests/", "benchmarks/", "scripts/")) for n in names)
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = tar.getnames()
    assert any(m.endswith("guard/policies/default.toml") for m in members)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hi')\n")
    run(["git", "init", "-q", str(repo)])
    return Path(os.path.realpath(repo))


def test_the_installed_command_works_from_any_directory(installed: Path, project: Path) -> None:
    guard = str(installed / "guard")
    r = run([guard, "--version"], cwd=project)
    assert r.returncode == 0 and r.stdout.startswith("guard ")
    assert f"installed at {installed.parent}" in r.stdout and "editable" not in r.stdout
    r = run([str(installed / "python"), "-c", "import guard; print(guard.__file__)"], cwd=project)
    assert str(installed.parent) in r.stdout and str(ROOT) not in r.stdout
    r = run([guard, "check", "write", "src/app.py"], cwd=project)
    assert r.returncode == 1 and "DENY" in r.stdout, r.stderr
    r = run([guard, "check", "--json", "write", ".openoxide/plans/p.md"], cwd=project)
    assert r.returncode == 0 and json.loads(r.stdout)["rule"].startswith("builtin:default:")
    for name in ("builtin:default", "builtin:readonly"):
        r = run([guard, "lint", name], cwd=project)
        assert r.returncode == 0, r.stdout + r.stderr


def test_the_installed_hook_command_answers_after_the_source_is_gone(
    installed: Path, project: Path
) -> None:
    """Attack surface: a hook command that points into a deleted checkout blocks every call
    (fail closed) -- the wheel's must point into the virtualenv and work."""
    guard = str(installed / "guard")
    r = run([guard, "install", "claude-code", "--agent", "plan", "--json"], cwd=project)
    assert r.returncode == 0, r.stderr
    assert "editable" not in r.stderr  # the warning is for editable installs only
    command = json.loads(r.stdout)["command"]
    assert str(installed.parent) in command and str(ROOT) not in command
    call = {
        "hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": str(project),
        "session_id": "s", "tool_input": {"file_path": "src/app.py", "content": "x"},
    }
    r = run(["bash", "-c", command], cwd=project, input=json.dumps(call))
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert (project / "src" / "app.py").read_text() == "print('hi')\n"
    r = run([guard, "doctor", "--json"], cwd=project)
    rows = json.loads(r.stdout)["hosts"]
    assert any(c["name"] == "claude-code (project)" and c["status"] == "ok" for c in rows), rows


def test_the_demo_ends_with_the_path_line_and_leaves_no_data(tmp_path: Path) -> None:
    """scripts/demo.sh from a copy of the checkout: it sets up .venv, shows the demo,
    prints the exact PATH line (which works), and leaves nothing in the data directory."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=IGNORE)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share")}
    r = run(["bash", "scripts/demo.sh"], cwd=checkout, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1].strip()
    assert last == f'export PATH="{checkout}/.venv/bin:$PATH"', last
    r = run(["bash", "-c", f"{last} && cd / && guard --version"], env=env)
    assert r.returncode == 0 and r.stdout.startswith("guard "), r.stderr
    left = [p for p in home.rglob("*") if "openoxide" in str(p)]
    assert left == [], left
