"""The MCP server processes of ``guard mcp`` and their restarts when the session's mode changes.

While the proxy's agent is a plan-mode agent, the server process runs confined by
the kernel (how, and what happens where the kernel cannot confine it, is
:mod:`guard.mcp.launch`); in build mode it runs plainly.

When the session's mode changes so that the agent in force changes between a
plan-mode and a build-mode one (an approved ``plan_exit``, ``guard plan exit
--approve``, an approved ``plan_enter``), :class:`ServerPipe` restarts the
server, within the same proxy process and client connection:

1. requests and notifications the client sends from then on are **held** (in
   order; the client's answers to the old server's own requests still reach it);
2. requests the old server is working on are **drained**: each gets the old
   server's answer, or, past ``drain_grace`` seconds, an error saying it was not
   answered because of the restart (never both, never none);
3. the old server is stopped (stdin closed, then SIGTERM, then SIGKILL) and the
   new one started, confined or not as the new mode needs;
4. the client's own ``initialize`` (its params and capabilities, unchanged) is
   **replayed** to the new server under a guard id (the answer is guard's, never
   the client's), then ``notifications/initialized`` if the client had sent it;
5. the held messages go to the new server in the order they came, and the
   client is told ``notifications/tools/list_changed`` (guard advertises
   ``tools.listChanged`` to every client), so it lists the new server's tools.

A restart that fails (the helper cannot confine, the new server does not answer
``initialize``) ends the proxy as if the server had exited: in plan mode the
server never runs unconfined where the kernel could confine it.

This module holds the server processes and their restarts (:class:`ServerPipe`) and
what a restart needs of the router (:class:`Router`). How one server is started,
confined or not, is :mod:`guard.mcp.launch`; how its stdout is read is
:mod:`guard.mcp.stdout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import secrets
from collections.abc import Callable, Collection
from typing import IO, Any, Protocol

from guard.effects import GuardError
from guard.mcp.jsonrpc import Json, Pipe, dumps, stop_process
from guard.mcp.launch import Launch, Launcher, remove_tmpdir
from guard.mcp.stdout import Lines, Stdout
from guard.planning.session import Mode
from guard.sandbox.confine import read_status
from guard.sandbox.landlock import summary_lines

#: Seconds the new server has to answer the replayed ``initialize``.
INIT_TIMEOUT = 60.0
#: Seconds the old server has to answer what it is working on before a restart.
DRAIN_GRACE = 30.0


class Router(Protocol):
    """What a restart needs of the proxy's router (:class:`guard.mcp.proxy.McpProxy`)."""

    def in_flight(self) -> Collection[Any]:
        """Ids of the client's requests the server has not answered yet."""
        ...

    def cancel(self, ids: Collection[Any], reason: str) -> None:
        """Answer these requests with an error now; later answers to them are not sent."""
        ...

    def client_initialize(self) -> Json | None:
        """The params of the client's ``initialize``, or None before it sent one."""
        ...

    def client_initialized(self) -> bool:
        """Whether the client sent ``notifications/initialized``."""
        ...

    def tools_changed(self) -> None:
        """Tell the client its tool list may have changed."""
        ...

    def server_replaced(self) -> None:
        """The server in use is cut off: its requests to the client are void."""
        ...


class _Server:
    """One server process: the first, or one started by a restart."""

    def __init__(
        self, proc: asyncio.subprocess.Process, lines: Lines, launch: Launch, mode: Mode
    ) -> None:
        self.proc = proc
        self.lines = lines
        self.launch = launch
        self.mode = mode
        #: False once cut off by a restart: what it still says is dropped
        self.live = True
        #: set when its stdout ended and it exited
        self.ended = asyncio.Event()
        #: guard's own requests to it (the replayed initialize), by id
        self.answers: dict[str, asyncio.Future[Json]] = {}

    @property
    def what(self) -> str:
        return f"pid {self.proc.pid}, {'confined' if self.launch.confined else 'unconfined'}"


class ServerPipe(Pipe):
    """:class:`~guard.mcp.jsonrpc.Pipe` whose server runs confined in plan mode and is
    restarted when the mode changes (see the module docstring)."""

    def __init__(
        self,
        argv: list[str],
        cwd: str,
        client_in: IO[bytes],
        client_out: IO[bytes],
        log: Callable[[str], None],
        *,
        launcher: Launcher,
        mode: Callable[[], Mode],
        drain_grace: float = DRAIN_GRACE,
    ) -> None:
        super().__init__(argv, cwd, client_in, client_out, log)
        self.launcher = launcher
        self.mode = mode
        self.drain_grace = drain_grace
        self.router: Router | None = None
        self.current: _Server | None = None
        self.restarts = 0
        self._servers: list[_Server] = []
        self._handle: Callable[[bytes], None] | None = None
        self._lost: asyncio.Future[str] | None = None
        self._restart_held: list[bytes] | None = None
        self._switch: asyncio.Task[None] | None = None
        self._want: Mode | None = None
        self._closing = False
        self._failure: str | None = None

    def attach(self, router: Router) -> None:
        self.router = router

    @property
    def confined(self) -> bool:
        return self.current is not None and self.current.launch.confined

    # -- starting one server ---------------------------------------------------------------

    async def start(self) -> None:
        """Start the server for the current mode. Raises OSError (nothing left running)."""
        self.loop = asyncio.get_running_loop()
        self._lost = self.loop.create_future()
        self.current = await self._spawn(self.mode())
        self.server = self.current.proc

    async def _spawn(self, mode: Mode) -> _Server:
        r, w = os.pipe()
        try:
            try:
                launch = self.launcher.launch(mode, w)
            except GuardError as exc:
                raise OSError(errno.EPERM, f"{exc}; the server was NOT started") from None
            loop = asyncio.get_running_loop()
            try:
                transport, lines = await loop.subprocess_exec(
                    lambda: Lines(loop),
                    *launch.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=None,
                    cwd=self.cwd,
                    env=launch.env,
                    pass_fds=(w, *launch.pass_fds) if launch.confined else (),
                )
                proc = asyncio.subprocess.Process(transport, lines, loop)
                stdout = transport.get_pipe_transport(1)
                if stdout is not None:  # earlier reads were queued on the loop: they come first
                    stdout.set_protocol(Stdout(stdout.get_protocol(), lines))
            except OSError:
                remove_tmpdir(launch.tmpdir, self.log)
                if launch.egress is not None:
                    launch.egress.close()
                raise
            if launch.egress is not None:
                launch.egress.started()
            os.close(w)
            w = -1
            reports = []
            if launch.confined:
                reports = await asyncio.to_thread(read_status, r)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
        server = _Server(proc, lines, launch, mode)
        lines.on_backlog = lambda: self._backlog(server)
        if launch.confined:
            failure = next((rep for rep in reports if not rep.get("ok")), None)
            restricted = next((rep for rep in reports if rep.get("stage") == "restricted"), None)
            served = failure is not None or restricted is None or launch.egress is None or (
                await asyncio.to_thread(launch.egress.serve)
            )  # fmt: skip
            if not served:
                failure = {"error": "the egress listener did not come"}
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            if failure is not None or restricted is None:
                await proc.wait()
                remove_tmpdir(launch.tmpdir, self.log)
                if launch.egress is not None:
                    launch.egress.close()
                why = failure.get("error") if failure else f"the helper exited ({proc.returncode})"
                raise OSError(
                    errno.EPERM,
                    f"the kernel confinement could not be applied: {why}; the server was NOT"
                    " started",
                )
            enforcement = restricted.get("enforcement")
            self._announce(server, enforcement if isinstance(enforcement, dict) else {})
        self._servers.append(server)
        return server

    def _announce(self, server: _Server, enforcement: dict[str, Any]) -> None:
        agent = self.launcher.agent_for(server.mode)
        self.log(f"the server (pid {server.proc.pid}) runs confined for agent {agent!r}:")
        for line in summary_lines(enforcement):
            self.log(f"  {line}")
        self.log("  writes allowed only in:")
        for root in server.launch.roots:
            self.log(f"    {root}")

    # -- reading -----------------------------------------------------------------------------

    async def _server_loop(self, handle: Callable[[bytes], None]) -> None:
        """Read the servers in turn until the one in use ends on its own or a restart fails."""
        assert self.current is not None and self._lost is not None
        self._handle = handle
        self._start_reader(self.current)
        why = await self._lost
        if why:
            self.log(why)

    def _start_reader(self, server: _Server) -> None:
        task = asyncio.ensure_future(self._read(server))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _read(self, server: _Server) -> None:
        """Hand the server's lines to the router as they come (:class:`Lines`) until its
        stdout ends, then wait for it to exit."""
        try:
            server.lines.attach(lambda line: self._deliver(server, line))
            why = await server.lines.ended
            if why:
                self.log(why)
            await server.proc.wait()
        finally:
            server.ended.set()
            lost = self._lost
            if (
                server is self.current
                and self._switch is None
                and not self._closing
                and lost is not None
                and not lost.done()
            ):
                lost.set_result(_exit_hint(server))

    def _deliver(self, server: _Server, line: bytes) -> None:
        if server.answers:  # only while guard waits for its own replayed initialize
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                message = json.loads(line)
                msg_id = message.get("id") if isinstance(message, dict) else None
                if isinstance(msg_id, str) and "method" not in message:
                    future = server.answers.pop(msg_id, None)
                    if future is not None:
                        if not future.done():
                            future.set_result(message)
                        return
        if not server.live:
            self.log(f"dropped a message from the replaced server ({server.what}): {line[:200]!r}")
            return
        assert self._handle is not None
        self._handle(line)

    # -- writing -----------------------------------------------------------------------------

    def send_server(self, message: Json | bytes) -> None:
        held = self._restart_held
        if held is not None:
            data = message if isinstance(message, bytes) else dumps(message)
            if not _is_answer(data):  # answers belong to the server that asked: not held
                held.append(data)
                return
        super().send_server(message)

    def _backlog(self, server: _Server) -> None:
        """The server stopped reading and its pipe is full: pause the client until it drains
        (or the server's stdin closes)."""
        stdin = server.proc.stdin
        if stdin is not None:
            self.pause_client(stdin.drain)

    # -- mode changes ------------------------------------------------------------------------

    def switch_mode(self, mode: Mode) -> bool:
        """The session is now in ``mode``; True when the server will be restarted for it (the
        router is then told through :meth:`Router.tools_changed` once the new one serves)."""
        self._want = mode
        if self._switch is not None:
            return True  # the restart under way checks the latest mode before it ends
        current = self.current
        if current is None or self._closing or self.router is None:
            return False
        if self.launcher.confines(mode) == current.launch.confined:
            if self.launcher.wants_confinement(mode) and not current.launch.confined:
                agent = self.launcher.agent_for(mode)
                assert agent is not None
                self.launcher.fallback(agent, self.launcher.unavailable())
            current.mode = mode
            return False
        self._restart_held = []
        self._switch = asyncio.ensure_future(self._restart())
        return True

    async def _restart(self) -> None:
        router = self.router
        assert router is not None
        try:
            while True:
                want = self._want
                current = self.current
                assert want is not None and current is not None
                if self.launcher.confines(want) == current.launch.confined:
                    current.mode = want
                    break
                await self._replace(current, want, router)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._switch = None
            self._restart_held = None
            self._failure = (
                f"cannot restart the MCP server for {self._want.value if self._want else '?'}"
                f" mode: {exc}; the proxy stops (a plan-mode server never runs where it could"
                " be confined but is not)"
            )
            lost = self._lost
            if lost is not None and not lost.done():
                lost.set_result(self._failure)
            return
        held, self._restart_held = self._restart_held or [], None
        self._switch = None
        proc = self.server
        if held and proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            for data in held:
                proc.stdin.write(data + b"\n")
            with contextlib.suppress(ConnectionError, OSError):
                await proc.stdin.drain()
        router.tools_changed()

    async def _replace(self, old: _Server, mode: Mode, router: Router) -> None:
        assert self.loop is not None
        confine = self.launcher.confines(mode)
        self.log(
            f"the session is now in {mode.value} mode: restarting the server"
            f" {'confined' if confine else 'unconfined'} (was {old.what});"
            " requests wait until it serves"
        )
        # 1. what the old server is working on gets its answer, or an error past the grace
        # (a request held for the new server since the switch never reached the old one:
        # waiting for the old one to answer it would only run out the grace and cancel it)
        waiting = set(router.in_flight()) - self._held_ids()
        deadline = self.loop.time() + self.drain_grace
        while waiting and not old.ended.is_set() and self.loop.time() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(old.ended.wait(), 0.02)
            waiting &= set(router.in_flight())
            waiting -= self._held_ids()
        old.live = False  # from here on, what it says is dropped: no answer twice
        router.server_replaced()
        left = waiting & set(router.in_flight())
        if left:
            router.cancel(
                left,
                f"the MCP server was restarted for {mode.value} mode before it answered this"
                " request; send it again",
            )
        # 2. the old one stops before the new one starts (a server may hold locks)
        await self._stop(old)
        # 3. the new one, with the client's own handshake
        new = await self._spawn(mode)
        self._start_reader(new)
        try:
            await self._handshake(new, router)
        except BaseException:
            await self._stop(new)
            raise
        self.current = new
        self.server = new.proc
        self.restarts += 1
        self.log(f"the server serves again ({new.what}); session in {mode.value} mode")

    def _held_ids(self) -> set[Any]:
        """The ids of the requests held for the server that replaces the current one."""
        ids: set[Any] = set()
        for data in self._restart_held or ():
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                message = json.loads(data)
                if isinstance(message, dict) and "id" in message:
                    with contextlib.suppress(TypeError):
                        ids.add(message["id"])
        return ids

    async def _handshake(self, server: _Server, router: Router) -> None:
        """Replay the client's ``initialize`` (and ``initialized``) to a new server."""
        params = router.client_initialize()
        if params is None:
            return  # the client's own initialize, when it comes, goes to the new server
        assert self.loop is not None
        self._next_id += 1
        req_id = f"guard-replay-{secrets.token_hex(8)}-initialize-{self._next_id}"
        answer: asyncio.Future[Json] = self.loop.create_future()
        server.answers[req_id] = answer
        stdin = server.proc.stdin
        assert stdin is not None
        request = {"jsonrpc": "2.0", "id": req_id, "method": "initialize", "params": params}
        stdin.write(dumps(request) + b"\n")
        await stdin.drain()
        ended = asyncio.ensure_future(server.ended.wait())
        either: set[asyncio.Future[Any]] = {answer, ended}
        try:
            done, _ = await asyncio.wait(
                either, timeout=INIT_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ended.cancel()
            server.answers.pop(req_id, None)
        if answer not in done:
            if ended in done:
                raise ConnectionError(
                    f"the new server exited ({server.proc.returncode}) before it answered"
                    " initialize"
                )
            raise ConnectionError(f"the new server did not answer initialize in {INIT_TIMEOUT:g} s")
        message = answer.result()
        if "error" in message or not isinstance(message.get("result"), dict):
            raise ConnectionError(f"the new server refused initialize: {message.get('error')}")
        version = message["result"].get("protocolVersion")
        self.log(f"initialize replayed: the new server speaks MCP {version}")
        if router.client_initialized():
            stdin.write(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")
            await stdin.drain()

    # -- stopping ----------------------------------------------------------------------------

    async def _stop(self, server: _Server) -> int | None:
        await stop_process(server.proc)
        if server in self._servers:
            self._servers.remove(server)
            remove_tmpdir(server.launch.tmpdir, self.log)
            if server.launch.egress is not None:
                server.launch.egress.close()
        return server.proc.returncode

    async def stop_server(self, server_finished: bool) -> int | None:
        """Stop every server process (and a restart under way); the last server's status."""
        self._closing = True
        switch = self._switch
        if switch is not None:
            switch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await switch
            self._switch = None
        self._restart_held = None
        current = self.current
        code: int | None = None
        for server in list(self._servers):
            status = await self._stop(server)
            if server is current:
                code = status
        if self._failure is not None and not code:
            return 1
        return code


def _exit_hint(server: _Server) -> str:
    """What to say when a confined server ends on its own with a failure."""
    code = server.proc.returncode
    if not server.launch.confined or code == 0:
        return ""
    return (
        f"the server (confined for plan mode) exited with {code}. It may write only to:"
        f" {'; '.join(server.launch.roots)}. A launcher that writes a cache (npx, uvx) fails"
        " there: install the server and run it directly, or name the cache in the policy's"
        ' [agents.NAME.sandbox] writable (docs/mcp.md, "Plan mode: the server runs'
        ' confined")'
    )


def _is_answer(data: bytes) -> bool:
    try:
        message = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(message, dict) and "method" not in message
