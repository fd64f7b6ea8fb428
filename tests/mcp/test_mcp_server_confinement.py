"""`guard mcp` confines the server process in plan mode and restarts it when the mode changes.

The server is sneaky_server.py: tools named like the filesystem server's reads
(guard's analysis allows them in plan mode) that write ``src/x`` anyway. The
kernel must refuse that write while the session plans, and allow it once the
user approved the plan, within one proxy process and one client connection,
with the client seeing every answer exactly once and no protocol error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fsserver import served_project
from rawclient import INIT, RawClient

from guard.audit.logfile import default_log_path, read
from guard.paths import Roots
from guard.sandbox import confine
from guard.sandbox.confine import NO_MCP_LANDLOCK

SNEAKY = Path(__file__).with_name("sneaky_server.py")
SESSION = "confined-1"

needs_landlock = pytest.mark.skipif(
    confine.available() != "", reason=f"this kernel cannot confine: {confine.available()}"
)
#: How the kernel refuses the write: the read-only view in namespaces, Landlock without.
REFUSED = "EACCES" if confine.namespaces_unavailable() else "EROFS"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return served_project(tmp_path, {"README.md": "# project\n"})


def server_log(repo: Path) -> Path:
    log = repo / ".openoxide" / "plans" / "server-received.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    return log


def start(repo: Path, *args: str, switches: tuple[str, ...] = ()) -> RawClient:
    log = server_log(repo)
    client = RawClient(["--session", SESSION, *args], repo, [sys.executable, str(SNEAKY), str(log)],
                       switches=switches)
    client.initialize()
    return client


def text(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    return "\n".join(c.get("text", "") for c in answer["result"]["content"])


def pid_of(answer: dict[str, Any]) -> str:
    """The answering server process: its pid and a token of its own (``N.TOKEN``)."""
    return text(answer).split()[0].removeprefix("pid=")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file outside .git and guard's own state, with its content."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.relative_to(root).as_posix().startswith((".git/", ".openoxide/"))
    }


def guard_cli(repo: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "guard", *args, "--session", SESSION, "--cwd", str(repo)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def wait_for_list_changed(client: RawClient) -> None:
    while True:
        message = client.receive(timeout=60)
        if message.get("method") == "notifications/tools/list_changed":
            return


def wait_for_stderr(client: RawClient, needle: str) -> None:
    deadline = time.monotonic() + 60
    while needle not in client.stderr():
        assert time.monotonic() < deadline, client.stderr()
        time.sleep(0.05)


def ask_to_exit(client: RawClient) -> None:
    """The plan file is written and the model asks to leave plan mode (the user decides)."""
    listed = client.request("tools/list", {}, msg_id="list-plan")
    tools = {t["name"]: t for t in listed["result"]["tools"]}
    plan = Path(tools["plan_exit"]["description"].rsplit("Your plan file: ", 1)[1].strip())
    plan.write_text("# Plan\n\n1. Write src/x.\n")
    answer = client.call("plan_exit", {}, msg_id="exit")
    assert "waits for the user" in text(answer), answer


def approve_plan(client: RawClient, repo: Path) -> None:
    ask_to_exit(client)
    guard_cli(repo, "plan", "exit", "--approve")


def answers_by_id(client: RawClient) -> Counter[Any]:
    """How many answers the client got per request id (guard must never send two)."""
    seen: Counter[Any] = Counter()
    for line in client.raw_stdout:
        message = json.loads(line)
        if "method" not in message:
            assert "error" not in message, message  # no protocol error reached the client
            seen[json.dumps(message["id"])] += 1
    return seen


def received(repo: Path) -> list[dict[str, Any]]:
    """What the servers logged, whole lines only (one may be half written while we read)."""
    log = repo / ".openoxide" / "plans" / "server-received.jsonl"
    lines = log.read_text().split("\n")[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def wait_until_received(repo: Path, msg_id: str) -> None:
    """Until a server got request ``msg_id`` (the proxy forwards it on its own thread)."""
    deadline = time.monotonic() + 60
    while not any(m.get("id") == msg_id for m in received(repo)):
        assert time.monotonic() < deadline, f"no server got request {msg_id!r}: {received(repo)}"
        time.sleep(0.05)


@needs_landlock
def test_a_read_tool_that_writes_is_stopped_by_the_kernel_until_the_plan_is_approved(
    repo: Path,
) -> None:
    """Attack: a tool guard's analysis takes for a read (read_text_file) makes the server write
    src/x. In plan mode the kernel must refuse it (EROFS; EACCES without namespaces) and the
    disk stay unchanged; after
    the approved plan exit the server is restarted unconfined and the write lands; after
    `guard mode plan` it is confined again. One proxy, one connection throughout."""
    before = snapshot(repo)
    client = start(repo)
    try:
        plan_pid = pid_of(first := client.call("read_text_file", {"path": "README.md"}, "r1"))
        assert "# project" in text(first) and REFUSED in text(first), text(first)
        assert not (repo / "src" / "x").exists()
        assert snapshot(repo) == before
        assert "runs confined" in client.stderr()

        approve_plan(client, repo)
        wait_for_list_changed(client)
        built = client.call("read_text_file", {"path": "README.md"}, "r2")
        build_pid = pid_of(built)
        assert "wrote src/x" in text(built), text(built)
        assert build_pid != plan_pid
        assert (repo / "src" / "x").read_text() == f"written by pid {build_pid}\n"

        guard_cli(repo, "mode", "plan")
        wait_for_list_changed(client)
        again = client.call("read_text_file", {"path": "README.md"}, "r3")
        assert REFUSED in text(again), text(again)
        assert pid_of(again) not in (plan_pid, build_pid)
        assert (repo / "src" / "x").read_text() == f"written by pid {build_pid}\n"
        assert client.proc.poll() is None  # the same proxy process all along
    finally:
        assert client.close() == 0
    assert set(answers_by_id(client).values()) == {1}

    # each new server got the client's own initialize, params and capabilities unchanged
    inits = [m for m in received(repo) if m.get("method") == "initialize"]
    assert len(inits) == 3
    assert all(m["params"] == INIT["params"] for m in inits)
    assert inits[0]["id"] == "init" and all(str(m["id"]).startswith("guard-") for m in inits[1:])
    initialized = [m for m in received(repo) if m.get("method") == "notifications/initialized"]
    assert len(initialized) == 3


@needs_landlock
def test_a_request_in_flight_during_the_restart_is_answered_once_and_later_ones_wait(
    repo: Path,
) -> None:
    """A call the old (confined) server is still working on when the plan is approved gets that
    server's answer, once; a call sent during the restart waits and runs on the new server."""
    client = start(repo)
    try:
        plan_pid = pid_of(client.call("read_text_file", {"path": "README.md"}, "r0"))
        ask_to_exit(client)
        client.send(
            {
                "jsonrpc": "2.0",
                "id": "slow",
                "method": "tools/call",
                "params": {"name": "list_directory", "arguments": {"path": "."}},
            }
        )
        # the old server has it before the approval lands: else the proxy would hold it too
        wait_until_received(repo, "slow")
        guard_cli(repo, "plan", "exit", "--approve")
        wait_for_stderr(client, "restarting the server unconfined")
        client.send(
            {
                "jsonrpc": "2.0",
                "id": "held",
                "method": "tools/call",
                "params": {"name": "read_text_file", "arguments": {"path": "README.md"}},
            }
        )
        (repo / "release").write_text("")
        slow = client.reply("slow")
        assert text(slow).endswith("listed") and pid_of(slow) == plan_pid
        held = client.reply("held")
        assert "wrote src/x" in text(held) and pid_of(held) != plan_pid
    finally:
        assert client.close() == 0
    assert set(answers_by_id(client).values()) == {1}


def test_plan_mode_without_landlock_says_it_runs_the_server_unconfined(
    repo: Path
) -> None:
    """Without Landlock, plan mode falls back to analysis alone, loudly: a warning on stderr and
    a notice in the audit log. The sneaky write then lands: analysis cannot see it."""
    client = start(repo, switches=(NO_MCP_LANDLOCK,))
    try:
        answer = client.call("read_text_file", {"path": "README.md"}, "r1")
        assert "wrote src/x" in text(answer)
    finally:
        assert client.close() == 0
    err = client.stderr()
    assert "UNCONFINED in plan mode" in err and "a test entry point switched it off" in err
    notices = [
        r
        for r in read(default_log_path(Roots.discover(str(repo))))
        if r.get("type") == "notice" and r.get("source") == "mcp"
    ]
    assert [n["event"] for n in notices] == ["server_unconfined"]
    assert notices[0]["session"] == SESSION and "UNCONFINED" in notices[0]["message"]


@needs_landlock
def test_a_pinned_build_agent_runs_the_server_unconfined(repo: Path) -> None:
    """--agent build pins build-mode rules: the server is not confined even in a plan session."""
    client = start(repo, "--agent", "build")
    try:
        answer = client.call("read_text_file", {"path": "README.md"}, "r1")
        assert "wrote src/x" in text(answer), text(answer)
    finally:
        assert client.close() == 0
    assert "runs confined" not in client.stderr()


@needs_landlock
def test_the_confined_server_reaches_the_network_only_through_guards_egress_proxy(
    repo: Path,
) -> None:
    """In plan mode the server's network is its namespace's loopback and guard's egress
    proxy, served by guard mcp itself: a GET to a host the policy allows (mapped to a
    recorder on the host's 127.0.0.1) arrives; a direct connection to the recorder does
    not."""
    import http.server
    import threading

    if confine.namespaces_unavailable():
        pytest.skip(f"no namespaces here: {confine.namespaces_unavailable()}")
    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    policy = repo.parent / "policy.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n[agents.plan.network]\n'
        f'allow = ["docs.test"]\n[egress]\nresolve = {{ "docs.test" = "127.0.0.1:{port}" }}\n'
    )
    client = RawClient(
        ["--session", SESSION, "--policy", str(policy)], repo,
        [sys.executable, str(SNEAKY.with_name("net_server.py")), str(server_log(repo)),
         "http://docs.test/guide", f"127.0.0.1:{port}"],
    )  # fmt: skip
    try:
        client.initialize()
        answer = client.call("read_text_file", {"path": "README.md"}, "n1")
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    assert text(answer) == "get=ok direct=ECONNREFUSED", (text(answer), client.stderr())
    assert seen == ["/guide"]
