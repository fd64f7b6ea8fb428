"""The installed hook command: guard's hook client and the warm hook daemon behind it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from guard import hosts
from guard.setup.install import hook_command

from .conftest import HookRunner, stop_hookd
from .payloads import claude_payload


def run_installed(
    repo: Path, env: dict[str, str], payload: dict[str, object], command: str | None = None,
    **extra: str,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", command or hook_command("claude-code")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=repo,
        env={**env, "GUARD_HOOK_TRACE": "1", "GUARD_HOOK_DAEMON": "1", **extra},
        timeout=60,
        check=False,
    )


def wait_for_hookd(repo: Path, env: dict[str, str], payload: dict[str, object]) -> None:
    for _ in range(150):
        if "answered by hookd" in run_installed(repo, env, payload).stderr:
            return
        time.sleep(0.2)
    raise AssertionError("the hook daemon never answered")


def decision(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"])


def test_daemon_answers_as_the_in_process_hook_does(
    repo: Path, env: dict[str, str], run_hook: HookRunner
) -> None:
    read = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    wait_for_hookd(repo, env, read)
    cases = [
        claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo),
        claude_payload(
            "Write", {"file_path": str(repo / ".openoxide/plans/p.md"), "content": ""}, repo
        ),
        claude_payload("Bash", {"command": "echo x > src/y"}, repo),
        claude_payload("Read", {"file_path": str(repo / ".env")}, repo),
    ]
    for p in cases:
        via_daemon = run_installed(repo, env, p, GUARD_AGENT="plan")
        assert "answered by hookd" in via_daemon.stderr
        in_process = run_hook("claude-code", p, extra_env={"GUARD_AGENT": "plan"})
        assert via_daemon.stdout == in_process.stdout


def test_each_call_brings_its_own_guard_agent(repo: Path, env: dict[str, str]) -> None:
    """Attack: the daemon was started by a build-mode call; a plan-mode call must not inherit it."""
    p = claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo)
    wait_for_hookd(repo, {**env, "GUARD_AGENT": "build"}, p)
    assert decision(run_installed(repo, env, p, GUARD_AGENT="plan")) == "deny"
    assert decision(run_installed(repo, env, p, GUARD_AGENT="build")) == "allow"


def daemon_pid(proc: subprocess.CompletedProcess[str]) -> int:
    """The pid of the daemon that answered (the client's trace line), or fail."""
    marker = "answered by hookd pid "
    assert marker in proc.stderr, proc.stderr
    return int(proc.stderr.split(marker, 1)[1].split()[0])


def test_each_host_s_environment_reaches_a_daemon_of_its_own(
    repo: Path, env: dict[str, str]
) -> None:
    """Routing by the hosts' environment markers (guard/hosts/hook_env.py): a call made
    under a host's variables reaches the daemon started under them, never the one a call
    without them (or another host's) started; the same markers come back to the same
    daemon, and each decides the plan agent's write as the in-process hook does."""
    read = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    write = claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo)
    markers: dict[str, dict[str, str]] = {"none": {}}
    for host in hosts.HOSTS:
        for var in host.environment:  # a prefix stands for any variable under it
            markers[host.name] = {(var + "SESSION" if var.endswith("_") else var): "1"}
    assert len(markers) > 2  # some hosts name variables: the check below means something
    pids: dict[str, int] = {}
    for name, extra in markers.items():
        wait_for_hookd(repo, {**env, **extra}, read)
        pids[name] = daemon_pid(run_installed(repo, {**env, **extra}, read))
    assert len(set(pids.values())) == len(markers), pids
    for name, extra in markers.items():
        again = run_installed(repo, {**env, **extra}, write, GUARD_AGENT="plan")
        assert daemon_pid(again) == pids[name], name
        assert decision(again) == "deny", name


def test_attack_worktree_policy_rewritten_between_calls_is_used_at_once(
    repo: Path, env: dict[str, str]
) -> None:
    """Attack: the daemon keeps a compiled policy; the worktree's policy is tightened in
    place (same length, its mtime put back) between two calls. The next call, answered
    by the same daemon, decides by the new text."""
    pol = repo / ".openoxide" / "policy.toml"
    pol.parent.mkdir()
    loose = 'version = 1\n[agents.t]\nmode = "build"\ndefault = "allow"\n'
    pol.write_text(loose)
    p = claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo)
    wait_for_hookd(repo, {**env, "GUARD_AGENT": "t"}, p)
    first = run_installed(repo, env, p, GUARD_AGENT="t")
    assert "answered by hookd" in first.stderr and decision(first) == "allow"
    st = pol.stat()
    with open(pol, "r+") as fh:
        fh.write(loose.replace('"allow"', '"deny" '))
    os.utime(pol, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = run_installed(repo, env, p, GUARD_AGENT="t")
    assert "answered by hookd" in second.stderr and decision(second) == "deny"


def test_daemon_failure_blocks_instead_of_allowing(repo: Path, env: dict[str, str]) -> None:
    bad = claude_payload("Write", {"content": ""}, repo)
    wait_for_hookd(repo, env, claude_payload("Read", {"file_path": "README"}, repo))
    proc = run_installed(repo, env, bad)
    assert proc.returncode == 2 and "file_path" in proc.stderr


def test_killed_daemon_falls_back_to_deciding_in_process(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    """Attack: the agent kills the daemon (`kill $(cat .../hookd-*.pid)`) hoping calls pass."""
    p = claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo)
    wait_for_hookd(repo, env, p)
    (pidfile,) = (home / ".local/share/openoxide/run").glob("hookd-*.pid")
    pid = int(pidfile.read_text())
    os.kill(pid, signal.SIGKILL)
    proc = run_installed(repo, env, p, GUARD_AGENT="plan")
    assert decision(proc) == "deny"
    if "answered by hookd" in proc.stderr:  # a daemon started by an earlier call took over
        assert int(pidfile.read_text()) != pid


def test_socket_in_a_writable_directory_is_not_trusted(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    """Attack: another user could swap the socket when its directory is writable by others."""
    p = claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo)
    wait_for_hookd(repo, env, p)
    run = home / ".local/share/openoxide/run"
    run.chmod(0o777)
    try:
        proc = run_installed(repo, env, p, GUARD_AGENT="plan")
        assert decision(proc) == "deny" and "answered in-process" in proc.stderr
    finally:
        run.chmod(0o700)
        stop_hookd(home)


def test_daemon_can_be_turned_off(repo: Path, env: dict[str, str], home: Path) -> None:
    p = claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo)
    for _ in range(3):
        proc = run_installed(repo, env, p, GUARD_HOOK_DAEMON="0", GUARD_AGENT="plan")
        assert decision(proc) == "deny" and "answered in-process" in proc.stderr
    time.sleep(1)
    assert not list((home / ".local/share/openoxide/run").glob("hookd*.sock"))


def test_the_daemon_path_loads_no_python_module_beyond_the_interpreters_own(
    repo: Path, env: dict[str, str]
) -> None:
    """Each hook call starts an interpreter: what the client imports on the daemon path is
    paid on every tool call. It loads only its own module and C modules (no json, socket,
    hashlib, re, typing, subprocess...), as `python -X importtime` shows."""
    p = claude_payload("Write", {"file_path": str(repo / "src/n.py"), "content": ""}, repo)
    wait_for_hookd(repo, env, p)
    command = hook_command("claude-code").replace(" -I ", " -I -X importtime ", 1)
    proc = run_installed(repo, env, p, command, GUARD_AGENT="plan")
    assert "answered by hookd" in proc.stderr and decision(proc) == "deny"
    bare = subprocess.run(
        [command.split()[0], "-I", "-X", "importtime", "-c", "pass"],
        capture_output=True, text=True, env=env, check=True,
    )

    def imported(stderr: str) -> set[str]:
        return {
            line.rsplit("|", 1)[1].strip()
            for line in stderr.splitlines()
            if line.startswith("import time:") and not line.endswith("imported package")
        }

    extra = imported(proc.stderr) - imported(bare.stderr)
    assert extra, proc.stderr  # the client's own imports are seen at all
    assert {m for m in extra if not m.startswith("_")} == set(), sorted(extra)
