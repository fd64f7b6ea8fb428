"""Guard always answers: every hook front door facing a lock held by another process.

A process that holds guard's audit log (or another lock of its state) used to make
every hook wait for ever; the host's hook timed out and ran the call. Each front door
(the hook client of Claude Code, Codex, Gemini CLI and OpenCode deciding in-process,
and hookd) now answers a deny naming the lock and its holder, and the verdict is kept
beside the log. What is asserted is the deny and the record, never a duration.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from guard import hosts
from guard.audit.logfile import default_log_path
from guard.paths import Roots
from guard.setup.install import hook_command

from .payloads import claude_payload, codex_payload, gemini_payload, opencode_payload
from .test_hookd import wait_for_hookd

CLAUDE_CODE = hosts.by_name("claude-code")
CODEX = hosts.by_name("codex")
GEMINI = hosts.by_name("gemini")
OPENCODE = hosts.by_name("opencode")

PAYLOADS = {
    CLAUDE_CODE.name: lambda repo: claude_payload("Read", {"file_path": "src/app.py"},
                                                        repo),
    CODEX.name: lambda repo: codex_payload("Bash", {"command": "ls"}, repo),
    GEMINI.name: lambda repo: gemini_payload("read_file", {"file_path": "src/app.py"},
                                                   repo),
    OPENCODE.name: lambda repo: opencode_payload("read", {"filePath": "src/app.py"}, repo),
}


def run(host: str, repo: Path, env: dict[str, str], payload: dict[str, Any],
        **extra: str) -> subprocess.CompletedProcess[str]:
    """The installed hook command, as the host runs it."""
    return subprocess.run(
        ["/bin/sh", "-c", hook_command(host)], input=json.dumps(payload), capture_output=True,
        text=True, cwd=repo, env={**env, "GUARD_HOOK_TRACE": "1", **extra}, timeout=120,
        check=False,
    )  # fmt: skip


@contextmanager
def held(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process opens ``path`` read-only, takes its lock and sleeps."""
    holder = subprocess.Popen(
        ["python3", "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY);"
         " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)",
         str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def audit_log(repo: Path) -> Path:
    return default_log_path(Roots.discover(str(repo)))


def assert_refused(proc: subprocess.CompletedProcess[str], log: Path, holder: int) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"the audit log {log} stayed locked" in proc.stderr, proc.stderr
    assert f"held by pid {holder}" in proc.stderr, proc.stderr
    kept = [json.loads(x) for x in log.with_name(log.name + ".held").read_text().splitlines()]
    assert kept and kept[-1]["answered"] == "deny" and "stayed locked" in kept[-1]["held"]


@pytest.mark.parametrize("host", sorted(PAYLOADS))
def test_attack_held_audit_log_is_a_deny_at_each_front_door(
    host: str, repo: Path, env: dict[str, str]
) -> None:
    payload = PAYLOADS[host](repo)
    first = run(host, repo, env, payload)
    assert first.returncode == 0, first.stderr  # answered, and the log exists
    log = audit_log(repo)
    before = log.read_bytes()
    with held(log) as holder:
        proc = run(host, repo, env, payload)
    assert "answered in-process" in proc.stderr
    assert_refused(proc, log, holder.pid)
    assert log.read_bytes() == before  # nothing was written past the holder's lock


def test_attack_held_audit_log_is_a_deny_from_hookd(repo: Path, env: dict[str, str]) -> None:
    host = CLAUDE_CODE.name
    payload = PAYLOADS[host](repo)
    env = {**env, "GUARD_HOOK_DAEMON": "1"}
    wait_for_hookd(repo, env, payload)
    log = audit_log(repo)
    with held(log) as holder:
        proc = run(host, repo, env, payload)
    assert "answered by hookd" in proc.stderr, proc.stderr
    assert_refused(proc, log, holder.pid)
    after = run(host, repo, env, payload)  # the holder is gone: answered again
    assert after.returncode == 0, after.stderr


def test_attack_held_transcript_cursor_is_a_block_after_the_tool(
    repo: Path, env: dict[str, str]
) -> None:
    """The post-tool hook reads the host's transcript under a lock of its own: held, the
    hook answers a block naming it instead of waiting for the host's timeout."""
    from guard.hooks.missed import _seen_path

    host = CLAUDE_CODE.name
    transcript = repo / "transcript.jsonl"
    transcript.write_text("")
    payload = {**claude_payload("Read", {"file_path": "src/app.py"}, repo),
               "hook_event_name": "PostToolUse", "tool_response": {"type": "text"}}
    assert run(host, repo, env, payload).returncode == 0
    seen = _seen_path(host, payload["session_id"], str(repo))
    lock = seen.with_suffix(".lock")
    assert lock.exists()
    with held(lock) as holder:
        proc = run(host, repo, env, payload)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"the transcript cursor {seen} stayed locked" in proc.stderr, proc.stderr
    assert f"held by pid {holder.pid}" in proc.stderr


def test_a_free_lock_is_taken_at_once_and_a_held_one_names_its_holder(tmp_path: Path) -> None:
    from guard import locking

    path = tmp_path / "f"
    path.write_text("")
    fd = os.open(path, os.O_RDWR)
    try:
        locking.flock(fd, "f")  # free: taken
        fcntl.flock(fd, fcntl.LOCK_UN)
        with held(path) as holder, locking.budget(0.2), \
                pytest.raises(locking.LockTimeout) as info:
            locking.flock(fd, "the file f")
        assert f"held by pid {holder.pid}" in str(info.value)
        assert "the file f stayed locked" in str(info.value)
    finally:
        os.close(fd)


def test_claude_code_hooks_block_when_they_fail_and_doctor_names_one_that_does_not(
    repo: Path, env: dict[str, str]
) -> None:
    """Claude Code runs the tool when a hook times out or cannot start unless the handler
    says ``"onFailure": "block"``: guard installs every deciding hook with it, and doctor
    calls a hook without it broken."""
    from guard.setup.doctor import host_checks
    from guard.setup.install import install

    install(CLAUDE_CODE.name, "project", cwd=repo)
    path = repo / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    deciding = ("PreToolUse", "PostToolUse", "UserPromptSubmit")
    for event in deciding:
        handlers = [h for g in settings["hooks"][event] for h in g["hooks"]]
        assert handlers and all(h["onFailure"] == "block" for h in handlers), (event, handlers)

    def check() -> Any:
        return next(c for c in host_checks(repo) if c.name == f"{CLAUDE_CODE.name} (project)")

    assert check().status == "ok", check().detail
    for g in settings["hooks"]["PreToolUse"]:
        for h in g["hooks"]:
            del h["onFailure"]
    path.write_text(json.dumps(settings))
    found = check()
    assert found.status == "broken" and "PreToolUse lacks \"onFailure\": \"block\"" in found.detail


def _plan_bash(repo: Path) -> dict[str, Any]:
    return claude_payload("Bash", {"command": "python3 -c 'print(1)'"}, repo,
                          permission_mode="plan")


def test_attack_build_command_restarting_hookd_with_the_test_switches_weakens_nothing(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    """Issue 39's reproduction: a build-mode command starts the user's hookd with the
    variables that once switched the walls off. Later plan-mode commands still get the
    namespaces and the walls; the poisoned daemon answers no client of another
    environment; doctor shows each running daemon's walls and how its environment
    differs."""
    from guard.hooks import hookclient
    from guard.setup.doctor import daemon_checks

    env = {**env, "GUARD_HOOK_DAEMON": "1"}
    poison = {**env, "GUARD_TEST_NO_WALLS": "1", "GUARD_TEST_NO_NAMESPACES": "1"}
    started = subprocess.run([*hookclient.boot_command("guard.hooks.hookd"), "hookd"],
                             env=poison, cwd=repo, timeout=120, check=False,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    assert started.returncode == 0 or started.returncode is None
    payload = _plan_bash(repo)
    wait_for_hookd(repo, poison, payload)  # the poisoned daemon serves its own environment

    wait_for_hookd(repo, env, payload)  # the user's hook gets a daemon of its own
    proc = run(CLAUDE_CODE.name, repo, env, payload, GUARD_AGENT="plan")
    assert "answered by hookd" in proc.stderr, proc.stderr
    answer = json.loads(proc.stdout)["hookSpecificOutput"]
    rewritten = answer["updatedInput"]["command"]
    assert "--namespaces" in rewritten and "--walls" in rewritten, rewritten
    assert "switched them off" not in answer["permissionDecisionReason"]
    # even the poisoned daemon confines with every wall: nothing reads the variables
    poisoned = run(CLAUDE_CODE.name, repo, poison, payload, GUARD_AGENT="plan")
    assert "answered by hookd" in poisoned.stderr, poisoned.stderr
    rewritten = json.loads(poisoned.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
    assert "--namespaces" in rewritten and "--walls" in rewritten, rewritten

    daemons = [c for c in daemon_checks() if c.name.startswith("hook daemon (pid")]
    assert len(daemons) == 2, [c.detail for c in daemons]
    assert all(c.status == "ok" and "get namespaces and the process and IPC walls" in c.detail
               for c in daemons), [c.detail for c in daemons]
    differing = [c for c in daemons if c.extra["env_differs"]]
    assert [c.extra["env_differs"] for c in differing] == [
        ["GUARD_TEST_NO_NAMESPACES", "GUARD_TEST_NO_WALLS"]], [c.detail for c in daemons]


def test_hookd_refuses_a_client_of_another_deciding_environment(
    repo: Path, env: dict[str, str]
) -> None:
    """A request naming hookd's installation but another environment (a variable that
    changes a decision differs) is refused; the client then decides in-process."""
    import socket

    from guard.hooks import hookclient

    env = {**env, "GUARD_HOOK_DAEMON": "1"}
    payload = PAYLOADS[CLAUDE_CODE.name](repo)
    wait_for_hookd(repo, env, payload)
    [sock] = (Path(env["HOME"]) / ".local/share/openoxide/run").glob("hookd-*.sock")
    code = (
        "import json, sys; from guard.hooks import hookclient as hc;"
        "ident = hc.identity(); same = hc.decision_env();"
        "print(json.dumps([ident, same]))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    ident, same = json.loads(out.stdout)
    text = json.dumps(payload)
    request = {"v": hookclient.PROTOCOL, "id": ident, "argv": ["claude-code"], "env": {},
               "same_env": {**same, "PATH": "/attacker/bin"}, "cwd": str(repo),
               "payload": text, "digest": hashlib.sha256(text.encode()).hexdigest()}
    dirfd = os.open(sock.parent, os.O_PATH)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(f"/proc/self/fd/{dirfd}/{sock.name}")  # the path itself is too long
        os.close(dirfd)
        s.sendall(json.dumps(request).encode() + b"\n")
        s.shutdown(socket.SHUT_WR)
        reply = json.loads(b"".join(iter(lambda: s.recv(65536), b"")))
    assert reply["retry"] is True and reply["exit_code"] == 2, reply
    assert reply["why"] == "another environment (PATH differs from hookd's)", reply
