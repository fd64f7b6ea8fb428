"""A raw newline-delimited JSON-RPC client of `guard mcp`, for protocol edge cases.

It writes exactly the bytes a test gives it (malformed lines, batches...) and
reads the proxy's stdout line by line, so a test sees everything the proxy
emits on stdout, and in what order.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-test-client", "version": "1"},
    },
}


def _guard(switches: tuple[str, ...]) -> list[str]:
    if not switches:
        return [sys.executable, "-m", "guard"]
    switched = Path(__file__).resolve().parent.parent / "switched.py"
    return [sys.executable, str(switched), *(f"--{s}" for s in switches), "guard"]


class RawClient:
    def __init__(
        self, args: list[str], cwd: Path, server: list[str], argv: list[str] | None = None,
        switches: tuple[str, ...] = (),
    ) -> None:
        """Run ``guard mcp ARGS -- SERVER`` in ``cwd`` (or ``guard ARGV`` when given); with
        ``switches``, through the test-only entry point that turns them on."""
        self.stderr_path = cwd.parent / f"guard-mcp-{id(self)}.stderr"
        self._err = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [*_guard(switches), *(argv or ["mcp", *args, "--", *server])],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.raw_stdout: list[bytes] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.raw_stdout.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode())

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise EOFError(f"guard mcp closed stdout; stderr:\n{self.stderr()}")
        message: dict[str, Any] = json.loads(line)
        return message

    def request(self, method: str, params: Any = None, msg_id: Any = 1) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.reply(msg_id)

    def reply(self, msg_id: Any) -> dict[str, Any]:
        """The next message answering ``msg_id`` (notifications in between are kept aside)."""
        while True:
            message = self.receive()
            if message.get("id") == msg_id and "method" not in message:
                return message

    def initialize(self) -> dict[str, Any]:
        self.send(INIT)
        answer = self.reply("init")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def call(self, name: str, arguments: Any, msg_id: Any = 7) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments}, msg_id)

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        if not self._err.closed:
            self._err.close()
        return code

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text(errors="replace")
