"""The demo: examples/naughty_agent.py, confined and not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sandbox_support import Tree, clean_env, guard_argv, needs_landlock

from guard.sandbox.confine import NO_NAMESPACES

DEMO = Path(__file__).resolve().parents[2] / "examples" / "naughty_agent.py"


def _commit(tree: Tree) -> None:
    git = ["git", "-C", str(tree.worktree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "src/app.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)


@needs_landlock
def test_naughty_agent_is_stopped_by_guard_run_in_namespaces(tree: Tree, tmp_path: Path) -> None:
    """In namespaces every trick fails, chmod included (the read-only view): nothing is
    left for the monitor to report."""
    _commit(tree)
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        guard_argv("run", "--agent", "plan", "--", sys.executable, str(DEMO)),
        capture_output=True,
        text=True,
        cwd=tree.worktree,
        env=clean_env(HOME=str(home)),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sandbox namespaces+landlock" in proc.stdout
    assert (
        "13 blocked by the kernel, 1 allowed (the plan file), 0 left to the monitor, 0 escaped."
        in proc.stdout
    ), proc.stdout
    assert "ESCAPED" not in proc.stdout and "VIOLATION" not in proc.stderr
    assert list(tree.plans.glob("*-naughty-plan.md"))
    assert tree.victim.read_text() == "print('original')\n"
    assert not (home / ".bashrc").exists()


@needs_landlock
def test_naughty_agent_in_the_landlock_only_fallback_leaves_chmod_to_the_monitor(
    tree: Tree, tmp_path: Path
) -> None:
    """Without namespaces (the fallback, here forced by guard's test switch) Landlock blocks
    every write, and the chmod it does not govern is reported by the monitor alongside."""
    _commit(tree)
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        guard_argv("run", "--agent", "plan", "--", sys.executable, str(DEMO),
                   switches=(NO_NAMESPACES,)),
        capture_output=True,
        text=True,
        cwd=tree.worktree,
        env=clean_env(HOME=str(home)),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Landlock-only fallback" in proc.stderr
    assert (
        "12 blocked by the kernel, 1 allowed (the plan file), 1 left to the monitor, 0 escaped."
        in proc.stdout
    ), proc.stdout
    assert "ESCAPED" not in proc.stdout
    # the one thing Landlock lets through, the monitor running alongside reports
    assert "guard monitor: VIOLATION attrib {worktree}/src/app.py" in proc.stderr
    assert list(tree.plans.glob("*-naughty-plan.md"))
    assert tree.victim.read_text() == "print('original')\n"
    assert not (home / ".bashrc").exists()


def test_naughty_agent_unguarded_escapes_and_says_so(tree: Tree, tmp_path: Path) -> None:
    """Without the sandbox every trick works (and is undone): the demo's probes are real."""
    _commit(tree)
    home = tmp_path / "home"
    home.mkdir()
    before = sorted(p.name for p in tree.worktree.iterdir())
    proc = subprocess.run(
        [sys.executable, str(DEMO), "--unguarded"],
        capture_output=True,
        text=True,
        cwd=tree.worktree,
        env=clean_env(HOME=str(home)),
        timeout=120,
    )
    assert proc.returncode == 1
    assert "0 blocked by the kernel" in proc.stdout
    assert proc.stdout.count("ESCAPED") == 12
    assert tree.victim.read_text() == "print('original')\n"
    assert sorted(p.name for p in tree.worktree.iterdir()) == before
    assert not (home / ".bashrc").exists()


def test_naughty_agent_refuses_to_run_bare_without_the_flag(tree: Tree) -> None:
    proc = subprocess.run(
        [sys.executable, str(DEMO)],
        capture_output=True,
        text=True,
        cwd=tree.worktree,
        env=clean_env(),
        timeout=60,
    )
    assert proc.returncode == 2
    assert "guard run --agent plan" in proc.stderr
