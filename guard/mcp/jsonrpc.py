"""JSON-RPC over stdio for the MCP proxy: framing, the two read loops, requests of our own.

Wire format: newline-delimited JSON-RPC 2.0, one message per line, on the
client's stdin/stdout and on a server child's stdin/stdout. :class:`Pipe`
knows nothing of MCP methods: it moves lines, starts and stops the server,
and correlates the requests guard itself sends to the client (elicitation)
with their answers. What to do with each line is the router's
(:mod:`guard.mcp.proxy`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import stat
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import IO, Any, Protocol

from guard.mcp.wire import render

Json = dict[str, Any]

MAX_LINE = 256 * 1024 * 1024
SHUTDOWN_GRACE = 5.0

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def dumps(message: Json) -> bytes:
    """The canonical line of ``message`` (:func:`guard.mcp.wire.render`)."""
    return render(message)


def line_body(line: bytes) -> bytes:
    """A line without its end: the newline is gone already; one CR before it goes too
    (CR LF). Any other CR stays, for :func:`guard.mcp.wire.read` to refuse."""
    return line[:-1] if line.endswith(b"\r") else line


def error(msg_id: Any, code: int, text: str) -> Json:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}}


def tool_error(msg_id: Any, text: str) -> Json:
    """A ``tools/call`` result the model sees as a failed tool run."""
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "result": {"content": [{"type": "text", "text": text}], "isError": True},
    }


class RequestFailed(Exception):
    """A request guard sent to the client got no usable answer."""


class Records(Protocol):
    """Where the verdict records are: written yet? (see :class:`guard.mcp.gate_side.McpSink`)."""

    def ready(self, seq: int) -> bool:
        """True when record ``seq`` is written (or failed); else the owner is woken later."""
        ...

    def failure(self, seq: int) -> str | None:
        """Why record ``seq`` could not be written, or None."""
        ...


#: Makes the message that replaces a held one whose record could not be written.
Withheld = Callable[[str], Json]


async def stop_process(proc: asyncio.subprocess.Process, *, close_stdin: bool = True) -> int | None:
    """Close ``proc``'s stdin, wait, then SIGTERM, wait, then SIGKILL (each wait
    :data:`SHUTDOWN_GRACE` seconds); its exit status."""
    if close_stdin and proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), SHUTDOWN_GRACE)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), SHUTDOWN_GRACE)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    return proc.returncode


class _ClientLines(asyncio.Protocol):
    """The client's stdin (a pipe or a socket), handed on in lines from ``data_received``:
    the lines of one read together, handled before the loop turns again.

    :attr:`ended` is done at end of input, after a line over :data:`MAX_LINE` bytes
    (logged), or with the exception a handler raised (a bug: it ends the proxy).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        handle: Callable[[list[bytes]], None],
        log: Callable[[str], None],
    ) -> None:
        self.ended: asyncio.Future[None] = loop.create_future()
        self._handle = handle
        self._log = log
        self._partial: list[bytes] = []  # a line not ended yet, in pieces
        self._size = 0
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def _stop(self, failure: BaseException | None = None) -> None:
        self._partial, self._size = [], 0
        if not self.ended.done():
            if failure is not None:
                self.ended.set_exception(failure)
            else:
                self.ended.set_result(None)
        if self._transport is not None:
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        if self.ended.done():
            return
        lines: list[bytes] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            line = data[start:end]
            if self._partial:  # the rest of a line that came in pieces
                line, self._partial, self._size = b"".join([*self._partial, line]), [], 0
            if line.strip():
                lines.append(line_body(line))
            start = end + 1
        if start < len(data):
            self._partial.append(data[start:])
            self._size += len(data) - start
        if lines:
            try:
                self._handle(lines)
            except Exception as exc:  # a bug in the router: ends the proxy
                self._stop(exc)
                return
        if self._size > MAX_LINE:
            self._log(f"client sent a line over {MAX_LINE} bytes; stopping")
            self._stop()

    def eof_received(self) -> bool | None:
        if not self.ended.done():
            partial, self._partial, self._size = b"".join(self._partial), [], 0
            try:
                if partial.strip():
                    self._handle([line_body(partial)])
            except Exception as exc:
                self._stop(exc)
                return None
            self._stop()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended.done():
            if exc is not None:
                self._log(f"client input failed: {exc}")
            self.eof_received()


class Pipe:
    """One client on ``client_in``/``client_out``, one server child started from ``argv``.

    The server's side (:meth:`start`, :meth:`_server_loop`, :meth:`stop_server`) is
    :class:`guard.mcp.server.ServerPipe`'s: confined in plan mode, restarted with the mode.
    """

    def __init__(
        self,
        argv: list[str],
        cwd: str,
        client_in: IO[bytes],
        client_out: IO[bytes],
        log: Callable[[str], None],
    ) -> None:
        self.argv = argv
        self.cwd = cwd
        self.client_in = client_in
        self.client_out = client_out
        self.log = log
        self.server: asyncio.subprocess.Process | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        # guard's own requests to the client: ids nobody else can know or guess
        self._prefix = f"guard-{secrets.token_hex(16)}-"
        self._next_id = 0
        self._waiting: dict[Any, asyncio.Future[Json]] = {}
        #: The verdict records that answers wait for (None: nothing waits).
        self.records: Records | None = None
        self._held: deque[tuple[int, Json | bytes, Withheld | None]] = deque()
        self.stopping: asyncio.Event | None = None
        self._client_transport: asyncio.ReadTransport | None = None
        #: Done when reading the client resumes (None: not paused).
        self._client_paused: asyncio.Future[None] | None = None

    # -- sending ---------------------------------------------------------------------------

    def send_client(
        self, message: Json | bytes, *, record: int = 0, withheld: Withheld | None = None
    ) -> None:
        """Send one message to the client, in order.

        A message that answers a checked call names its verdict record
        (``record``, its number): it waits until that record is written, and
        every message after it waits behind it. If the record could not be
        written, ``withheld(reason)`` is sent instead (default: the message).
        """
        if self._held or (record and self.records is not None and not self.records.ready(record)):
            self._held.append((record, message, withheld))
            return
        self._write_client(self._checked(record, message, withheld))

    def _checked(
        self, record: int, message: Json | bytes, withheld: Withheld | None
    ) -> Json | bytes:
        if not record or self.records is None or withheld is None:
            return message
        failed = self.records.failure(record)
        return message if failed is None else withheld(failed)

    def _write_client(self, message: Json | bytes) -> None:
        data = message if isinstance(message, bytes) else dumps(message)
        self.client_out.write(data + b"\n")
        self.client_out.flush()

    def release(self, *, final: bool = False) -> None:
        """Send the held messages whose records are written, in order (on the loop).

        ``final`` (shutdown, after the records were flushed): send them all; one
        whose record is still not written is withheld.
        """
        while self._held:
            record, message, withheld = self._held[0]
            if record and self.records is not None and not self.records.ready(record):
                if not final:
                    return
                self._held.popleft()
                if withheld is not None:
                    self._write_client(withheld("guard is exiting and its record is not written"))
                continue
            self._held.popleft()
            self._write_client(self._checked(record, message, withheld))

    def send_server(self, message: Json | bytes) -> None:
        """Write one message to the server, without waiting for the pipe to drain: should
        the server stop reading, its pipe's buffer fills and reading the client pauses until
        it drains (:meth:`pause_client`, called by the server's protocol)."""
        data = message if isinstance(message, bytes) else dumps(message)
        proc = self.server
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            raise ConnectionError("the server is not running")
        proc.stdin.write(data + b"\n")

    def pause_client(self, until: Callable[[], Awaitable[object]]) -> None:
        """Read no more of the client until ``until()`` is done (the server's pipe, backed up,
        has drained or closed): the lines it sends wait in the kernel's pipe, not in guard."""
        if self._client_paused is not None:
            return
        assert self.loop is not None
        self._client_paused = self.loop.create_future()
        if self._client_transport is not None:
            self._client_transport.pause_reading()
        self.spawn(self._resume_client(until))

    async def _resume_client(self, until: Callable[[], Awaitable[object]]) -> None:
        try:
            with contextlib.suppress(Exception):
                await until()
        finally:
            paused, self._client_paused = self._client_paused, None
            if paused is not None and not paused.done():
                paused.set_result(None)
            transport = self._client_transport
            if transport is not None and not transport.is_closing():
                transport.resume_reading()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- guard's own requests to the client ------------------------------------------------

    async def request_client(self, method: str, params: Json, timeout: float) -> Json:
        """Send a request to the client and wait for its result. Raises RequestFailed."""
        self._next_id += 1
        req_id = f"{self._prefix}{self._next_id}"
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self._waiting[req_id] = future
        self.send_client({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
        try:
            answer = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise RequestFailed(f"no answer within {timeout:g} s") from None
        finally:
            self._waiting.pop(req_id, None)
        if "error" in answer:
            err = answer["error"]
            text = err.get("message") if isinstance(err, dict) else err
            raise RequestFailed(f"the client could not answer: {text}")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise RequestFailed("the client's answer has no result")
        return result

    def request_client_from_thread(self, method: str, params: Json, timeout: float) -> Json:
        assert self.loop is not None
        coro = self.request_client(method, params, timeout)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def owns_id(self, msg_id: object) -> bool:
        """Whether ``msg_id`` is of guard's own requests to the client."""
        return isinstance(msg_id, str) and msg_id.startswith(self._prefix)

    def take_answer(self, message: Json) -> bool:
        """Deliver the client's answer to one of guard's requests; False if it is not one."""
        msg_id = message.get("id")
        if message.get("method") is not None or msg_id not in self._waiting:
            return False
        future = self._waiting.pop(msg_id)
        if not future.done():
            future.set_result(message)
        return True

    # -- running ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the server child. Raises OSError. (:class:`guard.mcp.server.ServerPipe`)"""
        raise NotImplementedError

    async def serve(
        self,
        from_client: Callable[[list[bytes]], None],
        from_server: Callable[[bytes], None],
    ) -> bool:
        """Pump lines both ways until one side ends or :attr:`stopping` is set; True when the
        server ended first.

        ``from_client`` gets the client's lines as they come, several at once when they
        came together (one read), and handles them before the loop turns.
        """
        assert self.loop is not None
        self.stopping = asyncio.Event()
        client_task = asyncio.ensure_future(self._client(from_client))
        server_task = asyncio.ensure_future(self._server_loop(from_server))
        stop_task = asyncio.ensure_future(self.stopping.wait())
        done, _ = await asyncio.wait(
            {client_task, server_task, stop_task}, return_when=asyncio.FIRST_COMPLETED
        )
        for task in done:
            failed = task.exception()
            if failed is not None:
                self.log(f"internal error: {failed!r}")
        for task in (client_task, server_task, stop_task):
            if task not in done:
                self.tasks.add(task)  # cancelled with the rest at close()
        return server_task in done

    async def _client(self, handle: Callable[[list[bytes]], None]) -> None:
        """Read the client's lines: on the loop when stdin is a pipe or a socket (handled
        from the pipe's ``data_received``: no reader task to wake per message), else on a
        reader thread (a file, a terminal)."""
        try:
            mode = os.fstat(self.client_in.fileno()).st_mode
        except (OSError, ValueError, AttributeError):
            mode = 0
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            assert self.loop is not None
            lines = _ClientLines(self.loop, handle, self.log)
            transport, _ = await self.loop.connect_read_pipe(lambda: lines, self.client_in)
            self._client_transport = transport
            try:
                await lines.ended
            finally:
                self._client_transport = None
                transport.close()
            return
        client_queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        reader_thread = threading.Thread(
            target=self._read_client, args=(client_queue, self.loop), daemon=True
        )
        reader_thread.start()
        await self._client_loop(client_queue, handle)

    def _read_client(
        self, queue: asyncio.Queue[bytes | None], loop: asyncio.AbstractEventLoop
    ) -> None:
        try:
            for line in iter(self.client_in.readline, b""):
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except (OSError, ValueError) as exc:
            failure = f"client input failed: {exc}"
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.log, failure)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, None)

    async def _client_loop(
        self,
        queue: asyncio.Queue[bytes | None],
        handle: Callable[[list[bytes]], None],
    ) -> None:
        while True:
            paused = self._client_paused
            if paused is not None:
                await paused
            line = await queue.get()
            if line is None:
                return
            if line.strip():
                handle([line_body(line[:-1] if line.endswith(b"\n") else line)])

    async def _server_loop(self, handle: Callable[[bytes], None]) -> None:
        """Hand each line of the server's to ``handle`` until it ends. (``ServerPipe``)"""
        raise NotImplementedError

    async def stop_server(self, server_finished: bool) -> int | None:
        """Stop the server child; its exit status. (``ServerPipe``)"""
        raise NotImplementedError

    def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
