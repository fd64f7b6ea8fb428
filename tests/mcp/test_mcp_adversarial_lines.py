"""Lines built to stall the proxy's reader: 10 MB of a string that never closes.

The attack: the proxy reads both sides on one event loop, so a line that takes its
reader quadratic time (a string of ``\\"`` never closed, nested deep enough that the
nesting check looks inside strings) freezes every other message, from the client or
the server. guard reads such a line once, refuses it, and goes on answering. The
deadlines here are minutes above the linear cost (well under a second per line): a
reader that backtracks takes hours on 10 MB.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fsserver import served_project
from rawclient import RawClient
from scripted_server import adversarial_line

from guard.mcp import wire

SCRIPTED = Path(__file__).with_name("scripted_server.py")
SIZE = 10 << 20
#: The proxy's peak memory may hold a few copies of the line (its pieces, the joined line,
#: its text), never one per quote.
PEAK_BOUND = 40 * SIZE
#: Each answer after an adversarial line: far above the linear cost on a busy machine.
DEADLINE = 120.0


@pytest.mark.parametrize(
    "line",
    [
        adversarial_line(SIZE, b'"id":7,"method":"tools/call"'),
        adversarial_line(SIZE, b'"id":7,"method":"tools/call"') + b"\r",  # salvaged at once
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":' + b"[" * 200
        + b'"' + b'\\"' * (SIZE // 2) + b"\\",  # ends in a lone backslash
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + b"[" * 200
        + b'"\\""' * (SIZE // 4),  # many closed strings, then none
    ],
    ids=["unclosed", "carriage-return", "lone-backslash", "many-strings"],
)
def test_a_10_mb_unclosed_string_is_refused_in_one_pass_keeping_its_id(
    line: bytes, tmp_path: Path
) -> None:
    """The wire reader on the line itself, in a process of its own (a regex holds the
    interpreter until it ends): refused (never read past the open string), as a request
    whose id was read, so the client gets its one answer."""
    given = tmp_path / "line"
    given.write_bytes(line)
    reader = (
        "import sys; from guard.mcp import wire\n"
        "try: wire.read(open(sys.argv[1], 'rb').read())\n"
        "except wire.Refused as r: print(r.kind, r.msg_id)\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", reader, str(given)], capture_output=True,
                              text=True, timeout=DEADLINE, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading a {len(line)} byte line took over {DEADLINE:g} s")
    assert done.stdout.split() == ["request", "7"]


def test_depth_skips_a_string_left_open_but_counts_what_comes_before_it() -> None:
    assert wire.depth(b"[" * 300 + b'"' + b'\\"[' * 1000) == 300
    assert wire.depth(b"[" * 300 + b'"\\"]"' + b"]" * 300) == 300
    assert wire.depth(b'"' + b"[" * 300 + b"\\") == 0


def _reply(client: RawClient, msg_id: object) -> dict[str, Any]:
    """The answer to ``msg_id``, each message awaited up to :data:`DEADLINE`."""
    while True:
        message = client.receive(timeout=DEADLINE)
        if message.get("id") == msg_id and "method" not in message:
            return message


def _peak_memory(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def test_the_proxy_answers_around_10_mb_adversarial_lines_from_the_client_and_the_server(
    tmp_path: Path,
) -> None:
    """A real `guard mcp` and a real server process: the client sends the line as a request
    (answered with an error, never forwarded), the server sends it as a notification
    (dropped); every other message is answered, within minutes, in bounded memory."""
    repo = served_project(tmp_path)
    log = tmp_path / "server-received.jsonl"
    log.touch()
    client = RawClient(["--mode", "build"], repo, [sys.executable, str(SCRIPTED), str(log)])
    try:
        client.initialize()
        started = time.monotonic()
        client.send_raw(adversarial_line(SIZE, b'"id":"big","method":"tools/call"'))
        client.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"after": "client"}}})
        refused = _reply(client, "big")
        assert refused["error"]["code"] == wire.INVALID_REQUEST
        assert "deeper" in refused["error"]["message"]
        answer = _reply(client, 8)
        text = answer["result"]["content"][0]["text"]
        assert text == 'scripted echo ran with {"after": "client"}'
        assert time.monotonic() - started < DEADLINE

        started = time.monotonic()
        client.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                     "params": {"name": "adversarial", "arguments": {"size": SIZE}}})
        answer = _reply(client, 9)
        assert answer["result"]["isError"] is False
        client.send({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"after": "server"}}})
        assert _reply(client, 10)["result"]["isError"] is False
        assert time.monotonic() - started < DEADLINE

        assert _peak_memory(client.proc.pid) < PEAK_BOUND
        forwarded = log.read_bytes()
        assert b"big" not in forwarded and len(forwarded) < SIZE  # never reached the server
        assert "dropped a server line" in client.stderr()
        assert all(len(line) < SIZE for line in client.raw_stdout)  # nor the client
    except BaseException:
        client.proc.kill()  # a proxy still stuck on the line is not waited for
        raise
    finally:
        client.close()
