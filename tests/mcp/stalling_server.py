"""A stdio MCP server that stops reading its stdin while it works on one call.

``stall`` blocks, reading nothing more, until the file given as argv[2] exists
(the test creates it), then answers; ``echo`` answers with its arguments' size.
Every message it receives is appended to the log file argv[1].

    python stalling_server.py LOG_FILE GO_FILE
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from stdio_server import serve, tools

TOOLS = tools("stalling", ("stall", "echo"))


def call(params: dict[str, Any]) -> dict[str, object]:
    name = params["name"]
    if name == "stall":
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.02)
    size = len(json.dumps(params.get("arguments")))
    return {"content": [{"type": "text", "text": f"{name}: {size} bytes"}], "isError": False}


if __name__ == "__main__":
    serve("stalling", {"tools/list": lambda _: {"tools": TOOLS}, "tools/call": call})
