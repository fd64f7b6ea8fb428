"""Sessions have an owner and an end; only a live session decides for a worktree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard.planning import (
    Mode,
    Owner,
    Session,
    SessionError,
    current_mode,
    deciding_session,
    describe_current_agent,
)
from guard.planning._liveness import process_start as _process_start
from guard.planning.session import pin, sessions_dir

from .test_cli import guard, guard_proc

SCRIPTED_SERVER = Path(__file__).parent.parent / "mcp" / "scripted_server.py"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A real process that owns sessions in these tests."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def owner_of(proc: subprocess.Popen[bytes]) -> Owner:
    me = Owner.this_process("test")
    started = _process_start(proc.pid)
    assert started is not None
    return me.model_copy(update={"pid": proc.pid, "started": started, "command": "sleeper"})


def wait_for(predicate: object, what: str, seconds: float = 60.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def test_the_newest_open_session_decides(repo: Path) -> None:
    older = Session.start(repo)
    newer = Session.start(repo)
    found = deciding_session(repo)
    assert found is not None and found[0].id == newer.id and "newest open" in found[1]
    older.refresh()
    assert current_mode(repo) == ("build", found[0])


def test_an_open_plan_session_keeps_the_worktree_in_plan_mode(repo: Path) -> None:
    """A newer build session does not take the worktree out of plan mode: plan wins."""
    planning = Session.start(repo, "plan", title="old")
    Session.start(repo)
    found = deciding_session(repo)
    assert found is not None and found[0].id == planning.id
    assert "newest open plan session; 1 other open" in found[1]
    assert current_mode(repo) == ("plan", found[0])


def test_an_ended_session_never_decides(repo: Path) -> None:
    """The stale-session bug: an old plan session must not flip the hooks back to plan."""
    stale = Session.start(repo, "plan", title="stale")
    assert stale.end("test")
    assert deciding_session(repo) is None
    assert describe_current_agent(repo, env={}).agent == "build"
    assert not stale.end("again"), "ending twice reports it"
    with pytest.raises(SessionError, match="has ended"):
        stale.set_mode(Mode.BUILD, "x", via_approved_exit=True)
    assert Session.load(stale.id, repo).status == "ended"


def test_a_dead_owner_makes_the_session_orphaned(
    repo: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A proxy killed with SIGKILL cannot end its session: a plan session stays in force
    (fail closed), a build session stops deciding."""
    s = Session.start(repo, "plan", title="owned", owner=owner_of(sleeper))
    found = deciding_session(repo)
    assert found is not None and found[0].id == s.id and s.status == "open"
    sleeper.kill()
    sleeper.wait()
    assert Session.load(s.id, repo).status == "orphaned"
    found = deciding_session(repo)
    assert found is not None and found[0].id == s.id and "orphaned: its owner sleeper" in found[1]
    assert "is gone" in Session.load(s.id, repo).orphan_note()


def test_an_orphaned_build_session_decides_nothing(repo: Path) -> None:
    me = Owner.this_process("test")
    dead = me.model_copy(update={"started": me.started + 1})
    s = Session.start(repo, "build", owner=dead)
    assert s.status == "orphaned" and deciding_session(repo) is None


def test_a_reused_pid_is_not_the_owner(repo: Path) -> None:
    """Attack on the liveness check: the pid lives again, but it is another process."""
    me = Owner.this_process("test")
    impostor = me.model_copy(update={"started": me.started + 1})
    s = Session.start(repo, "plan", owner=impostor)
    found = deciding_session(repo)
    assert s.status == "orphaned" and found is not None and found[0].id == s.id, "stays plan"
    other_boot = me.model_copy(update={"boot": "not-this-boot"})
    assert not other_boot.alive()


def test_a_pinned_session_decides_while_it_is_live(repo: Path) -> None:
    pinned = Session.start(repo, "plan", title="pinned")
    newer = Session.start(repo)
    pin(pinned.directory, pinned.id)
    found = deciding_session(repo)
    assert found is not None and found[0].id == pinned.id and "pinned" in found[1]
    pinned.end("done")
    found = deciding_session(repo)
    assert found is not None and found[0].id == newer.id
    assert not (pinned.directory / "pinned").exists()


def test_a_corrupt_pin_is_an_error_not_a_guess(repo: Path) -> None:
    s = Session.start(repo)
    (s.directory / "pinned").write_text("../../etc/passwd\n")
    with pytest.raises(SessionError, match="not a session id"):
        deciding_session(repo)


def test_cli_end_list_and_mode_say_who_decides(repo: Path) -> None:
    code, out, _ = guard("plan", "start", "Add caching", "--cwd", str(repo))
    assert code == 0, out
    sid = next(s.id for s in Session.list_all(repo))
    assert f"session {sid}" in out and "add-caching.md" in out
    assert "guard plan exit --approve" in out and "The hooks use plan" in out
    code, out, _ = guard("mode", "--cwd", str(repo))
    assert code == 0 and out.splitlines()[0] == "plan"
    assert f"session {sid}" in out and "the hooks use plan" in out
    code, out, _ = guard("session", "list", "--cwd", str(repo))
    assert code == 0 and out.startswith(f"* {sid}") and "open" in out and "owner user" in out
    code, out, _ = guard("session", "end", "--cwd", str(repo))
    assert code == 0 and f"{sid}: ended" in out and "the hooks now use build" in out
    code, out, _ = guard("session", "list", "--cwd", str(repo), "--json")
    rows = json.loads(out)["sessions"]
    assert [(r["id"], r["state"], r["deciding"]) for r in rows] == [(sid, "ended", False)]
    code, out, _ = guard("mode", "--cwd", str(repo))
    assert out.splitlines()[0] == "no open session" and "host's permission mode" in out
    code, _, err = guard("session", "end", sid, "--cwd", str(repo))
    assert code == 2 and "already ended" in err


def test_mode_with_session_pins_it(repo: Path) -> None:
    a = Session.start(repo)
    Session.start(repo)
    code, _, _ = guard("mode", "plan", "--session", a.id, "--cwd", str(repo))
    assert code == 0
    found = deciding_session(repo)
    assert found is not None and found[0].id == a.id and found[0].mode is Mode.PLAN


def test_guard_agent_overrides_and_says_so(repo: Path) -> None:
    Session.start(repo, "plan")
    current = describe_current_agent(repo, env={"GUARD_AGENT": "build"})
    assert current.agent == "build" and "$GUARD_AGENT" in current.reason


def test_plan_status_shows_mode_file_checklist_and_decisions(repo: Path) -> None:
    from guard import Effect, Guard
    from guard.planning import event_bus

    s = Session.start(repo, "plan", title="Status")
    g = Guard.load(cwd=repo)
    d = g.decide("plan", [Effect.write(str(repo / "src/x.py"))], cwd=repo)
    s.publish(event_bus.Decision.from_decision(d, agent="plan", tool="Write", source="hook"))
    code, out, _ = guard("plan", "status", "--cwd", str(repo))
    assert code == 0
    assert "mode      plan" in out and "missing: not written yet" in out
    assert "DENY  plan Write" in out and "guard plan exit --approve" in out
    code, out, _ = guard("plan", "status", "--cwd", str(repo), "--json")
    data = json.loads(out)
    assert data["agent"] == "plan" and data["decisions"][0]["action"] == "deny"


# ---- guard mcp owns its session ----------------------------------------------------------


def test_a_failed_mcp_start_leaves_no_session(repo: Path) -> None:
    for server in ("nonexistent-server", str(repo / "no-such-server")):
        proc = guard_proc("mcp", "--", server, cwd=repo)
        assert proc.returncode == 2 and "cannot start the MCP server" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (repo / ".openoxide").exists()


def test_a_server_that_cannot_be_executed_leaves_no_session(repo: Path) -> None:
    """The command exists and is executable but the kernel refuses to run it."""
    bad = repo / "server"
    bad.write_bytes(b"\x7fELF garbage")
    bad.chmod(0o755)
    proc = guard_proc("mcp", "--", str(bad), cwd=repo)
    assert proc.returncode == 2 and "cannot start the MCP server" in proc.stderr
    assert not (repo / ".openoxide").exists(), list((repo / ".openoxide").rglob("*"))


def _proxy(repo: Path, log: Path) -> subprocess.Popen[bytes]:
    server = [sys.executable, str(SCRIPTED_SERVER), str(log)]
    return subprocess.Popen(
        [sys.executable, "-m", "guard", "mcp", "--", *server],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _only_session(repo: Path) -> Session | None:
    found = Session.list_all(repo) if sessions_dir(repo).exists() else []
    return found[0] if len(found) == 1 else None


def test_the_mcp_proxy_session_ends_when_the_proxy_exits(repo: Path, tmp_path: Path) -> None:
    proxy = _proxy(repo, tmp_path / "log")
    try:
        wait_for(lambda: _only_session(repo) is not None, "the proxy's session")
        s = _only_session(repo)
        assert s is not None and s.owner is not None and s.owner.pid == proxy.pid
        assert s.status == "open" and s.mode is Mode.PLAN
        found = deciding_session(repo)
        assert found is not None and found[0].id == s.id
        assert proxy.stdin is not None
        proxy.stdin.close()  # the client goes away: the proxy exits
        proxy.wait(timeout=60)
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
    ended = Session.load(s.id, repo)
    assert ended.status == "ended" and ended.end_reason and "proxy" in ended.end_reason
    assert deciding_session(repo) is None


def _hook(repo: Path, tool: str, tool_input: dict[str, object]) -> dict[str, object]:
    """The real hook process, fed what Claude Code sends in acceptEdits (the host's build)."""
    payload = {
        "session_id": "cc-orphan", "transcript_path": "/dev/null", "cwd": str(repo),
        "permission_mode": "acceptEdits", "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_1",
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "guard.hooks", "claude-code"], input=json.dumps(payload),
        capture_output=True, text=True, cwd=repo, timeout=120, check=False,
        env={**os.environ, "GUARD_HOOK_DAEMON": "0"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)["hookSpecificOutput"]
    return out


def test_a_killed_proxy_plan_session_stays_in_force(repo: Path, tmp_path: Path) -> None:
    """Attack (issue 28): kill the `guard mcp` proxy that owns the plan session (SIGKILL,
    as a lowered resource limit would), then write src/ through the host's hook in
    acceptEdits. The session is orphaned and still plan: the write is refused, and the
    refusal says the owner is gone and how to go on. Only the user's action changes it."""
    app = repo / "src" / "app.py"
    app.parent.mkdir()
    app.write_text("print('hello')\n")
    proxy = _proxy(repo, tmp_path / "log")
    try:
        wait_for(lambda: _only_session(repo) is not None, "the proxy's session")
        os.kill(proxy.pid, signal.SIGKILL)
        proxy.wait(timeout=60)
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
    s = _only_session(repo)
    assert s is not None and s.state == "open" and s.status == "orphaned"
    write = {"file_path": str(app), "content": "pwned\n"}
    out = _hook(repo, "Write", write)
    reason = str(out["permissionDecisionReason"])
    assert out["permissionDecision"] == "deny", out
    assert f"its owner guard mcp (pid {proxy.pid}) is gone" in reason
    for step in ("guard plan exit --approve", "guard session end", "guard plan resume"):
        assert f"`{step}" in reason, (step, reason)
    assert app.read_text() == "print('hello')\n"
    _, out_list, _ = guard("session", "list", "--cwd", str(repo))
    assert "orphaned" in out_list and "guard mcp" in out_list
    doctor = guard_proc("doctor", "--json", cwd=repo)
    assert f"guard plan resume {s.id}" in doctor.stdout, doctor.stdout

    code, said, _ = guard("plan", "resume", s.id, "--cwd", str(repo))
    assert code == 0 and "resumed; you own it now (plan mode)" in said
    assert Session.load(s.id, repo).status == "open"
    out = _hook(repo, "Write", write)
    assert out["permissionDecision"] == "deny" and "is gone" not in str(out), out
    code, _, _ = guard("session", "end", s.id, "--cwd", str(repo))
    assert code == 0
    assert _hook(repo, "Write", write)["permissionDecision"] == "allow", "the user ended it"


def test_plan_refusal_names_the_sessions_plan_file(repo: Path) -> None:
    from guard.planning.runtime import plan_refusal

    s = Session.start(repo, "plan", title="Add caching")
    text = plan_refusal(repo / ".")
    assert f"You are in plan mode (guard session {s.id}): write your plan to {s.plan_path}" in text
    assert "guard plan exit --approve" in text
    s.end("done")
    text = plan_refusal(repo)
    assert f"write your plan to a markdown file directly in {repo}/.openoxide/plans" in text
    (s.directory / "pinned").write_text("not an id!\n")
    assert "You are in plan mode" in plan_refusal(repo), "never raises"


def test_doctor_says_which_agent_the_hooks_use_and_why(repo: Path) -> None:
    from guard.setup.doctor import agent_check

    s = Session.start(repo, "plan", title="x")
    check = agent_check(repo)
    assert check.status == "ok" and check.detail.startswith("plan: plan mode of session")
    assert s.id in check.detail
    s.end("done")
    assert "host's permission mode" in agent_check(repo).detail


def test_two_concurrent_proxy_sessions_never_cross(repo: Path, tmp_path: Path) -> None:
    """Two `guard mcp` proxies in one worktree: each refusal names its own session's plan
    file, and approving one session's plan leaves the other in plan mode."""
    sys.path.insert(0, str(SCRIPTED_SERVER.parent))
    from rawclient import RawClient  # type: ignore[import-not-found]

    log = tmp_path / "server.jsonl"
    server = [sys.executable, str(SCRIPTED_SERVER), str(log)]
    a = RawClient([], repo, server)
    b = RawClient([], repo, server)
    try:
        a.initialize()
        b.initialize()
        by_pid = {s.owner.pid: s for s in Session.list_all(repo) if s.owner}
        sa, sb = by_pid[a.proc.pid], by_pid[b.proc.pid]
        assert sa.id != sb.id and sa.plan_path != sb.plan_path
        for client, own, other in ((a, sa, sb), (b, sb, sa)):
            answer = client.call("run_shell", {"command": "echo x > src/x"})
            text = json.dumps(answer)
            assert answer["result"]["isError"] is True
            assert f"write your plan to {own.plan_path}" in text
            assert str(other.plan_path) not in text
        assert sa.plan_path
        Path(sa.plan_path).write_text("# plan a\n")
        code, _, err = guard("plan", "exit", "--approve", "--session", sa.id, "--cwd", str(repo))
        assert code == 0, err
        assert sa.refresh().mode is Mode.BUILD and sb.refresh().mode is Mode.PLAN
    finally:
        a.close()
        b.close()
    assert {s.status for s in Session.list_all(repo)} == {"ended"}


# ---- one plan session per worktree (issue 32) ---------------------------------------------


def test_plan_start_twice_refuses_and_names_the_open_session(repo: Path) -> None:
    """Stacked sessions: a second `guard plan start` is refused and names the open one;
    --new sets the open one aside, and approving then ending the new one never brings
    the old one back: only `guard plan resume` does."""
    code, out, _ = guard("plan", "start", "First", "--cwd", str(repo), "--json")
    assert code == 0
    first = json.loads(out)["id"]
    code, _, err = guard("plan", "start", "Second", "--cwd", str(repo))
    assert code == 2 and f"plan mode is already on here: session {first} (First" in err
    assert "--new" in err and f"guard plan resume {first}" in err
    assert [s.id for s in Session.list_all(repo)] == [first], "nothing was started"

    code, out, _ = guard("plan", "start", "Second", "--new", "--cwd", str(repo), "--json")
    assert code == 0
    second = Session.load(json.loads(out)["id"], repo)
    assert Session.load(first, repo).status == "set-aside"
    found = deciding_session(repo)
    assert found is not None and found[0].id == second.id
    _, listed, _ = guard("session", "list", "--cwd", str(repo))
    assert "set-aside" in listed

    assert second.plan_path
    Path(second.plan_path).write_text("# plan\n")
    code, out, _ = guard("plan", "exit", "--approve", "--cwd", str(repo))
    assert code == 0 and "the hooks now use build" in out
    code, out, _ = guard("session", "end", second.id, "--cwd", str(repo))
    assert code == 0 and "host's permission mode" in out, "the older session stays aside"
    assert deciding_session(repo) is None
    code, out, _ = guard("plan", "status", "--cwd", str(repo))
    assert code == 0 and "none open here" in out

    code, out, _ = guard("plan", "resume", first, "--cwd", str(repo))
    assert code == 0 and "resumed; it decides again (plan mode)" in out
    assert current_mode(repo) == ("plan", Session.load(first, repo))


def test_session_start_sets_older_build_sessions_aside(repo: Path) -> None:
    code, a, _ = guard("session", "start", "--cwd", str(repo))
    code, b, _ = guard("session", "start", "--cwd", str(repo))
    assert code == 0
    assert Session.load(a.strip(), repo).status == "set-aside"
    Session.load(b.strip(), repo).end("done")
    assert deciding_session(repo) is None, "ending the newer one never revives the older"


def test_plan_status_and_show_without_a_session_report_the_state(repo: Path) -> None:
    code, out, err = guard("plan", "status", "--cwd", str(repo))
    assert code == 0, err
    assert "session   none open here" in out and "hooks     build" in out
    code, out, _ = guard("plan", "status", "--cwd", str(repo), "--json")
    assert code == 0 and json.loads(out)["session"] is None
    code, out, err = guard("plan", "show", "--cwd", str(repo))
    assert code == 0 and "no open session here" in out, err


def test_a_failed_plan_snapshot_never_blocks_plan_start(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan directory cannot be listed (EACCES): plan start still enters plan mode."""
    plans = repo / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    real = Path.iterdir

    def refuse(self: Path) -> Iterator[Path]:
        if self == plans:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", refuse)
    code, _, err = guard("plan", "start", "Snapshot", "--cwd", str(repo))
    assert code == 0, err
    found = current_mode(repo)
    assert found is not None and found[0] == "plan"
