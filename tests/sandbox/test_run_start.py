"""``guard run`` starts its confined command from its own process: the helper and the
namespace probe are forked from it, with no second interpreter to start and import
before every command, and the command gets what a freshly started helper gave it.

Real ``guard run`` processes; the process tree is read from /proc while the command
runs, and the disk is checked afterwards.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from sandbox_support import Tree, clean_env, guard_argv, needs_landlock

pytestmark = needs_landlock


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = (task / "children").read_text().split()
            except OSError:
                continue
            found += [int(k) for k in kids]
            todo += [int(k) for k in kids]
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _sleeping(tree_now: list[list[str]]) -> bool:
    return ["sleep", "3", ""] in tree_now or ["sleep", "3"] in tree_now


def test_guard_run_starts_no_second_interpreter_and_the_command_stays_confined(
    tree: Tree, tmp_path: Path
) -> None:
    ready = tree.plans / "ready.md"
    command = (
        f"echo $(ls /proc/self/fd); echo $TMPDIR; : > {ready};"
        f" echo x > src/app.py || echo refused; sleep 3"
    )
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.Popen(
        guard_argv("run", "--agent", "plan", "-q", "--no-monitor", "--", "sh", "-c", command),
        cwd=tree.worktree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), proc.stderr.read() if proc.stderr else ""
        # the shell goes on to `sleep 3` after making the file: read the tree once it has
        tree_now = [_cmdline(p) for p in _descendants(proc.pid)]
        while not _sleeping(tree_now) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            tree_now = [_cmdline(p) for p in _descendants(proc.pid)]
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    helpers = [c for c in tree_now if any(w.endswith("run_confined.py") for w in c)]
    assert helpers == [], tree_now  # forked, never started as a script
    assert _sleeping(tree_now), tree_now
    fds, tmpdir, said = out.split("\n")[:3]
    assert fds.split() == ["0", "1", "2", "3"]  # 3: ls's own directory handle
    assert tmpdir and not os.path.exists(tmpdir)  # its own, removed afterwards
    assert said == "refused"
    assert tree.victim.read_text() == "print('original')\n"
