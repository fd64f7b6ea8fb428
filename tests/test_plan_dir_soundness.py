"""The plan directory is the one place a plan agent may write: it must be what it says.

Real symlinks, FIFOs, sockets and devices on the real filesystem; the evaluator
and ``guard run`` (Landlock) are both tried, and the disk is checked afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from guard.decide import Guard
from guard.effects import Action, Effect
from guard.paths import PathError, Roots, plan_dir
from guard.sandbox import landlock


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "src" / "app.py").write_text("print('original')\n")
    return repo.resolve()


def shipped_plans_link(repo: Path) -> None:
    """What a hostile repository ships: `.openoxide/plans -> ../src`."""
    (repo / ".openoxide").mkdir()
    (repo / ".openoxide" / "plans").symlink_to("../src")


def test_attack_repo_ships_plans_as_a_symlink_to_src_and_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    shipped_plans_link(repo)
    for call in (
        lambda: plan_dir(repo / "src"),
        lambda: plan_dir(worktree=repo),
        lambda: Roots.discover(repo),
        lambda: Guard.load(worktree=repo),
    ):
        with pytest.raises(PathError, match=r"symlink.*rm .*mkdir -p"):
            call()


def test_attack_repo_ships_openoxide_as_a_symlink_and_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "elsewhere" / "plans").mkdir(parents=True)
    (repo / ".openoxide").symlink_to("elsewhere")
    with pytest.raises(PathError, match="symlink"):
        plan_dir(repo)


def test_plan_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / ".openoxide").mkdir()
    (repo / ".openoxide" / "plans").write_text("not a directory")
    with pytest.raises(PathError, match="not a directory"):
        plan_dir(repo)


def test_plain_plan_dir_and_missing_plan_dir_are_fine(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    assert plan_dir(repo).path == repo / ".openoxide" / "plans"  # not created yet
    (repo / ".openoxide" / "plans").mkdir(parents=True)
    assert plan_dir(repo / "src").path == repo / ".openoxide" / "plans"


@pytest.mark.skipif(landlock.abi_version() < 1, reason="the kernel has no Landlock here")
def test_attack_guard_run_in_a_repo_shipping_the_plans_link_writes_nothing(tmp_path: Path) -> None:
    """guard run would grant Landlock write on the link's target (src/): it must refuse."""
    repo = make_repo(tmp_path)
    shipped_plans_link(repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARD_")}
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--agent", "plan", "--no-monitor", "--",
         "sh", "-c", "echo evil > src/app.py; echo new > src/new.py"],
        capture_output=True, text=True, cwd=repo, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "symlink" in proc.stderr and "Traceback" not in proc.stderr
    assert (repo / "src" / "app.py").read_text() == "print('original')\n"
    assert not (repo / "src" / "new.py").exists()


# -- plan files are regular files ------------------------------------------------


@pytest.fixture
def plans(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path)
    p = repo / ".openoxide" / "plans"
    p.mkdir(parents=True)
    return p


def decide_write(plans: Path, target: str) -> tuple[Action, str]:
    g = Guard.load(worktree=plans.parent.parent)
    d = g.decide("plan", [Effect.write(target)], cwd=plans.parent.parent)
    return d.action, d.reason


def test_regular_plan_files_stay_writable(plans: Path) -> None:
    (plans / "old.md").write_text("# plan\n")
    assert decide_write(plans, ".openoxide/plans/old.md")[0] is Action.ALLOW
    assert decide_write(plans, ".openoxide/plans/new.md")[0] is Action.ALLOW


def test_directory_named_like_a_plan_file_is_refused(plans: Path) -> None:
    assert decide_write(plans, ".openoxide/plans/d.md/")[0] is Action.DENY
    (plans / "d.md").mkdir()
    action, reason = decide_write(plans, ".openoxide/plans/d.md")
    assert action is Action.DENY and "a directory" in reason


def test_fifo_named_like_a_plan_file_is_refused(plans: Path) -> None:
    """Writing a FIFO blocks the writer (and a monitor reading it) forever."""
    os.mkfifo(plans / "f.md")
    action, reason = decide_write(plans, ".openoxide/plans/f.md")
    assert action is Action.DENY and "a FIFO" in reason


def test_socket_named_like_a_plan_file_is_refused(plans: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(plans / "s.md"))
        action, reason = decide_write(plans, ".openoxide/plans/s.md")
    finally:
        sock.close()
    assert action is Action.DENY and "a socket" in reason


def test_device_named_like_a_plan_file_is_refused(plans: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    os.mknod(plans / "null.md", 0o20666, os.makedev(1, 3))
    action, reason = decide_write(plans, ".openoxide/plans/null.md")
    assert action is Action.DENY and "a character device" in reason


@pytest.mark.skipif(landlock.abi_version() < 1, reason="the kernel has no Landlock here")
def test_landlock_plan_dir_allows_only_regular_files(plans: Path) -> None:
    """The kernel agrees: in a plan directory only regular files can be made."""
    from guard.sandbox import confine

    script = (
        "import os, errno\n"
        "def t(f):\n"
        "    try: f(); return 'ok'\n"
        "    except OSError as e: return errno.errorcode[e.errno]\n"
        "print(t(lambda: open('p.md', 'w').write('x')), t(lambda: os.mkfifo('f.md')),"
        " t(lambda: os.mkdir('d.md')), t(lambda: os.symlink('/etc/passwd', 'l.md')),"
        " t(lambda: os.rename('p.md', 'q.md')), t(lambda: os.unlink('q.md')))\n"
    )
    proc = subprocess.run(
        confine.helper_argv([sys.executable, "-c", script], plans=[str(plans)], devices=True),
        capture_output=True, text=True, cwd=plans, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ok", "EACCES", "EACCES", "EACCES", "ok", "ok"]
    assert sorted(os.listdir(plans)) == []
