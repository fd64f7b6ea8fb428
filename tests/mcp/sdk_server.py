"""An MCP server built on the official Python SDK (``mcp`` 2.x, its low-level ``Server``).

It reads its stdin the SDK's way: a text stream with universal newlines, so a bare
carriage return ends a line, and invalid UTF-8 becomes U+FFFD. Its tools act for
real, relative to its working directory:

* ``read_file {path}``: returns the file's text;
* ``write_file {path, content}``: writes the file (parents created).

``resources/read`` of a ``file:`` URI returns the file, the URI parsed by pydantic's
``AnyUrl`` as servers of SDK 1.x got it (a WHATWG parser: ``\\`` is ``/``, ``..`` and
``%2e%2e`` are resolved). Every request handled is appended to the log file argv[1]
(its method and params as the SDK validated them), so tests see what the server
acted on.

    python sdk_server.py LOG_FILE
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import unquote

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import AnyUrl

LOG = sys.argv[1]


def note(method: str, params: Any) -> None:
    with open(LOG, "a") as log:
        log.write(json.dumps({"method": method, "params": params}) + "\n")


def text(value: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=value)], is_error=error)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    path = {"type": "string"}
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="read_file", input_schema={"type": "object", "properties": {"path": path}}
            ),
            types.Tool(
                name="write_file",
                input_schema={"type": "object", "properties": {"path": path, "content": path}},
            ),
        ]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    note("tools/call", {"name": params.name, "arguments": args})
    path = str(args.get("path", ""))
    try:
        if params.name == "read_file":
            with open(path) as f:
                return text(f.read())
        if params.name == "write_file":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w") as f:
                f.write(str(args.get("content", "")))
            return text(f"wrote {path}")
    except OSError as exc:
        return text(f"{exc.strerror}: {path}", error=True)
    return text(f"no tool {params.name}", error=True)


async def read_resource(
    ctx: Any, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    note("resources/read", {"uri": params.uri})
    url = AnyUrl(params.uri)
    path = unquote(url.path or "")
    with open(path) as f:
        body = f.read()
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=params.uri, text=body)]
    )


async def main() -> None:
    server: Server[Any] = Server(
        "sdk-test-server",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_read_resource=read_resource,
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
