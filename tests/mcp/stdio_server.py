"""The JSON-RPC skeleton of the scripted stdio MCP servers (scripted_server.py, sneaky_server.py).

A server script passes its name, its tools and one handler per method it
answers beyond ``initialize``; :func:`serve` logs every line it receives to the
log file given as argv[1], answers ``initialize`` (echoing the client's protocol
version), answers each request with its handler's result and any other method
with JSON-RPC error -32601. Notifications get no answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

#: params of a request -> its result
Handler = Callable[[dict[str, Any]], dict[str, object]]


def tools(server: str, names: tuple[str, ...]) -> list[dict[str, object]]:
    """``tools/list`` entries for tools that take any object."""
    return [
        {"name": name, "description": f"{server} {name}", "inputSchema": {"type": "object"}}
        for name in names
    ]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def open_log(server: str, *, optional: bool) -> IO[str] | None:
    """The log file argv[1], opened for appending; when ``optional``, one that cannot be
    opened (confined in plan mode) is said on stderr and not kept."""
    try:
        return open(sys.argv[1], "a")
    except OSError as exc:
        if not optional:
            raise
        print(f"{server} server: no log kept: {exc}", file=sys.stderr, flush=True)
        return None


def serve(server: str, handlers: Mapping[str, Handler], *, log_optional: bool = False) -> None:
    """Answer MCP requests on stdin until it closes (see the module's docstring)."""
    log = open_log(server, optional=log_optional)
    for line in sys.stdin:
        if log is not None:
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
        message = json.loads(line)
        method, msg_id = message.get("method"), message.get("id")
        if msg_id is None or method is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": server, "version": "1"},
            }
        elif method in handlers:
            try:
                result = handlers[method](params)
            except (KeyError, TypeError, AttributeError) as exc:  # odd params: an error answer
                failed = {"code": -32602, "message": repr(exc)}
                send({"jsonrpc": "2.0", "id": msg_id, "error": failed})
                continue
        else:
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": method}})
            continue
        send({"jsonrpc": "2.0", "id": msg_id, "result": result})
