"""A stdio MCP proxy that checks every ``tools/call`` against the policy.

The client talks to guard; guard starts the real server and forwards every
message both ways. Each line is read strictly (:mod:`guard.mcp.wire`: what two
decoders could read differently is refused) and what is forwarded is guard's
canonical rendering of the object it read, never the bytes it was given; the
client's answers reach the server only for requests the server has pending.
Beyond that, messages pass as they are, except:

* ``tools/call``: the call is decided by the gate (:mod:`guard.gate`, MCP side in
  :mod:`guard.mcp.gate`) for the current agent. Allow forwards the call; deny answers
  it with a tool result ``isError: true`` carrying the reason; ask puts the
  question to the user through elicitation when the client declared that
  capability, and otherwise refuses with the reason.
* The planning tools (``plan_enter``, ``plan_exit``, ``update_plan``,
  ``request_user_input``) are guard's own: listed in ``tools/list`` according
  to the session's mode, answered by the planning runtime, never forwarded.
  ``notifications/tools/list_changed`` goes out when the mode changes.
* ``resources/read`` of a ``file://`` URI is a read of that path, decided the
  same way (refusals are JSON-RPC errors; a URI parsers could read differently is
  refused: :mod:`guard.mcp.paths`); other schemes pass through.
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
the audit log and the session's event log (:class:`guard.mcp.gate.McpSink`).

This module is the router: it decides what each message is and who handles
it. Framing, the read loops and guard's own requests are
:mod:`guard.mcp.jsonrpc`; deciding is :mod:`guard.gate` with its MCP side in
:mod:`guard.mcp.gate`; the planning tools are :mod:`guard.mcp.bridge`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Collection, Coroutine, Sequence
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from guard.decide import Guard
from guard.effects import Effect, GuardError, ToolCall
from guard.gate import Gate, Verdict, VerdictAction
from guard.mcp import asking, wire
from guard.mcp.bridge import OFFERED, PlanningBridge
from guard.mcp.effects import EffectsFn, mcp_effects
from guard.mcp.gate import McpAnalyser, McpSink, McpStats, resource_call, tool_call
from guard.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Json,
    RequestFailed,
    Withheld,
    error,
    tool_error,
)
from guard.mcp.launch import Launcher
from guard.mcp.paths import is_file_uri
from guard.mcp.server import ServerPipe
from guard.mcp.wire import Id
from guard.planning.session import Mode, Session

__all__ = ["MCP_REVISION", "OFFERED", "McpProxy", "ProxyStats", "run_proxy"]

MCP_REVISION = "2025-11-25"
#: The server's requests to the client that may wait for an answer at once.
MAX_SERVER_REQUESTS = 65536

ProxyStats = McpStats


class McpProxy:
    """One proxy session: one client on ``client_in``/``client_out``, one server child."""

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
    ) -> None:
        if not server_cmd:
            raise GuardError("guard mcp: no server command given; put it after `--`")
        self.guard = guard
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
        analyse = McpAnalyser(self.effects_fn, lambda: self.relative_base_mismatch)
        self.gate = Gate(
            guard=guard,
            agent=agent,
            mode=self._mode_of,
            analyse=analyse,
            sink=self.sink,
            source="mcp",
        )
        # the same pipeline without the sink: the proxy records each verdict itself
        # (:meth:`_decide`), an allowed call's once it is forwarded (:meth:`_tools_call`)
        self._decider = Gate(
            guard=guard, agent=agent, mode=self._mode_of, analyse=analyse, source="mcp"
        )
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

    def log(self, text: str) -> None:
        self._log(f"guard mcp: {text}")

    @property
    def mode(self) -> Mode:
        return self.bridge.mode

    def _mode_of(self, call: ToolCall, effects: Sequence[Effect] = ()) -> str:
        """The gate's mode source: this proxy's session, re-read when its file changed."""
        return self.bridge.sync().value

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

    # -- the user, through the client ------------------------------------------------------

    async def _elicit(self, message: str, schema: Json) -> Json:
        if not self.client_can_elicit:
            raise asking.AskFailed("the client does not support elicitation")
        params = {"message": message, "requestedSchema": schema}
        try:
            return await self.pipe.request_client("elicitation/create", params, self.ask_timeout)
        except RequestFailed as exc:
            raise asking.AskFailed(str(exc)) from None

    def _elicit_from_thread(self, message: str, schema: Json) -> Json:
        assert self.pipe.loop is not None
        coro = self._elicit(message, schema)
        return asyncio.run_coroutine_threadsafe(coro, self.pipe.loop).result()

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

    def _drop(self, reason: str, rule: str, method: str, params: Any = None) -> int:
        """Record a client message guard drops (a deny); the number of its record (0: none)."""
        self.stats.denied += 1
        name = params.get("name") if isinstance(params, dict) else None
        if method == "tools/call" and isinstance(name, str):
            call = tool_call(name, params.get("arguments"), self.cwd, self.session.id)
        else:
            call = ToolCall("mcp-request", method, {}, self.cwd, self.session.id)
        verdict = Verdict(VerdictAction.DENY, reason, rule, call, self.fixed_agent)
        return self._record(verdict, {"method": method})[1]

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

    def _drop_request_without_id(self, method: str, params: Any) -> None:
        """A request sent as a notification would run unchecked and unanswered: drop it."""
        self._drop(
            f"{method} sent as a notification (no id): guard answers no such call, so it is"
            " never forwarded",
            "guard.mcp.notification",
            method,
            params,
        )

    def _tools_call(self, msg_id: Id, message: Json) -> None:
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            self._reply(
                msg_id, error(msg_id, INVALID_PARAMS, "tools/call needs params.name (a string)")
            )
            return
        name: str = params["name"]
        arguments = params.get("arguments")
        call = tool_call(name, arguments, self.cwd, self.session.id)
        context = {"method": "tools/call"}
        verdict = self._decider.decide(call)
        if (
            verdict.action is VerdictAction.ALLOW
            and self.sink.writer.broken is None  # else recorded first, refused if it cannot be
            and not self.bridge.owns(name)
        ):
            # forwarded first; its record is made while the server works, and written before
            # the loop turns (McpSink.end_batch): the answer waits for it
            self.stats.allowed += 1
            self._send_request(msg_id, "tools/call", 0, message)
            self._pending[msg_id] = ("tools/call", self._record_forwarded(msg_id, verdict))
            return
        verdict, record = self._record(verdict, context)
        if verdict.action is VerdictAction.ASK:
            self.stats.asked += 1
            self._spawn_for(msg_id, self._ask_then_run(msg_id, call, verdict, message, record))
            return
        if verdict.action is not VerdictAction.ALLOW:  # MCP cannot rewrite: confined is deny
            self.stats.denied += 1
            self._refuse_call(msg_id, name, verdict, record)
            return
        self.stats.allowed += 1
        if self.bridge.owns(name):
            self._spawn_for(
                msg_id, self._planning_call(msg_id, name, dict(call.input), record)
            )
        else:
            self._send_request(msg_id, "tools/call", record, message)

    def _decide(self, call: ToolCall, context: Json) -> tuple[Verdict, int]:
        """The gate's verdict and the number of its record (0: not recorded, e.g. an allow
        under ``--audit refusals``)."""
        return self._record(self._decider.decide(call), context)

    def _record(self, verdict: Verdict, context: Json) -> tuple[Verdict, int]:
        """Record ``verdict`` (a record that cannot be written makes it a deny: see
        :meth:`Gate.audit`); the verdict and the number of its record (0: none)."""
        before = self.sink.last
        verdict = self.gate.audit(verdict, context, self.guard)
        return verdict, (self.sink.last if self.sink.last != before else 0)

    def _record_forwarded(self, msg_id: Id, verdict: Verdict) -> int:
        """Queue the record of an allowed call already forwarded; its number (0: none). It is
        queued even should a write fail meanwhile (the answer then waits for a record that
        failed, and is withheld); one that cannot even be queued withholds the answer too."""
        before = self.sink.last
        self.sink.queue_only = True
        try:
            recorded = self.gate.audit(verdict, {"method": "tools/call"}, self.guard)
        finally:
            self.sink.queue_only = False
        if recorded.action is not verdict.action:
            self._unrecorded[msg_id] = recorded.reason
            return 0
        return self.sink.last if self.sink.last != before else 0

    def _refuse_call(self, msg_id: Id, name: str, verdict: Verdict, record: int) -> None:
        text = _refusal(name, verdict)
        self._reply(
            msg_id,
            tool_error(msg_id, text),
            record=record,
            withheld=lambda why: tool_error(msg_id, f"{text}; {_unrecorded(why)}"),
        )

    async def _ask(self, verdict: Verdict, context: Json, record: int) -> tuple[Verdict, int]:
        """Put an "ask" to the user; the verdict is an allow only on an explicit yes.

        With the number of the record of the final verdict (``record`` if unchanged).
        """
        if not self.client_can_elicit:
            reason = (
                f"{verdict.reason}; the policy asks the user first and this client cannot be"
                " asked (no elicitation capability), so the call is refused"
            )
            return verdict.resolved(VerdictAction.DENY, reason), record
        call = verdict.call
        assert call is not None and verdict.decision is not None
        agent = verdict.agent or "?"
        message, schema = asking.call_question(agent, call.name, dict(call.input), verdict.decision)
        try:
            yes = asking.read_call_answer(await self._elicit(message, schema))
        except asking.AskFailed as exc:
            return verdict.resolved(VerdictAction.DENY, f"{verdict.reason}; {exc}"), record
        answered = verdict.resolved(
            VerdictAction.ALLOW if yes else VerdictAction.DENY,
            f"the user {'allowed' if yes else 'refused'} it when asked ({verdict.reason})",
        )
        before = self.sink.last
        final = self.gate.audit(answered, {**context, "asked": True}, self.guard)
        return final, (self.sink.last if self.sink.last != before else record)

    async def _ask_then_run(
        self, msg_id: Id, call: ToolCall, verdict: Verdict, message: Json, record: int
    ) -> None:
        verdict, record = await self._ask(verdict, {"method": "tools/call"}, record)
        if not verdict.allowed:
            self._refuse_call(msg_id, call.name, verdict, record)
        elif self.bridge.owns(call.name):
            await self._planning_call(msg_id, call.name, dict(call.input), record)
        else:
            self._send_request(msg_id, "tools/call", record, message)

    async def _resources_read(self, msg_id: Id, message: Json) -> None:
        """A ``file://`` resource is a read of that path: the policy decides it too."""
        params = message.get("params")
        uri = params.get("uri") if isinstance(params, dict) else None
        if not isinstance(uri, str):
            self._reply(
                msg_id, error(msg_id, INVALID_PARAMS, "resources/read needs params.uri (a string)")
            )
            return
        if not is_file_uri(uri):
            self._send_request(msg_id, "resources/read", 0, message)
            return
        context = {"method": "resources/read"}
        call = resource_call(uri, self.cwd, self.session.id)
        verdict, record = self._decide(call, context)
        if verdict.action is VerdictAction.ASK:
            verdict, record = await self._ask(verdict, context, record)
        if verdict.action is VerdictAction.ALLOW:
            self._send_request(msg_id, "resources/read", record, message)
        else:
            self.stats.denied += 1
            text = _refusal("resources/read", verdict)
            self._reply(
                msg_id,
                error(msg_id, INVALID_REQUEST, text),
                record=record,
                withheld=lambda why: error(msg_id, INVALID_REQUEST, f"{text}; {_unrecorded(why)}"),
            )

    async def _planning_call(self, msg_id: Id, name: str, arguments: Json, record: int) -> None:
        self.stats.planning += 1
        elicit = self._elicit_from_thread if self.client_can_elicit else None
        result = await self.bridge.call(name, arguments, elicit)
        self._reply(
            msg_id,
            {"jsonrpc": "2.0", "id": msg_id, "result": result.to_mcp()},
            record=record,
            withheld=lambda why: tool_error(msg_id, f"{name}: {_unrecorded(why)}"),
        )

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


def _refusal(tool: str, v: Verdict) -> str:
    return f"guard refused {tool}: {v.reason} (rule: {v.rule})"


def _unrecorded(why: str) -> str:
    return f"guard could not record its verdict ({why}), so the answer is withheld"


def _withheld(msg_id: Any, method: str) -> Callable[[str], Json]:
    """What replaces the server's answer to a forwarded call whose record could not be
    written: the call ran, but the client does not get its result."""

    def make(why: str) -> Json:
        text = f"{method}: the server ran the call, but {_unrecorded(why)}"
        if method == "tools/call":
            return tool_error(msg_id, text)
        return error(msg_id, INTERNAL_ERROR, text)

    return make


def run_proxy(proxy: McpProxy) -> int:
    return asyncio.run(proxy.run())
