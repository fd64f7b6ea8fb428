"""hookd is per installation: a client is only ever answered by its own installation's daemon.

Two installations here are two copies of guard's package run by the same
interpreter (as a project venv's editable guard beside a pipx install would
be): each gets its own daemon, neither daemon answers the other's client, and
a daemon whose code, version or shipped policies changed stops answering.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from .conftest import (
    Installation,
    alive,
    answered_by,
    claude_payload,
    copy_installation,
    daemon_pids,
    decision_of,
    run_dir,
    wait_for_daemon,
)

B_ONLY = "src/b-only.py"  # installation B's shipped policy lets the plan agent write this


def allow_in_plan(inst: Installation, rel: str) -> None:
    """Change the installation's shipped default policy: its plan agent may write ``rel``."""
    policy = inst.package / "policies" / "default.toml"
    text = policy.read_text()
    old = 'allow = ["{plans}/*.md", "!{plans}/*/**"]'
    assert old in text, "the shipped default policy changed shape; update this test"
    policy.write_text(text.replace(old, f'allow = ["{{plans}}/*.md", "!{{plans}}/*/**", "{rel}"]'))


def wait_gone(pid: int) -> None:
    for _ in range(600):
        if not alive(pid):
            return
        time.sleep(0.1)
    raise AssertionError(f"hookd pid {pid} never exited")


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.fixture
def two(tmp_path: Path) -> tuple[Installation, Installation]:
    a = copy_installation(tmp_path / "install-a")
    b = copy_installation(tmp_path / "install-b")
    allow_in_plan(b, B_ONLY)
    return a, b


def test_two_installations_never_answer_each_others_clients(
    two: tuple[Installation, Installation], repo: Path, env: dict[str, str]
) -> None:
    a, b = two
    plan = {**env, "GUARD_AGENT": "plan"}
    write = claude_payload("Write", {"file_path": str(repo / B_ONLY), "content": "x"}, repo)
    pid_a = wait_for_daemon(a, write, repo, plan)
    pid_b = wait_for_daemon(b, write, repo, plan)
    assert pid_a != pid_b
    assert str(a.package.parent) in cmdline(pid_a) and str(b.package.parent) in cmdline(pid_b)
    for _ in range(5):
        via_a, via_b = a.hook(write, repo, plan), b.hook(write, repo, plan)
        assert (answered_by(via_a), decision_of(via_a)) == (pid_a, "deny")
        assert (answered_by(via_b), decision_of(via_b)) == (pid_b, "allow")
    assert len(daemon_pids(Path(env["HOME"]))) == 2


def test_a_daemon_at_another_installations_socket_is_refused_in_the_handshake(
    two: tuple[Installation, Installation], repo: Path, env: dict[str, str]
) -> None:
    """Attack: B's daemon sits at A's socket path (an old guard, a key collision, a swap).

    A's client must not take B's answer (B would allow), whatever the path says.
    """
    a, b = two
    plan = {**env, "GUARD_AGENT": "plan"}
    write = claude_payload("Write", {"file_path": str(repo / B_ONLY), "content": "x"}, repo)
    pid_a = wait_for_daemon(a, write, repo, plan)
    pid_b = wait_for_daemon(b, write, repo, plan)
    pids = daemon_pids(Path(env["HOME"]))
    name_a = next(n for n, p in pids.items() if p == pid_a).replace(".pid", ".sock")
    name_b = next(n for n, p in pids.items() if p == pid_b).replace(".pid", ".sock")
    run = run_dir(Path(env["HOME"]))
    os.replace(run / name_b, run / name_a)
    for _ in range(3):
        proc = a.hook(write, repo, plan)
        assert decision_of(proc) == "deny", proc.stderr
        assert answered_by(proc) != pid_b


@pytest.mark.parametrize("change", ["shipped policy", "code", "version"])
def test_a_daemon_whose_installation_changed_stops_answering(
    tmp_path: Path, repo: Path, env: dict[str, str], change: str
) -> None:
    inst = copy_installation(tmp_path / "install")
    plan = {**env, "GUARD_AGENT": "plan"}
    write = claude_payload("Write", {"file_path": str(repo / B_ONLY), "content": "x"}, repo)
    old = wait_for_daemon(inst, write, repo, plan)
    assert decision_of(inst.hook(write, repo, plan)) == "deny"
    if change == "shipped policy":
        allow_in_plan(inst, B_ONLY)
        expected = "allow"
    elif change == "code":
        runner = inst.package / "hooks" / "front_door.py"
        runner.write_text(runner.read_text() + "\n# changed\n")
        expected = "deny"
    else:
        init = inst.package / "version.py"
        init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9!'))
        expected = "deny"
    first = inst.hook(write, repo, plan)  # the very next call
    assert answered_by(first) != old
    assert decision_of(first) == expected
    wait_gone(old)
    new = wait_for_daemon(inst, write, repo, plan)
    assert new != old
    assert decision_of(inst.hook(write, repo, plan)) == expected


def test_killed_daemons_stale_files_are_recovered_without_a_failed_call(
    this_install: Installation, repo: Path, env: dict[str, str]
) -> None:
    """Attack: the agent SIGKILLs the daemon, leaving its socket and pid file behind."""
    home = Path(env["HOME"])
    plan = {**env, "GUARD_AGENT": "plan"}
    write = claude_payload("Write", {"file_path": str(repo / "src/app.py"), "content": ""}, repo)
    old = wait_for_daemon(this_install, write, repo, plan)
    (pidfile,) = run_dir(home).glob("hookd-*.pid")
    sock = pidfile.with_suffix(".sock")
    # files of a daemon of some other installation that was killed long ago
    stale = {run_dir(home) / f"hookd-00000000deadbeef.{s}" for s in ("sock", "pid", "lock")}
    for f in stale:
        f.write_text("12345\n")
    os.kill(old, signal.SIGKILL)
    wait_gone(old)
    assert sock.exists() and pidfile.read_text().strip() == str(old)  # left behind
    for _ in range(3):
        assert decision_of(this_install.hook(write, repo, plan)) == "deny"
    new = wait_for_daemon(this_install, write, repo, plan)
    assert new != old and pidfile.read_text().strip() == str(new)
    assert not any(f.exists() for f in stale)
