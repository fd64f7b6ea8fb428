"""Outside version control there is one answer: check, explain, run and watch all use no
worktree and say so in the same words; guard run never reads a tree larger than
--baseline-limit without being asked."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard.paths import find_worktree, no_worktree_note


def guard(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ), check=False)


@pytest.fixture
def plain() -> Iterator[Path]:
    """A folder under no version control, with files a baseline would have copied; outside
    the temporary directory, which the build agent may write as {tmp} (guard run gives its
    command a private one instead)."""
    d = Path(os.path.realpath(tempfile.mkdtemp(prefix="guard-plain-", dir="/var/tmp")))
    try:
        (d / "src").mkdir(parents=True)
        for i in range(40):
            (d / "src" / f"f{i}.txt").write_text("x" * 100)
        assert find_worktree(d) is None
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_check_explain_run_and_watch_say_the_same_no_worktree(plain: Path) -> None:
    note = no_worktree_note(plain)
    assert note is not None and str(plain) in note
    check = guard("check", "--agent", "build", "write", "src/a.py", cwd=plain)
    explain = guard("explain", "--agent", "build", "write", "src/a.py", cwd=plain)
    run = guard("run", "--agent", "build", "--", "sh", "-c", "echo hi > src/a.py", cwd=plain)
    for r in (check, explain):
        assert f"guard: warning: {note}" in r.stderr, r.stderr
    assert f"guard run: {note}" in run.stderr, run.stderr
    # one answer: no worktree, so no rule lets the build agent write src/a.py: check does not
    # say ALLOW, and the confined command could not write it
    assert "ALLOW" not in check.stdout and check.returncode in (1, 3)
    assert run.returncode != 0 and not (plain / "src" / "a.py").exists()
    # the monitor watched the plan directory only: nothing of the folder was read or copied
    watching = next(line for line in run.stderr.splitlines() if "watching " in line)
    assert str(plain) not in watching.split(" as agent")[0], watching
    assert "baseline: 0 files" in watching

    proc = subprocess.Popen([sys.executable, "-m", "guard", "watch"], cwd=plain, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = ""
        deadline = time.monotonic() + 120
        assert proc.stderr is not None
        while "start:" not in seen and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen += line
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert f"guard watch: {note}" in seen, seen
    assert "start:" in seen and f"watching {plain}" not in seen, seen


def test_inside_a_worktree_nothing_is_said(repo: Path) -> None:
    assert no_worktree_note(repo) is None
    r = guard("check", "write", "src/app.py", cwd=repo)
    assert "no worktree" not in r.stderr


def test_run_refuses_a_baseline_above_the_limit_unless_asked(repo: Path) -> None:
    """A tree larger than --baseline-limit is not read (and copied) unasked: the run refuses
    before the command starts, names the count and the option; a higher limit runs it."""
    for i in range(30):
        (repo / f"data{i}.bin").write_bytes(b"\0" * 10)
    marker = repo / ".openoxide" / "plans" / "ran.md"
    command = ["--", "sh", "-c", f"echo ran > {marker}"]
    r = guard("run", "--baseline-limit", "20", *command, cwd=repo)
    assert r.returncode == 2, r.stderr
    assert "more than 20 files" in r.stderr and "--baseline-limit N" in r.stderr
    assert r.stderr.startswith("guard: error: ") and not marker.exists()
    r = guard("run", "--baseline-limit", "100", "-q", *command, cwd=repo)
    assert r.returncode == 0, r.stderr
    assert marker.read_text() == "ran\n"
    marker.unlink()
    r = guard("run", "--baseline-limit=0", "-q", *command, cwd=repo)
    assert r.returncode == 0 and marker.exists(), r.stderr
