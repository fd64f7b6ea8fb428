"""A stdio MCP proxy that checks every ``tools/call`` against the policy.

The client talks to guard; guard starts the real server and forwards every
message both ways. Each line is read strictly (:mod:`guard.mcp.wire`: what two
decoders could read differently is refused) and what is forwarded is guard's
canonical rendering of the object it read, never the bytes it was given; the
client's answers reach the server only for requests the server has pending.
Beyond that, messages pass as they are, except:

* ``tools/call``: the call is decided by the gate (:mod:`guard.gate`, MCP side in
  :mod:`guard.mcp.gate_side`) for the current agent. Allow forwards the call; deny answers
  it with a tool result ``isError: true`` carrying the reason; ask puts the
  question to the user through elicitation when the client declared that
  capability, and otherwise refuses with the reason.
* The planning tools (``plan_enter``, ``plan_exit``, ``update_plan``,
  ``request_user_input``) are guard's own: listed in ``tools/list`` according
  to the session's mode, answered by the planning runtime, never forwarded.
  ``notifications/tools/list_changed`` goes out when the mode changes.
* ``resources/read`` of a ``file://`` URI is a read of that path, decided the
  same way (refusals are JSON-RPC errors; a URI parsers could read differently is
  refused: :mod:`guard.mcp.file_uris`); other schemes pass through.
* ``initialize``: the server's answer passes through (its ``protocolVersion``
  included) with ``capabilities.tools.listChanged`` set, since guard sends it.
* ``server/discover`` (the stateless 2026 era) is answered "method not found",
  so clients fall back to the ``initialize`` handshake guard follows.
* JSON-RPC batches (removed from MCP in 2025-06-18) and lines that are not
  JSON are refused, never forwarded: nothing reaches the server unchecked.
  A request sent as a notification (no ``id``; any method but
  ``notifications/*``), e.g. a ``tools/call`` that would run without an answer
  to check, is dropped and recorded as a deny.

Wire format: newline-delimited JSON-RPC 2.0 over stdio, MCP revision
2025-11-25. stdout carries only MCP messages; logs go to stderr, verdicts to
the audit log and the session's event log (:class:`guard.mcp.gate_side.McpSink`).

This module is the router: it builds the proxy, runs its loop, and decides what each
client message is and who handles it. guard's answers, forwarding and the server's
lines are :mod:`guard.mcp.forwarding`; deciding, asking and recording a checked
call is :mod:`guard.mcp.call_checks` (on :mod:`guard.gate`, MCP side in
:mod:`guard.mcp.gate_side`); framing, the read loops and guard's own requests are
:mod:`guard.mcp.jsonrpc`; the planning tools are :mod:`guard.mcp.bridge`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Collection
from typing import IO, Any

from guard.decide import Guard
from guard.effects import GuardError
from guard.mcp import wire
from guard.mcp.bridge import OFFERED, PlanningBridge
from guard.mcp.call_checks import CallChecks
from guard.mcp.call_effects import EffectsFn, mcp_effects
from guard.mcp.gate_side import McpSink, McpStats
from guard.mcp.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, Json, error
from guard.mcp.launch import Launcher
from guard.mcp.server import ServerPipe
from guard.mcp.wire import Id
from guard.paths import warm_path_cache
from guard.planning.session import Mode, Session
from guard.policy.freshness import PolicyWatch

__all__ = ["MCP_REVISION", "OFFERED", "McpProxy", "ProxyStats", "run_proxy"]

MCP_REVISION = "2025-11-25"

ProxyStats = McpStats


class McpProxy(CallChecks):
    """One proxy session: one client on ``client_in``/``client_out``, one server child.

    ``policy_watch`` (:class:`guard.policy.freshness.PolicyWatch`, as ``guard mcp`` gives
    it): each call is decided by the policy as its files read then; without it, by
    ``guard`` for the whole session.
    """

    def __init__(
        self,
        guard: Guard,
        session: Session,
        server_cmd: list[str],
        *,
        cwd: str,
        agent: str | None = None,
        effects_fn: EffectsFn | None = None,
        client_in: IO[bytes] | None = None,
        client_out: IO[bytes] | None = None,
        log: Callable[[str], None] | None = None,
        verbose: bool = False,
        ask_timeout: float = 600.0,
        audit_allowed: bool = True,
        policy_watch: PolicyWatch | None = None,
    ) -> None:
        if not server_cmd:
            raise GuardError("guard mcp: no server command given; put it after `--`")
        self.guard = guard
        #: loads the policy again when its files change (None: ``guard`` for the session)
        self.policy_watch = policy_watch
        self.session = session
        self.server_cmd = server_cmd
        self.cwd = cwd
        self.fixed_agent = agent
        if agent is not None:
            guard.agent(agent)  # unknown agent: a clear GuardError now
        else:
            for name, what in ((guard.plan_agent_name, "plan"), (guard.build_agent_name, "build")):
                if name is None:
                    raise GuardError(
                        f"policy {guard.loaded.name} has no agent with mode = {what!r};"
                        " add one or name the agent with --agent"
                    )
        self.effects_fn = effects_fn or mcp_effects
        self.relative_base_mismatch = _relative_base_mismatch(server_cmd, cwd)
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.verbose = verbose
        self.ask_timeout = ask_timeout
        self.audit_allowed = audit_allowed
        self.pipe = ServerPipe(
            server_cmd,
            cwd,
            client_in if client_in is not None else sys.stdin.buffer,
            client_out if client_out is not None else sys.stdout.buffer,
            self.log,
            launcher=Launcher(
                guard, server_cmd, agent=agent, session_id=session.id, cwd=cwd, log=self.log
            ),
            mode=lambda: self.bridge.mode,
        )
        self.bridge = PlanningBridge(session, self.log, self._mode_changed)
        self.pipe.attach(self)  # the server restarts with the mode: see guard.mcp.server
        self.stats = McpStats()
        self.sink = McpSink(
            session, self.stats, self.log, verbose=verbose, audit_allowed=audit_allowed,
            shipping=guard.audit_settings, data=guard.roots.data,
        )
        self._build_gate(guard, agent)
        self.pipe.records = self.sink  # answers of checked calls wait for their records
        self.client_can_elicit = False
        # client request id -> (method, number of its verdict record or 0), while at the server
        self._pending: dict[Any, tuple[str, int]] = {}
        self.signalled: int | None = None
        self._initialized = False
        self._client_init: Json | None = None  # the client's initialize params, for restarts
        # the server's requests to the client not answered yet: id -> method
        self._server_requests: dict[Id, str] = {}
        # the client's requests guard has neither answered nor forwarded yet
        self._open: set[Id] = set()
        self._current: Id | None = None  # the request being handled (for internal errors)
        # client request id -> why its verdict could not be recorded (its answer is withheld)
        self._unrecorded: dict[Any, str] = {}

    @property
    def mode(self) -> Mode:
        return self.bridge.mode

    def _mode_changed(self, mode: Mode) -> None:
        self.log(f"session {self.session.id} is now in {mode.value} mode")
        if not self.pipe.switch_mode(mode):  # else told once the restarted server serves
            self.tools_changed()

    # -- what a server restart needs (guard.mcp.server.Router) -----------------------------

    def in_flight(self) -> Collection[Any]:
        return self._pending

    def cancel(self, ids: Collection[Any], reason: str) -> None:
        for req_id in ids:
            self._unrecorded.pop(req_id, None)
            if self._pending.pop(req_id, None) is not None:
                self.pipe.send_client(error(req_id, INTERNAL_ERROR, reason))

    def client_initialize(self) -> Json | None:
        return self._client_init

    def client_initialized(self) -> bool:
        return self._initialized

    def tools_changed(self) -> None:
        if self._initialized:
            self.pipe.send_client({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    # -- the main loop ---------------------------------------------------------------------

    async def run(self) -> int:
        """Serve until the client closes stdin, the server exits or SIGTERM/SIGINT/SIGHUP
        comes; the server's exit code (128 + the signal's number after a signal).

        Every verdict record is written before this returns, whatever ends the session.
        """
        loop = asyncio.get_running_loop()

        def wake() -> None:  # from the writer thread: a record an answer waits for is written
            loop.call_soon_threadsafe(self.pipe.release)

        self.sink.start(wake, loop.call_soon)
        try:
            return await self._run(loop)
        finally:
            self.sink.stop()  # idempotent: the normal path has already flushed
            self.pipe.release(final=True)

    async def _run(self, loop: asyncio.AbstractEventLoop) -> int:
        try:
            await self.pipe.start()
        except OSError as exc:
            raise GuardError(
                f"cannot start the MCP server {self.server_cmd[0]!r}: {exc.strerror or exc};"
                " check the command after `--`"
            ) from None
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(signum, self._on_signal, signum)
        self.bridge.sync()
        # the canonical-path cache from the first call on, its slow first watches taken now
        warm_path_cache(self.cwd)
        if self.relative_base_mismatch is not None:
            self.log(f"warning: relative paths will be refused: {self.relative_base_mismatch}")
        assert self.pipe.server is not None
        self.log(
            f"serving {' '.join(self.server_cmd)} (pid {self.pipe.server.pid}); session"
            f" {self.session.id} in {self.mode.value} mode; agent"
            f" {self.fixed_agent or 'by mode'}; policy {self.guard.loaded.name}"
        )
        watch_task = asyncio.ensure_future(self.bridge.watch())
        server_finished = await self.pipe.serve(self._from_client_lines, self._from_server)
        watch_task.cancel()
        code = await self._shutdown(server_finished)
        self.pipe.close()
        return 128 + self.signalled if self.signalled is not None else code

    def _on_signal(self, signum: int) -> None:
        """SIGTERM/SIGINT/SIGHUP: stop reading, stop the server, write every record, exit."""
        if self.signalled is None:
            self.signalled = signum
            self.log(f"{signal.Signals(signum).name}: shutting down")
        if self.pipe.stopping is not None:
            self.pipe.stopping.set()

    async def _shutdown(self, server_finished: bool) -> int:
        returncode = await self.pipe.stop_server(server_finished)
        for req_id in list(self._pending):
            self.pipe.send_client(error(req_id, INTERNAL_ERROR, "the MCP server exited"))
        self._pending.clear()
        for req_id in list(self._open):  # still being checked, or waiting for the user
            self._reply(req_id, error(req_id, INTERNAL_ERROR, "guard mcp is exiting"))
        self._unrecorded.clear()
        await asyncio.to_thread(self.sink.stop)  # every record written and synced
        self.pipe.release(final=True)
        self.log(
            f"server exited with {returncode}; {self.stats.allowed} calls allowed,"
            f" {self.stats.denied} refused, {self.stats.asked} asked,"
            f" {self.stats.planning} planning calls"
        )
        return returncode or 0

    # -- client -> server ------------------------------------------------------------------

    def _from_client_lines(self, lines: list[bytes]) -> None:
        """Lines the client sent together: each is handled (a checked call decided and
        forwarded) before any verdict record is written, then the records are written at
        once, while the server works; its answers wait for them (:meth:`Pipe.send_client`).

        No line ends the proxy: an error while handling one (a bug) answers its request
        with an error, if guard has neither answered nor forwarded it yet."""
        self.sink.batch = True
        try:
            for line in lines:
                self._current = None
                try:
                    self._from_client(line)
                except Exception as exc:
                    self._internal_error(self._current, exc)
        finally:
            self.sink.end_batch()

    def _from_client(self, line: bytes) -> None:
        try:
            message = wire.read(line)
        except wire.Refused as refused:
            self._refuse_line(refused)
            return
        kind = wire.kind_of(message)
        if kind == "response":
            self._client_answer(message)
            return
        method: str = message["method"]
        if kind == "notification":
            if not method.startswith("notifications/"):
                self._drop_request_without_id(method, message.get("params"))
                return
            if method == "notifications/initialized":
                self._initialized = True
            self._forward(message)
            return
        msg_id: Id = message["id"]
        if msg_id in self._open or msg_id in self._pending:
            self._drop(
                f"{method} reuses the id {msg_id!r} of a request still in flight (MCP: an id"
                " is used once); dropped, so each request gets exactly one answer",
                "guard.mcp.id_in_use",
                method,
            )
            return
        self._open.add(msg_id)
        self._current = msg_id
        if method == "tools/call":
            self._tools_call(msg_id, message)
            return
        if method == "resources/read":
            self._spawn_for(msg_id, self._resources_read(msg_id, message))
            return
        if method == "server/discover":
            self._reply(
                msg_id,
                error(
                    msg_id,
                    METHOD_NOT_FOUND,
                    f"guard mcp speaks the initialize handshake (MCP {MCP_REVISION});"
                    " send initialize",
                ),
            )
            return
        if method == "initialize":
            params = message.get("params")
            self._client_init = params if isinstance(params, dict) else None
            info = params.get("clientInfo") if isinstance(params, dict) else None
            if isinstance(info, dict):  # the host agent, in its own words (fleet records)
                name, version = info.get("name"), info.get("version")
                self.sink.client = (str(name)[:100] if name else None,
                                    str(version)[:100] if version else None)
            caps = params.get("capabilities") if isinstance(params, dict) else None
            elicit = caps.get("elicitation") if isinstance(caps, dict) else None
            # form mode: declared explicitly, or an empty object (2025-11-25 compatibility)
            self.client_can_elicit = isinstance(elicit, dict) and (not elicit or "form" in elicit)
        self._send_request(msg_id, method, 0, message)

    def _refuse_line(self, refused: wire.Refused) -> None:
        """A line guard does not read (:mod:`guard.mcp.wire`): never forwarded; recorded.

        A request whose id could be read gets an error with that id; a notification or a
        response gets no answer; anything else gets an error with id null (JSON-RPC's
        answer when the id cannot be read)."""
        kind, msg_id = refused.kind, refused.msg_id
        what = refused.method or "(unreadable)"
        self.log(f"refused a client {kind if kind != 'unknown' else 'line'}: {refused.reason}")
        record = self._drop(
            f"the client's {kind if kind != 'unknown' else 'line'} was refused and not"
            f" forwarded: {refused.reason}",
            "guard.mcp.malformed",
            what,
        )
        if kind in ("notification", "response"):
            return
        if kind == "request" and msg_id is not None:
            if msg_id in self._open or msg_id in self._pending:
                return  # that id already waits for its one answer
            self._open.add(msg_id)
            self._reply(msg_id, error(msg_id, refused.code, refused.reason), record=record)
            return
        self.pipe.send_client(error(None, refused.code, refused.reason), record=record)

    def _client_answer(self, message: Json) -> None:
        """The client's answer to a request: guard's own, or one the server has pending.
        Any other (an unknown id, one answered already) is dropped and recorded."""
        if self.pipe.take_answer(message):  # the answer to guard's own question
            return
        msg_id = message["id"]
        method = self._server_requests.pop(msg_id, None)
        if method is None:
            self.log(f"dropped a client answer to no pending server request (id {msg_id!r})")
            self._drop(
                f"an answer (id {msg_id!r}) to no request the server has pending; not"
                " forwarded",
                "guard.mcp.unmatched_answer",
                "(answer)",
            )
            return
        if method == "roots/list":
            self._note_roots(message.get("result"))
        self._forward(message)  # an answer to the server's request

    def _drop_request_without_id(self, method: str, params: Any) -> None:
        """A request sent as a notification would run unchecked and unanswered: drop it."""
        self._drop(
            f"{method} sent as a notification (no id): guard answers no such call, so it is"
            " never forwarded",
            "guard.mcp.notification",
            method,
            params,
        )


def _relative_base_mismatch(server_cmd: list[str], cwd: str) -> str | None:
    """Why relative paths are ambiguous, or None.

    guard resolves a relative path against ``cwd``. A server given directories on its
    command line (the filesystem server's allowed directories) resolves it against the
    first of them instead. When ``cwd`` is none of those, the two would decide about
    and write to different files, so relative paths are refused.
    """
    real_cwd = os.path.realpath(cwd)
    dirs = [
        os.path.realpath(os.path.join(cwd, arg))
        for arg in server_cmd[1:]
        if not arg.startswith("-") and os.path.isdir(os.path.join(cwd, arg))
    ]
    if not dirs or dirs[0] == real_cwd:
        return None
    return (
        f"the server may resolve it against {dirs[0]} (a directory on its command line) while"
        f" guard resolves it against {real_cwd}; start guard with --cwd {dirs[0]}"
    )


def run_proxy(proxy: McpProxy) -> int:
    return asyncio.run(proxy.run())
