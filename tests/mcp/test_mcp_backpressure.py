"""A client that floods a server which stopped reading: guard stops reading the client.

guard forwards each client message to the server without waiting for the
server's pipe to drain. The attack: a client (or a confused agent) keeps
writing calls while the server reads nothing, to make the proxy buffer them
without bound (memory) or lose some when it cannot keep up. Once the server's
pipe backs up, guard must stop reading the client, so that the kernel's pipe
blocks the client's writes; once the server reads again, every request must be
answered, exactly once. A real `guard mcp` with a real server process
(stalling_server.py) and a raw client (rawclient.py) writing non-blocking.
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections import Counter
from pathlib import Path

from fsserver import served_project
from rawclient import RawClient

STALLING = Path(__file__).with_name("stalling_server.py")

#: What the client may write before the test calls the proxy unbounded. guard holds at
#: most its buffer for the server (64 KiB past the full pipe) and one read of the client
#: (256 KiB), and the two pipes hold 64 KiB each: well under 1 MiB.
CAP = 32 << 20


def echo(msg_id: int, pad: str) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"pad": pad}},
    }
    return json.dumps(message).encode() + b"\n"


def test_a_client_flooding_a_stalled_server_is_paused_then_every_call_is_answered_once(
    tmp_path: Path,
) -> None:
    repo = served_project(tmp_path)
    log, go = tmp_path / "server-received.jsonl", tmp_path / "go"
    client = RawClient(
        ["--mode", "build"], repo, [sys.executable, str(STALLING), str(log), str(go)]
    )
    try:
        client.initialize()
        client.send(
            {
                "jsonrpc": "2.0",
                "id": "stall",
                "method": "tools/call",
                "params": {"name": "stall", "arguments": {}},
            }
        )
        assert client.proc.stdin is not None
        fd = client.proc.stdin.fileno()
        os.set_blocking(fd, False)
        pad = "x" * 4000
        ids: list[int] = []
        pending = b""
        accepted = 0
        while accepted < CAP:
            if not pending:
                ids.append(len(ids) + 1)
                pending = echo(ids[-1], pad)
            try:
                written = os.write(fd, pending)
            except BlockingIOError:
                # the pipe is full: does guard read more of it within 5 s?
                _, writable, _ = select.select([], [fd], [], 5.0)
                if not writable:
                    break
                continue
            accepted += written
            pending = pending[written:]
        assert accepted < CAP, "guard kept reading a client whose server reads nothing"

        go.touch()  # the server reads again: the rest goes through
        os.set_blocking(fd, True)
        if pending:
            os.write(fd, pending)
        answers: Counter[object] = Counter()
        while not all(answers[i] for i in ["stall", *ids]):
            message = client.receive(timeout=120)
            assert "method" not in message, message
            answers[message["id"]] += 1
            result = message["result"]
            assert result["isError"] is False, message
        assert set(answers) == {"stall", *ids}
        assert max(answers.values()) == 1, "a request was answered twice"
        forwarded = [
            json.loads(line)["id"]
            for line in log.read_text().splitlines()
            if json.loads(line).get("method") == "tools/call"
        ]
        assert forwarded == ["stall", *ids], "the calls reached the server out of order"
    finally:
        client.close()
