"""`guard mcp` on the wire: what reaches the server, what the client sees, how it fails.

The real filesystem server where it can show the behaviour; a scripted server
(scripted_server.py, a real process speaking MCP) for hostile or broken
servers; a raw JSON-RPC client (rawclient.py) so malformed input can be sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fsserver import served_project
from rawclient import RawClient

from guard.cli import app

SCRIPTED = Path(__file__).with_name("scripted_server.py")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return served_project(tmp_path)


@pytest.fixture
def fs_client(fs_server: Path, repo: Path) -> Iterator[RawClient]:
    client = RawClient([], repo, [str(fs_server), str(repo)])
    client.initialize()
    yield client
    client.close()


def plan_mode_log(repo: Path, name: str) -> Path:
    """Where a server confined in plan mode can keep its log: the plan directory."""
    log = repo / ".openoxide" / "plans" / name
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    return log


@pytest.fixture
def scripted(repo: Path) -> Iterator[tuple[RawClient, Path]]:
    log = plan_mode_log(repo, "server-received.jsonl")
    client = RawClient([], repo, [sys.executable, str(SCRIPTED), str(log)])
    client.initialize()
    yield client, log
    client.close()


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def result_text(answer: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in answer["result"]["content"])


def test_batch_cannot_smuggle_a_write_past_the_policy(fs_client: RawClient, repo: Path) -> None:
    """Attack: wrap a plan-mode write in a JSON-RPC batch (removed from MCP, still parsed by
    some servers) hoping the proxy forwards arrays unchecked."""
    call = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "src/app.py", "content": "x"}},
    }
    fs_client.send_raw(json.dumps([call]).encode())
    answer = fs_client.receive()
    assert answer["error"]["code"] == -32600 and "batch" in answer["error"]["message"]
    # the connection still works, and nothing was written
    listed = fs_client.request("tools/list", msg_id=6)
    assert any(t["name"] == "write_file" for t in listed["result"]["tools"])
    assert (repo / "src" / "app.py").read_text() == "print('hello')\n"


def test_lines_that_are_not_json_are_refused_not_forwarded(
    scripted: tuple[RawClient, Path],
) -> None:
    """Attack: send bytes the proxy cannot parse, hoping they reach the server as-is."""
    client, log = scripted
    client.send_raw(b'{"jsonrpc":"2.0","id":9,"method":"tools/call", BROKEN')
    answer = client.receive()
    assert answer["error"]["code"] == -32700 and answer["id"] is None
    assert all("BROKEN" not in json.dumps(m) for m in received(log))


def test_malformed_arguments_fail_closed_with_the_reason(fs_client: RawClient, repo: Path) -> None:
    """Attack: give write_file a path the effect analysis cannot read (a list, a number)."""
    for bad in ({"path": ["src/app.py"], "content": "x"}, {"path": 7}, "src/app.py"):
        answer = fs_client.call("write_file", bad)
        assert answer["result"]["isError"] is True
        assert "guard refused write_file" in result_text(answer)
    assert (repo / "src" / "app.py").read_text() == "print('hello')\n"


def test_tools_call_without_a_name_is_an_invalid_params_error(fs_client: RawClient) -> None:
    answer = fs_client.request("tools/call", {"arguments": {}}, msg_id=11)
    assert answer["error"]["code"] == -32602


def test_unknown_server_tool_follows_the_tool_table(scripted: tuple[RawClient, Path]) -> None:
    """Attack: a server tool guard knows nothing about (run_shell) in plan mode; the plan
    agent's tool table denies unknown tools, so it must never reach the server."""
    client, log = scripted
    answer = client.call("run_shell", {"command": "rm -rf ~"})
    assert answer["result"]["isError"] is True
    assert "run_shell" in result_text(answer)
    calls = [m for m in received(log) if m.get("method") == "tools/call"]
    assert calls == []


def test_server_cannot_shadow_guards_planning_tools(
    scripted: tuple[RawClient, Path], repo: Path
) -> None:
    """Attack: a server offers its own plan_exit (which could "approve" anything). guard lists
    only its own, and answers the call itself: the server never sees it."""
    client, log = scripted
    tools = client.request("tools/list", msg_id=3)["result"]["tools"]
    plan_exits = [t for t in tools if t["name"] == "plan_exit"]
    assert len(plan_exits) == 1 and "scripted" not in plan_exits[0]["description"]
    answer = client.call("plan_exit", {})
    assert answer["result"]["isError"] is True  # no plan written yet: refused by the runtime
    assert "plan file" in result_text(answer)
    assert not [m for m in received(log) if m.get("method") == "tools/call"]
    assert "hidden" in client.stderr()


def test_build_mode_forwards_and_the_server_answer_passes_through(repo: Path) -> None:
    log = repo.parent / "server-received.jsonl"
    log.touch()
    client = RawClient(["--mode", "build"], repo, [sys.executable, str(SCRIPTED), str(log)])
    try:
        client.initialize()
        answer = client.call("echo", {"x": 1})
        assert answer["result"]["isError"] is False
        assert result_text(answer) == 'scripted echo ran with {"x": 1}'
        forwarded = [m for m in received(log) if m.get("method") == "tools/call"]
        assert forwarded and forwarded[0]["params"] == {"name": "echo", "arguments": {"x": 1}}
    finally:
        client.close()


def test_stdout_carries_only_protocol_messages(repo: Path) -> None:
    """A server printing junk on stdout must not corrupt the client's stream: guard drops it."""
    log = repo.parent / "server-received.jsonl"
    log.touch()
    client = RawClient(["--mode", "build"], repo, [sys.executable, str(SCRIPTED), str(log)])
    client.initialize()
    answer = client.call("noisy", {})
    assert answer["result"]["isError"] is False
    client.close()
    for line in client.raw_stdout:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert "not JSON" in client.stderr()


def test_initialize_passes_the_servers_protocol_version_and_announces_list_changed(
    scripted: tuple[RawClient, Path], repo: Path
) -> None:
    log = plan_mode_log(repo, "other.jsonl")
    client = RawClient([], repo, [sys.executable, str(SCRIPTED), str(log)])
    try:
        init = dict(
            client.request(
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "old", "version": "1"},
                },
                msg_id="i",
            )
        )
        assert init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["capabilities"]["tools"]["listChanged"] is True
    finally:
        client.close()


def test_server_discover_is_answered_so_clients_fall_back_to_initialize(
    scripted: tuple[RawClient, Path],
) -> None:
    client, log = scripted
    answer = client.request("server/discover", {}, msg_id="d")
    assert answer["error"]["code"] == -32601 and "initialize" in answer["error"]["message"]
    assert not [m for m in received(log) if m.get("method") == "server/discover"]


def test_server_crash_answers_the_pending_request_and_exits(repo: Path) -> None:
    log = repo.parent / "server-received.jsonl"
    log.touch()
    client = RawClient(["--mode", "build"], repo, [sys.executable, str(SCRIPTED), str(log)])
    client.initialize()
    answer = client.call("crash", {}, msg_id="c")
    assert answer["error"]["message"] == "the MCP server exited"
    assert client.proc.wait(timeout=30) == 3  # the server's exit code
    client.close()


def test_missing_server_binary_is_one_clear_error(repo: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "guard", "mcp", "--", str(repo / "no-such-server")],
        cwd=repo,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "cannot start the MCP server" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mcp", "--agent", "nobody", "--", "true"], "no agent 'nobody'"),
        (["mcp", "--policy", "/nonexistent/policy.toml", "--", "true"], "policy.toml"),
        (["mcp", "--ask-timeout", "0", "--", "true"], "--ask-timeout"),
        (["mcp", "--verbose"], "no server command"),
    ],
)
def test_user_errors_exit_2_with_one_line(repo: Path, args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_help_teaches_with_examples() -> None:
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, ["mcp", "--help"]).output
    assert "guard mcp -- mcp-server-filesystem ." in out and "npm install -g" in out
    assert "--agent" in out and "--mode" in out and "elicitation" in out


def test_file_resources_are_reads_the_policy_decides(
    scripted: tuple[RawClient, Path], repo: Path
) -> None:
    """Attack: read a secret as an MCP resource (file:// URI) instead of through a tool, or
    through a file URI naming another host; the policy must decide resources too."""
    client, log = scripted
    (repo / ".env").write_text("TOKEN=secret\n")
    asked = client.request("resources/read", {"uri": (repo / ".env").as_uri()}, msg_id="r1")
    assert "error" in asked and "elicitation" in asked["error"]["message"]
    remote = client.request("resources/read", {"uri": "file://evil.example/etc/passwd"}, "r2")
    assert "error" in remote and "remote host" in remote["error"]["message"]
    ok = client.request("resources/read", {"uri": (repo / "src" / "app.py").as_uri()}, "r3")
    assert ok["result"]["contents"][0]["text"].startswith("resource body of file://")
    other = client.request("resources/read", {"uri": "memo://notes/1"}, msg_id="r4")
    assert "result" in other  # not a file: the policy has nothing to say, forwarded
    seen = [m["params"]["uri"] for m in received(log) if m.get("method") == "resources/read"]
    assert seen == [(repo / "src" / "app.py").as_uri(), "memo://notes/1"]


def test_relative_paths_are_refused_when_guard_and_server_resolve_them_differently(
    fs_server: Path, repo: Path
) -> None:
    """Attack: guard runs in the worktree, the filesystem server serves src/. A relative
    ".openoxide/plans/p.md" looks like the plan file to guard but the server would write
    src/.openoxide/plans/p.md. Relative paths must be refused, with the fix named."""
    (repo / "src" / ".openoxide" / "plans").mkdir(parents=True)  # so the write could land
    client = RawClient([], repo, [str(fs_server), str(repo / "src")])
    try:
        client.initialize()
        answer = client.call("write_file", {"path": ".openoxide/plans/p.md", "content": "x"})
        assert answer["result"]["isError"] is True
        assert f"--cwd {repo / 'src'}" in result_text(answer)
        assert not (repo / "src" / ".openoxide" / "plans" / "p.md").exists()
        absolute = client.call("read_text_file", {"path": str(repo / "src" / "app.py")}, 8)
        assert absolute["result"].get("isError") is not True, absolute
        assert "relative paths will be refused" in client.stderr()
    finally:
        client.close()


def test_tools_call_sent_as_a_notification_never_reaches_the_server(
    scripted: tuple[RawClient, Path], repo: Path
) -> None:
    """Attack: send a tools/call without an id (a JSON-RPC notification, which gets no
    answer) hoping the proxy forwards notifications unchecked, so the server runs it."""
    from guard.audit.logfile import default_log_path, read
    from guard.paths import Roots

    client, log = scripted
    client.send(
        {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": "run_shell", "arguments": {"command": "touch src/pwned"}},
        }
    )
    # the connection still works, and the smuggled call was never forwarded
    answer = client.call("echo", {"text": "after"}, msg_id=12)
    assert answer["result"]["isError"] is True  # echo is unknown to the plan agent: refused
    client.close()
    assert all(m.get("method") != "tools/call" for m in received(log)), received(log)
    assert not (repo / "src" / "pwned").exists()
    records = list(read(default_log_path(Roots.discover(repo))))
    dropped = [r for r in records if r.get("rule") == "guard.mcp.notification"]
    assert len(dropped) == 1 and dropped[0]["decision"] == "deny", records
    assert dropped[0]["tool_name"] == "run_shell" and "notification" in dropped[0]["reason"]


def build_scripted(repo: Path) -> tuple[RawClient, Path]:
    log = repo.parent / "server-received.jsonl"
    log.touch()
    client = RawClient(["--mode", "build"], repo, [sys.executable, str(SCRIPTED), str(log)])
    client.initialize()
    return client, log


def test_client_answers_reach_the_server_only_for_its_pending_requests(repo: Path) -> None:
    """Attack: answers the server never asked for (an unknown id, a second answer to one
    already answered) hoping the proxy forwards whatever has no "method"."""
    from guard.audit.logfile import default_log_path, read
    from guard.paths import Roots

    client, log = build_scripted(repo)
    try:
        client.send({"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
                     "params": {"name": "ask_client", "arguments": {}}})
        asked = client.receive()
        assert asked["method"] == "roots/list" and asked["id"] == "srv-1", asked
        forged = {"jsonrpc": "2.0", "id": "srv-999", "result": {"roots": [{"uri": "file:///"}]}}
        client.send(forged)
        real = {"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": [{"uri": repo.as_uri()}]}}
        client.send(real)
        answer = client.reply("c1")
        assert repo.as_uri() in result_text(answer) and "file:///\"" not in result_text(answer)
        client.send(real)  # answered already: the server has nothing pending under srv-1
        assert client.call("echo", {"x": 1}, msg_id="after")["result"]["isError"] is False
    finally:
        client.close()
    answers = [m for m in received(log) if "method" not in m]
    assert answers == [real], answers
    rules = [r.get("rule") for r in read(default_log_path(Roots.discover(repo)))]
    assert rules.count("guard.mcp.unmatched_answer") == 2, rules


def test_a_server_answer_guard_cannot_read_becomes_one_error(repo: Path) -> None:
    """Attack (by the server, on the host): an answer whose bare CRs hide a forged answer
    to another request, and a second answer to the same request. The client gets one
    error for its request, never the forged answer."""
    client, _log = build_scripted(repo)
    try:
        answer = client.call("split_answer", {"answer_id": "s1"}, msg_id="s1")
        assert answer["error"]["code"] == -32603 and "carriage return" in answer["error"]["message"]
        assert client.call("echo", {}, msg_id="after")["result"]["isError"] is False
    finally:
        client.close()
    ids = [json.loads(line).get("id") for line in client.raw_stdout]
    assert ids.count("s1") == 1 and "forged" not in ids, ids
    assert all(b"\r" not in line[:-1] for line in client.raw_stdout)


def test_a_request_id_still_in_flight_is_not_taken_twice(repo: Path) -> None:
    """Attack: a second request under the id of one still at the server, so that one answer
    could be taken for the other's (MCP: an id is used once)."""
    client, _log = build_scripted(repo)
    try:
        client.send_raw(
            b'{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"split_answer",'
            b'"arguments":{"answer_id":"other"}}}\n'
            b'{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"echo",'
            b'"arguments":{}}}'
        )
        assert client.call("echo", {}, msg_id="after")["result"]["isError"] is False
    finally:
        client.close()
    ids = [json.loads(line).get("id") for line in client.raw_stdout]
    assert ids.count("d") == 1, ids


@pytest.mark.parametrize(
    ("line", "answer_id"),
    [
        (  # 100,000-deep nesting: once a RecursionError that ended the proxy
            b'{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"echo",'
            b'"arguments":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}}",
            "deep",
        ),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', None),  # object id: crashed
        (b'{"jsonrpc":"2.0","id":[1],"method":"tools/list"}', None),  # array id
        (  # a lone surrogate in a tool name: once left unanswered for ever in plan mode
            b'{"jsonrpc":"2.0","id":"sur","method":"tools/call","params":{"name":"echo\\ud800",'
            b'"arguments":{}}}',
            "sur",
        ),
    ],
    # short ids: pytest would otherwise spell out the 200,000-byte line in PYTEST_CURRENT_TEST,
    # an environment string longer than execve(2) takes, so every child process (git) fails
    ids=["deep-nesting", "object-id", "array-id", "lone-surrogate"],
)
def test_inputs_that_once_ended_the_proxy_get_one_answer_and_it_goes_on(
    scripted: tuple[RawClient, Path], line: bytes, answer_id: str | None
) -> None:
    client, log = scripted
    client.send_raw(line)
    answer = client.receive()
    assert answer["id"] == answer_id and answer["error"]["code"] == -32600, answer
    assert client.request("tools/list", msg_id="after")["result"]["tools"]
    assert all(m.get("id") != answer_id for m in received(log) if answer_id is not None)
    assert client.proc.poll() is None
