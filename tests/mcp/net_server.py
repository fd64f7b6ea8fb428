"""A scripted stdio MCP server that tries the network when its read tool is called.

``python net_server.py LOG URL HOST:PORT``: ``read_text_file`` answers with what became
of a GET of URL (made by urllib, which follows the proxy variables the process got)
and of a direct TCP connection to HOST:PORT. Confined in plan mode, the first goes
through guard's egress proxy and the second reaches nothing.
"""

from __future__ import annotations

import errno
import socket
import sys
import urllib.request
from typing import Any

from stdio_server import serve, tools

TOOLS = tools("net", ("read_text_file",))


def attempt(fn: Any) -> str:
    try:
        return str(fn())
    except OSError as exc:
        err = exc.errno if exc.errno is not None else getattr(exc, "reason", exc).errno
        return errno.errorcode.get(err or 0, str(exc))


def answer(params: dict[str, Any]) -> dict[str, object]:
    url, target = sys.argv[2], sys.argv[3]
    host, port = target.rsplit(":", 1)
    got = attempt(lambda: urllib.request.urlopen(url, timeout=30).read().decode())
    direct = attempt(lambda: socket.create_connection((host, int(port)), timeout=5).close())
    return {"content": [{"type": "text", "text": f"get={got} direct={direct}"}]}


if __name__ == "__main__":
    serve("net", {"tools/list": lambda _: {"tools": TOOLS}, "tools/call": answer})
