"""What passes between the MCP client and server once guard has checked it.

This module holds the proxy's plumbing both ways, as the base of
:class:`guard.mcp.proxy.McpProxy`: guard's own answers to the client's open requests
(sent once each), forwarding a checked request or message to the server (guard's
canonical rendering, never the client's bytes), and the server's lines on their way
to the client (read as strictly as the client's, answers matched to the requests in
flight, an answer whose verdict record could not be written withheld).

It does not hold what a client message is and who handles it (the router,
:mod:`guard.mcp.proxy`), nor deciding, asking and recording verdicts
(:mod:`guard.mcp.call_checks`); framing and the read loops are :mod:`guard.mcp.jsonrpc`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import unquote, urlsplit

from guard.mcp import wire
from guard.mcp.bridge import PlanningBridge
from guard.mcp.gate_side import McpStats
from guard.mcp.jsonrpc import INTERNAL_ERROR, Json, Withheld, error, tool_error
from guard.mcp.server import ServerPipe
from guard.mcp.wire import Id

__all__ = ["MAX_SERVER_REQUESTS", "Forwarding", "unrecorded"]

#: The server's requests to the client that may wait for an answer at once.
MAX_SERVER_REQUESTS = 65536


class Forwarding:
    """The proxy's answers to the client, what it forwards to the server, and the
    server's lines to the client (the state is set by :class:`McpProxy`)."""

    _log: Callable[[str], None]
    cwd: str
    pipe: ServerPipe
    bridge: PlanningBridge
    stats: McpStats
    relative_base_mismatch: str | None
    _pending: dict[Any, tuple[str, int]]
    _server_requests: dict[Id, str]
    _open: set[Id]
    _unrecorded: dict[Any, str]

    def log(self, text: str) -> None:
        self._log(f"guard mcp: {text}")

    # -- guard's answers to the client, and what it forwards to the server ----------------

    def _internal_error(self, msg_id: Id | None, exc: BaseException) -> None:
        """A bug while handling a client message: said, and its request (still open)
        answered with an error; never forwarded."""
        self.log(f"internal error while handling a client message: {exc!r}")
        if msg_id is not None and msg_id in self._open:
            self._reply(
                msg_id,
                error(msg_id, INTERNAL_ERROR, f"guard could not check this request ({exc!r});"
                      " it was not forwarded"),
            )

    def _reply(
        self, msg_id: Id, message: Json, *, record: int = 0, withheld: Withheld | None = None
    ) -> None:
        """guard's own answer to the client's request ``msg_id``: sent once, only while the
        request is open (neither answered nor forwarded)."""
        if msg_id not in self._open:
            self.log(f"internal error: a second answer to request {msg_id!r} was not sent")
            return
        self._open.discard(msg_id)
        self.pipe.send_client(message, record=record, withheld=withheld)

    def _spawn_for(self, msg_id: Id, coro: Coroutine[Any, Any, None]) -> None:
        """Run the handling of request ``msg_id`` as a task: an error in it answers the
        request (if still open) instead of leaving it unanswered."""

        async def run() -> None:
            try:
                await coro
            except Exception as exc:
                self._internal_error(msg_id, exc)

        self.pipe.spawn(run())

    def _send_request(self, msg_id: Id, method: str, record: int, message: Json) -> None:
        """Forward the client's request, checked: its answer is the server's from now on
        (or an error should the server die)."""
        self._open.discard(msg_id)
        self._pending[msg_id] = (method, record)
        self._forward(message)

    def _forward(self, message: Json) -> None:
        """Send the server guard's canonical rendering of a checked message."""
        try:
            self.pipe.send_server(wire.render(message))
            self.stats.forwarded += 1
        except (ConnectionError, OSError) as exc:
            self.log(f"cannot forward to the server: {exc}")

    # -- server -> client ------------------------------------------------------------------

    def _from_server(self, line: bytes) -> None:
        """A line of the server's. The client (the host) parses it again, so it is read as
        strictly as the client's lines (:mod:`guard.mcp.wire`), and the client gets guard's
        canonical rendering of what guard read, never the server's bytes. No line ends the
        proxy."""
        try:
            self._from_server_line(line)
        except Exception as exc:
            self.log(f"internal error while handling a server message: {exc!r}")

    def _from_server_line(self, line: bytes) -> None:
        try:
            message = wire.read(line)
        except wire.Refused as refused:
            self.log(f"dropped a server line ({refused.reason}): {line[:200]!r}")
            msg_id = refused.msg_id
            if refused.kind == "response" and msg_id is not None and msg_id in self._pending:
                self._server_answer_refused(msg_id, refused.reason)
            return
        kind = wire.kind_of(message)
        if kind == "response":
            msg_id = message["id"]
            if msg_id not in self._pending:
                self.log(f"dropped a server answer to no request in flight (id {msg_id!r})")
                return
            method, record = self._pending.pop(msg_id)
            if self._unrecorded:
                why = self._unrecorded.pop(msg_id, None)
                if why is not None:
                    self.pipe.send_client(_withheld(msg_id, method)(why))
                    return
            if "result" in message:
                if method == "initialize":
                    self._patch_initialize(message["result"])
                elif method == "tools/list":
                    self._patch_tools_list(message["result"])
            if record:  # the answer of a checked call: sent once its record is written
                self.pipe.send_client(message, record=record, withheld=_withheld(msg_id, method))
            else:
                self.pipe.send_client(message)
            return
        if kind == "request":
            msg_id = message["id"]
            if msg_id in self._server_requests or self.pipe.owns_id(msg_id):
                self.log(f"dropped a server request reusing the id {msg_id!r} of another")
                return
            if len(self._server_requests) >= MAX_SERVER_REQUESTS:
                self.log(f"dropped a server request: {MAX_SERVER_REQUESTS} are unanswered")
                return
            self._server_requests[msg_id] = message["method"]
        self.pipe.send_client(message)

    def _server_answer_refused(self, msg_id: Id, reason: str) -> None:
        """The server's answer to a request in flight could not be read: the client gets an
        error in its place (each request gets exactly one answer)."""
        method, record = self._pending.pop(msg_id)
        self._unrecorded.pop(msg_id, None)
        text = f"{method}: guard refused the server's answer ({reason}); it was not passed on"
        self.pipe.send_client(error(msg_id, INTERNAL_ERROR, text), record=record)

    def server_replaced(self) -> None:
        """The server was restarted: answers to the old one's requests go nowhere."""
        self._server_requests.clear()

    def _note_roots(self, result: Any) -> None:
        """The client's roots become the server's directories: check them like its argv."""
        roots = result.get("roots") if isinstance(result, dict) else None
        first = roots[0] if isinstance(roots, list) and roots else None
        uri = first.get("uri") if isinstance(first, dict) else None
        if not isinstance(uri, str) or urlsplit(uri).scheme != "file":
            return
        root = os.path.realpath(unquote(urlsplit(uri).path))
        if root != os.path.realpath(self.cwd):
            self.relative_base_mismatch = (
                f"the server may resolve it against {root} (the client's first root) while"
                f" guard resolves it against {os.path.realpath(self.cwd)}; start guard with"
                f" --cwd {root}"
            )
            self.log(f"warning: relative paths will be refused: {self.relative_base_mismatch}")
        else:
            self.relative_base_mismatch = None

    def _patch_initialize(self, result: Json) -> None:
        caps = result.get("capabilities")
        if not isinstance(caps, dict):
            caps = result["capabilities"] = {}
        tools = caps.get("tools")
        if not isinstance(tools, dict):
            tools = caps["tools"] = {}
        tools["listChanged"] = True
        version = result.get("protocolVersion")
        self.log(f"server speaks MCP {version}; passed through to the client")

    def _patch_tools_list(self, result: Json) -> None:
        self.bridge.patch_tools_list(result)


def unrecorded(why: str) -> str:
    return f"guard could not record its verdict ({why}), so the answer is withheld"


def _withheld(msg_id: Any, method: str) -> Callable[[str], Json]:
    """What replaces the server's answer to a forwarded call whose record could not be
    written: the call ran, but the client does not get its result."""

    def make(why: str) -> Json:
        text = f"{method}: the server ran the call, but {unrecorded(why)}"
        if method == "tools/call":
            return tool_error(msg_id, text)
        return error(msg_id, INTERNAL_ERROR, text)

    return make
