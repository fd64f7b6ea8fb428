"""``guard run`` with its monitor under attack: a Ctrl-C to the whole process group, a
monitor that cannot start. Real processes, the real kernel, the disk checked after, and
what guard leaves behind counted by a child subreaper.

The command runs in the Landlock-only fallback (the test switch) where it needs to change
something the monitor must see: Landlock does not govern chmod, the monitor does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandbox_support import Tree, clean_env, guard_argv, needs_landlock

from guard.sandbox.confine import NO_NAMESPACES

pytestmark = needs_landlock

FALLBACK = (NO_NAMESPACES,)

#: runs ARGV as a child subreaper: what guard leaves behind (a process still running, or
#: one never waited for) is reparented here and listed in RESULT once guard has exited.
#: A no-op Python handler (not SIG_IGN, which guard and its command would inherit) keeps
#: a Ctrl-C to the process group from ending this process.
SUBREAPER = r"""
import ctypes, json, os, signal, subprocess, sys
signal.signal(signal.SIGINT, lambda *a: None)
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
result, argv = sys.argv[1], sys.argv[2:]
code = subprocess.Popen(argv).wait()
me = os.getpid()
with open(f"/proc/{me}/task/{me}/children") as f:
    left = [int(p) for p in f.read().split()]
described = {}
for pid in left:
    try:
        with open(f"/proc/{pid}/stat") as f:
            described[pid] = f.read().rsplit(")", 1)[1].split()[0]  # state: Z = zombie
    except OSError:
        described[pid] = "gone"
with open(result, "w") as f:
    json.dump({"code": code, "left": described}, f)
"""


def _commit_src(tree: Tree) -> None:
    git = ["git", "-C", str(tree.worktree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "src"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)


def _wait_for(check: object, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_attack_ctrl_c_to_the_process_group_the_final_check_still_runs(
    tree: Tree, tmp_path: Path
) -> None:
    """Attack: a Ctrl-C (SIGINT to the whole foreground process group, guard included)
    right after the command chmods a project file. The command dies of it; guard does
    not before its monitor's final check: the change is reported, guard run exits as the
    command did (130), and no process of guard's is left, running or unreaped."""
    _commit_src(tree)
    result = tmp_path / "result.json"
    script = "chmod o+x src/app.py && sleep 600"
    proc = subprocess.Popen(
        [sys.executable, "-c", SUBREAPER, str(result),
         *guard_argv("run", "--", "sh", "-c", script, switches=FALLBACK)],
        cwd=tree.worktree, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(lambda: tree.victim.stat().st_mode & 0o001, "the command's chmod")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    outcome = json.loads(result.read_text())
    assert outcome["code"] == 130, err
    assert "guard monitor: VIOLATION attrib {worktree}/src/app.py" in err, err
    assert "reconciliation (final)" in err, err
    assert "guard run: monitor: 1 violation seen" in err, err
    assert outcome["left"] == {}, outcome  # nothing running, nothing left unreaped


@pytest.mark.parametrize("how", ["baseline too large", "tree held by another monitor"])
def test_attack_the_monitor_fails_before_phase_1_the_command_never_starts(
    tree: Tree, tmp_path: Path, how: str
) -> None:
    """The monitor cannot start (its baseline check refuses, or another monitor holds the
    tree's watch lock): a refusal with its error, the command never starts (the plan
    file it would write is not on the disk), and no process of guard's is left."""
    result = tmp_path / "result.json"
    marker = tree.plans / "started.md"
    options = ["--baseline-limit", "1"] if how == "baseline too large" else []
    holder = None
    if how == "tree held by another monitor":
        from guard.decide import Guard
        from guard.monitor import Monitor

        holder = Monitor(
            Guard.load(worktree=tree.worktree),
            "plan",
            audit_path=tmp_path / "held.jsonl",
            reconcile_interval=None,
        )
        holder.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", SUBREAPER, str(result),
             *guard_argv("run", *options, "--", "sh", "-c", f"echo x > {marker}")],
            cwd=tree.worktree, env=clean_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        if holder is not None:
            holder.stop()
    outcome = json.loads(result.read_text())
    assert outcome["code"] == 2, proc.stderr
    expected = ("guard: error: the monitor's baseline would cover more than 1 files"
                if how == "baseline too large" else
                "guard: error: another guard monitor is watching")  # fmt: skip
    assert expected in proc.stderr, proc.stderr
    assert not marker.exists()  # never started
    assert "guard run: monitor:" not in proc.stderr
    assert outcome["left"] == {}, outcome
