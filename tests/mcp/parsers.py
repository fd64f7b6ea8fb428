"""Three real MCP servers whose parsers disagree with guard's, and with each other.

* ``node``: the real filesystem server (``@modelcontextprotocol/server-filesystem``, pinned
  in fsserver.py); JSON.parse, lines split at LF, paths through ``path.resolve`` (``..``
  removed as text) then ``realpath``; no resources.
* ``python-sdk``: sdk_server.py on the official Python SDK (``mcp`` 2.x, pinned in
  pyproject.toml): universal newlines (a bare CR ends a line), pydantic's decoder,
  file URIs through ``AnyUrl`` (WHATWG).
* ``go``: goserver/main.go on Go's standard library, built here with ``go build`` (no
  module download; Debian 12's ``golang-go``, Go 1.19, installed by scripts/test.sh;
  ``encoding/json`` has matched keys this way throughout Go 1): keys matched without
  regard to case, the last of two winning; paths through ``filepath.Clean``.

What pins each parser's behaviour is tests/e2e/test_mcp_parsers.py's
``test_each_attack_works_on_its_bare_server``: should a new version read differently,
it fails, and the attacks must be revisited.

Each runs with the worktree as its working directory and takes absolute paths; its
log (the requests it acted on) is kept in the plan directory, where it may write
even while confined for plan mode.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SDK_SERVER = HERE / "sdk_server.py"
GO_SOURCE = HERE / "goserver" / "main.go"
NAMES = ("node", "python-sdk", "go")


@dataclass(frozen=True)
class Server:
    name: str
    argv: list[str]
    read_tool: str
    log: Path

    def acted_on(self) -> list[str]:
        """The lines of the server's log: the requests it acted on (empty for node)."""
        if not self.log.exists():
            return []
        return self.log.read_text().splitlines()


def build_go_server(out_dir: Path) -> Path:
    """``go build`` of goserver/main.go, offline (GOPROXY=off, GO111MODULE=off). Raises
    RuntimeError when go is missing or the build fails."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go is not on PATH (Debian: apt-get install golang-go)")
    binary = out_dir / "goserver"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GOPATH": str(out_dir / "gopath"),
        "GOCACHE": str(out_dir / "gocache"),
        "CGO_ENABLED": "0",
    }
    done = subprocess.run(
        [go, "build", "-o", str(binary), str(GO_SOURCE)],
        cwd=GO_SOURCE.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 or not binary.exists():
        raise RuntimeError(f"go build failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return binary


def server(name: str, repo: Path, fs_server: Path, go_server: Path) -> Server:
    log = repo / ".openoxide" / "plans" / f"{name}-acted.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if name == "node":
        return Server(name, [str(fs_server), str(repo)], "read_text_file", log)
    if name == "python-sdk":
        return Server(name, [sys.executable, str(SDK_SERVER), str(log)], "read_file", log)
    return Server(name, [str(go_server), str(log)], "read_file", log)


class Direct:
    """A server started without guard, fed raw lines: what each attack does to it bare."""

    def __init__(self, srv: Server, cwd: Path) -> None:
        import queue
        import threading

        self.proc = subprocess.Popen(
            srv.argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.seen: list[dict[str, object]] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def answer(self, msg_id: object, timeout: float = 30) -> dict[str, object]:
        """The server's answer to ``msg_id`` (others are kept for later calls)."""
        import json
        import time

        deadline = time.monotonic() + timeout
        while True:
            for message in self.seen:
                if message.get("id") == msg_id:
                    return message
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.seen.append(message)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
