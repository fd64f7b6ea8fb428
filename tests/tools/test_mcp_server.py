"""The MCP dialect table against the real @modelcontextprotocol/server-filesystem.

The server is asked for its tools over stdio (JSON-RPC, newline-delimited); every tool it
offers must be known to guard, and every path argument in its input schema must show up
as an effect, so no filesystem tool of the server can slip past as an unknown tool or
with an unchecked path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.analysis import effects_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from fsserver import server_binary

from guard.analysis.mcp import TOOLS


def _server() -> str:
    try:
        return str(server_binary())
    except RuntimeError as exc:
        pytest.fail(f"the real MCP filesystem server is needed: {exc}")


def _tools(tmp_path: Path) -> list[dict[str, Any]]:
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "guard-tests", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    proc = subprocess.Popen([_server(), str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for m in msgs:
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
        for line in proc.stdout:
            reply = json.loads(line)
            if reply.get("id") == 2:
                tools: list[dict[str, Any]] = reply["result"]["tools"]
                return tools
        raise AssertionError("the server closed stdout without answering tools/list")
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server_tools(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _tools(tmp_path_factory.mktemp("mcp-root"))


def test_every_server_tool_is_known_to_guard(server_tools: list[dict[str, Any]]) -> None:
    names = {t["name"] for t in server_tools}
    assert len(names) >= 10
    assert names <= set(TOOLS), f"unknown to guard: {sorted(names - set(TOOLS))}"


def test_every_path_argument_becomes_an_effect(server_tools: list[dict[str, Any]]) -> None:
    """Attack: a filesystem tool whose path argument guard would not check."""
    for t in server_tools:
        props: dict[str, Any] = t["inputSchema"].get("properties", {})
        args: dict[str, Any] = {}
        paths: list[str] = []
        for name, schema in props.items():
            if name in ("path", "source", "destination"):
                args[name] = f"dir/{t['name']}-{name}"
                paths.append(args[name])
            elif name == "paths":
                args[name] = [f"dir/{t['name']}-a", f"dir/{t['name']}-b"]
                paths += args[name]
            elif name in t["inputSchema"].get("required", []):
                args[name] = [] if schema.get("type") == "array" else "x"
        effects = effects_for("mcp", t["name"], args, None)
        targets = {e.target for e in effects if e.kind.value != "tool"}
        assert set(paths) <= targets, (t["name"], paths, targets)
        writes = {e.target for e in effects if e.kind.value in ("write", "delete")}
        if t["name"] in ("write_file", "edit_file", "create_directory", "move_file"):
            assert writes, f"{t['name']} must yield a write or delete"
        else:
            assert not writes, f"{t['name']} reads only, got writes {writes}"
