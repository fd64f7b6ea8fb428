"""The MCP server's stdout, read line by line as it arrives.

:class:`Lines` is the protocol of the server process: it cuts the server's stdout
into lines and hands each to a handler as soon as it is read, and says when the
stdout ended (or why it was cut: a line over :data:`~guard.mcp.jsonrpc.MAX_LINE`).
:class:`Stdout` puts the reads of the stdout pipe straight onto it. This module does
not start, restart or stop servers, nor route what they say: that is
:mod:`guard.mcp.server`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from guard.mcp.jsonrpc import MAX_LINE, line_body


class Lines(asyncio.subprocess.SubprocessStreamProtocol):
    """The server's stdout, handed on line by line as it arrives: no reader task to wake
    and no loop turn between the server's answer and the router (it is called from the
    pipe's ``data_received``). Lines that come before a handler is set wait for it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=MAX_LINE, loop=loop)
        self.ended: asyncio.Future[str] = loop.create_future()  # "" or why it was cut
        self._handler: Callable[[bytes], None] | None = None
        self._early: list[bytes] = []
        self._partial: list[bytes] = []  # a line not ended yet, in pieces
        self._size = 0
        self._process: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert isinstance(transport, asyncio.SubprocessTransport)
        self._process = transport

    #: Called when the server's stdin backs up (the pipe is full and guard's buffer for it
    #: passes the high-water mark): the router stops reading the client until it drains.
    on_backlog: Callable[[], None] | None = None

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.on_backlog is not None:
            self.on_backlog()

    def attach(self, handler: Callable[[bytes], None]) -> None:
        self._handler = handler
        early, self._early = self._early, []
        for line in early:
            handler(line)

    def _line(self, line: bytes) -> None:
        if not line.strip():
            return
        if self._handler is None:
            self._early.append(line)
        else:
            self._handler(line)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if fd != 1:
            super().pipe_data_received(fd, data)
            return
        if self.ended.done():
            return
        assert isinstance(data, bytes)
        start = 0
        try:
            while (end := data.find(b"\n", start)) >= 0:
                line = data[start:end]
                if self._partial:  # the rest of a line that came in pieces
                    line, self._partial, self._size = b"".join([*self._partial, line]), [], 0
                self._line(line_body(line))
                start = end + 1
        except Exception as exc:  # a bug in the router: ends the proxy, as a reader task would
            self._partial, self._size = [], 0
            if not self.ended.done():
                self.ended.set_exception(exc)
            return
        if start < len(data):
            self._partial.append(data[start:])
            self._size += len(data) - start
        if self._size > MAX_LINE:
            self._partial, self._size = [], 0
            self.ended.set_result(f"server sent a line over {MAX_LINE} bytes; stopping it")
            if self._process is not None:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1 and not self.ended.done():
            partial, self._partial, self._size = b"".join(self._partial), [], 0
            try:
                self._line(line_body(partial))
            except Exception as failed:
                self.ended.set_exception(failed)
            if not self.ended.done():
                self.ended.set_result("")
        super().pipe_connection_lost(fd, exc)


class Stdout(asyncio.Protocol):
    """The protocol of the server's stdout pipe: hands what it reads straight to
    :class:`Lines` (the subprocess transport would defer each read to the next loop
    turn); the end of the pipe still goes through the subprocess transport (``inner``),
    after every read, so the process's bookkeeping is unchanged."""

    def __init__(self, inner: asyncio.BaseProtocol, lines: Lines) -> None:
        self.inner = inner
        self.lines = lines

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.lines.pipe_data_received(1, data)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)
