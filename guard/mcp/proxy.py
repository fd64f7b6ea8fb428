"""A stdio MCP proxy that checks every ``tools/call`` against the policy.

The client talks to guard; guard starts the real server and forwards every
message both ways, unchanged, except:

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
  same way (refusals are JSON-RPC errors); other schemes pass through.
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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import IO, Any, TypeVar
from urllib.parse import unquote, urlsplit

from guard.decide import Guard
from guard.effects import GuardError, ToolCall
from guard.gate import Gate, Verdict, VerdictAction
from guard.mcp import asking
from guard.mcp.effects import EffectsFn, mcp_effects
from guard.mcp.gate import (
    McpAnalyser,
    McpSink,
    McpStats,
    is_file_uri,
    resource_call,
    tool_call,
)
from guard.planning.checklist import RequestUserInputArgs
from guard.planning.handshake import EnterRequest, ExitRequest, UserDecision
from guard.planning.session import Mode, Session
from guard.planning.tools import TOOL_DEFINITIONS, TOOL_NAMES, ToolResult, handle_tool_call

MCP_REVISION = "2025-11-25"
MAX_LINE = 256 * 1024 * 1024
SHUTDOWN_GRACE = 5.0

#: Planning tools offered in each mode.
OFFERED: dict[Mode, tuple[str, ...]] = {
    Mode.PLAN: ("plan_exit", "request_user_input"),
    Mode.BUILD: ("plan_enter", "update_plan"),
}

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

T = TypeVar("T")
Json = dict[str, Any]


ProxyStats = McpStats


def _dumps(message: Json) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _error(msg_id: Any, code: int, text: str) -> Json:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}}


def _tool_error(msg_id: Any, text: str) -> Json:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "result": {"content": [{"type": "text", "text": text}], "isError": True},
    }


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
        self.client_in = client_in if client_in is not None else sys.stdin.buffer
        self.client_out = client_out if client_out is not None else sys.stdout.buffer
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.verbose = verbose
        self.ask_timeout = ask_timeout
        self.audit_allowed = audit_allowed
        self.stats = McpStats()
        self.sink = McpSink(
            session, self.stats, self.log, verbose=verbose, audit_allowed=audit_allowed
        )
        self.gate = Gate(
            guard=guard,
            agent=agent,
            mode=self._mode_of,
            analyse=McpAnalyser(self.effects_fn, lambda: self.relative_base_mismatch),
            sink=self.sink,
            source="mcp",
        )
        self.client_can_elicit = False
        self._prefix = f"guard-{secrets.token_hex(4)}-"
        self._next_id = 0
        self._waiting: dict[Any, asyncio.Future[Json]] = {}
        self._pending: dict[Any, str] = {}  # client request id -> method, while at the server
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.subprocess.Process | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._mode = session.mode
        self._offered_mode = session.mode
        self._session_stamp: tuple[int, int, int] | None = None
        self._session_lock = threading.Lock()
        self._initialized = False
        self._roots_requests: set[Any] = set()

    # -- small helpers -----------------------------------------------------------------------

    def log(self, text: str) -> None:
        self._log(f"guard mcp: {text}")

    @property
    def mode(self) -> Mode:
        return self._mode

    def _mode_of(self, call: ToolCall) -> str:
        """The gate's mode source: this proxy's session, re-read when its file changed."""
        self._sync_mode()
        return self._mode.value

    def _send_client(self, message: Json | bytes) -> None:
        data = message if isinstance(message, bytes) else _dumps(message)
        self.client_out.write(data + b"\n")
        self.client_out.flush()

    async def _send_server(self, message: Json | bytes) -> None:
        data = message if isinstance(message, bytes) else _dumps(message)
        proc = self._server
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            raise ConnectionError("the server is not running")
        proc.stdin.write(data + b"\n")
        await proc.stdin.drain()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- mode ------------------------------------------------------------------------------

    def _sync_mode(self) -> None:
        """Re-read the session when its file changed; announce a changed tool offer."""
        try:
            st = os.stat(self.session.path)
        except OSError as exc:
            raise GuardError(f"session file {self.session.path} unreadable: {exc}") from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # each write is an atomic rename
        # while a planning call runs in its worker thread, that thread owns the session
        # object; the mode is then the cached one, and it is synced when the call returns
        if stamp != self._session_stamp and self._session_lock.acquire(blocking=False):
            try:
                self.session.refresh()
                self._session_stamp = stamp
                self._mode = self.session.mode
            finally:
                self._session_lock.release()
        if self._mode is not self._offered_mode:
            self.log(f"session {self.session.id} is now in {self._mode.value} mode")
            self._offered_mode = self._mode
            if self._initialized:
                self._send_client({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    async def _watch_mode(self, interval: float = 1.0) -> None:
        """Notice mode changes made elsewhere (e.g. `guard plan exit --approve`)."""
        while True:
            await asyncio.sleep(interval)
            try:
                self._sync_mode()
            except Exception as exc:
                self.log(f"cannot read the session: {exc}")

    def _planning_tools(self) -> list[Json]:
        offered = OFFERED[self._mode]
        tools = [dict(t) for t in TOOL_DEFINITIONS if t["name"] in offered]
        plan_path = self.session.plan_path
        for tool in tools:
            if tool["name"] == "plan_exit" and plan_path:
                tool["description"] = f"{tool['description']} Your plan file: {plan_path}"
        return tools

    # -- the user, through the client ------------------------------------------------------

    async def _elicit(self, message: str, schema: Json) -> Json:
        if not self.client_can_elicit:
            raise asking.AskFailed("the client does not support elicitation")
        self._next_id += 1
        req_id = f"{self._prefix}{self._next_id}"
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self._waiting[req_id] = future
        self._send_client(
            {
                "jsonrpc": "2.0",
                "id": req_id,
                "method": "elicitation/create",
                "params": {"message": message, "requestedSchema": schema},
            }
        )
        try:
            answer = await asyncio.wait_for(future, self.ask_timeout)
        except TimeoutError:
            raise asking.AskFailed(f"no answer within {self.ask_timeout:g} s") from None
        finally:
            self._waiting.pop(req_id, None)
        if "error" in answer:
            err = answer["error"]
            text = err.get("message") if isinstance(err, dict) else err
            raise asking.AskFailed(f"the client could not ask: {text}")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise asking.AskFailed("the client's answer has no result")
        return result

    def _elicit_from_thread(self, message: str, schema: Json) -> Json:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._elicit(message, schema), self._loop)
        return future.result()

    # -- the main loop ---------------------------------------------------------------------

    async def run(self) -> int:
        """Serve until the client closes stdin or the server exits; the server's exit code."""
        self._loop = asyncio.get_running_loop()
        self.sink.start()
        try:
            self._server = await asyncio.create_subprocess_exec(
                *self.server_cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                limit=MAX_LINE,
            )
        except OSError as exc:
            self.sink.stop()
            raise GuardError(
                f"cannot start the MCP server {self.server_cmd[0]!r}: {exc.strerror or exc};"
                " check the command after `--`"
            ) from None
        self._sync_mode()
        if self.relative_base_mismatch is not None:
            self.log(f"warning: relative paths will be refused: {self.relative_base_mismatch}")
        self.log(
            f"serving {' '.join(self.server_cmd)} (pid {self._server.pid}); session"
            f" {self.session.id} in {self._mode.value} mode; agent"
            f" {self.fixed_agent or 'by mode'}; policy {self.guard.loaded.name}"
        )
        client_queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        reader = threading.Thread(
            target=self._read_client, args=(client_queue, self._loop), daemon=True
        )
        reader.start()
        client_task = asyncio.ensure_future(self._client_loop(client_queue))
        server_task = asyncio.ensure_future(self._server_loop())
        watch_task = asyncio.ensure_future(self._watch_mode())
        done, _ = await asyncio.wait(
            {client_task, server_task}, return_when=asyncio.FIRST_COMPLETED
        )
        watch_task.cancel()
        for task in done:
            failed = task.exception()
            if failed is not None:
                self.log(f"internal error: {failed!r}")
        code = await self._shutdown(server_finished=server_task in done)
        for task in (client_task, server_task, *self._tasks):
            task.cancel()
        return code

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

    async def _shutdown(self, server_finished: bool) -> int:
        proc = self._server
        assert proc is not None
        if not server_finished and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), SHUTDOWN_GRACE)
        except TimeoutError:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), SHUTDOWN_GRACE)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for req_id in list(self._pending):
            self._send_client(_error(req_id, INTERNAL_ERROR, "the MCP server exited"))
        self._pending.clear()
        await asyncio.to_thread(self.sink.stop)
        code = proc.returncode or 0
        self.log(
            f"server exited with {proc.returncode}; {self.stats.allowed} calls allowed,"
            f" {self.stats.denied} refused, {self.stats.asked} asked,"
            f" {self.stats.planning} planning calls"
        )
        return code

    async def _client_loop(self, queue: asyncio.Queue[bytes | None]) -> None:
        while True:
            line = await queue.get()
            if line is None:
                return
            if line.strip():
                await self._from_client(line.rstrip(b"\r\n"))

    async def _server_loop(self) -> None:
        proc = self._server
        assert proc is not None and proc.stdout is not None
        while True:
            try:
                line = await proc.stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    self._from_server(exc.partial)
                await proc.wait()
                return
            except asyncio.LimitOverrunError:
                self.log(f"server sent a line over {MAX_LINE} bytes; stopping")
                proc.kill()
                await proc.wait()
                return
            if line.strip():
                self._from_server(line.rstrip(b"\r\n"))

    # -- client -> server ------------------------------------------------------------------

    async def _from_client(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            self.log(f"refused a client line that is not JSON: {exc}")
            self._send_client(_error(None, PARSE_ERROR, f"parse error: {exc}"))
            return
        if isinstance(message, list):
            self.log("refused a JSON-RPC batch from the client")
            self._send_client(
                _error(
                    None,
                    INVALID_REQUEST,
                    "JSON-RPC batches are not supported by MCP"
                    " since 2025-06-18; send one message per line",
                )
            )
            return
        if not isinstance(message, dict):
            self._send_client(_error(None, INVALID_REQUEST, "a message must be a JSON object"))
            return
        method = message.get("method")
        has_id = "id" in message
        if method is None:
            if has_id and message["id"] in self._waiting:  # the answer to guard's own question
                future = self._waiting.pop(message["id"])
                if not future.done():
                    future.set_result(message)
                return
            if has_id and message["id"] in self._roots_requests:
                self._roots_requests.discard(message["id"])
                self._note_roots(message.get("result"))
            await self._forward(line)  # an answer to the server's request
            return
        if not isinstance(method, str):
            if has_id:
                self._send_client(_error(message["id"], INVALID_REQUEST, "method must be a string"))
            return
        if not has_id:  # a notification
            if not method.startswith("notifications/"):
                self._drop_request_without_id(method, message.get("params"))
                return
            if method == "notifications/initialized":
                self._initialized = True
            await self._forward(line)
            return
        msg_id = message["id"]
        if method == "tools/call":
            await self._tools_call(msg_id, message.get("params"), line)
            return
        if method == "resources/read":
            self._spawn(self._resources_read(msg_id, message.get("params"), line))
            return
        if method == "server/discover":
            self._send_client(
                _error(
                    msg_id,
                    METHOD_NOT_FOUND,
                    f"guard mcp speaks the initialize handshake (MCP {MCP_REVISION});"
                    " send initialize",
                )
            )
            return
        if method == "initialize":
            params = message.get("params")
            caps = params.get("capabilities") if isinstance(params, dict) else None
            elicit = caps.get("elicitation") if isinstance(caps, dict) else None
            # form mode: declared explicitly, or an empty object (2025-11-25 compatibility)
            self.client_can_elicit = isinstance(elicit, dict) and (not elicit or "form" in elicit)
        self._pending[msg_id] = method  # answered with an error should the server die
        await self._forward(line)

    async def _forward(self, data: bytes) -> None:
        try:
            await self._send_server(data)
            self.stats.forwarded += 1
        except (ConnectionError, OSError) as exc:
            self.log(f"cannot forward to the server: {exc}")

    def _drop_request_without_id(self, method: str, params: Any) -> None:
        """A request sent as a notification would run unchecked and unanswered: drop it."""
        reason = (
            f"{method} sent as a notification (no id): guard answers no such call, so it is"
            " never forwarded"
        )
        self.stats.denied += 1
        name = params.get("name") if isinstance(params, dict) else None
        if method == "tools/call" and isinstance(name, str):
            call = tool_call(name, params.get("arguments"), self.cwd, self.session.id)
        else:
            call = ToolCall("mcp-request", method, {}, self.cwd, self.session.id)
        self.gate.audit(
            Verdict(VerdictAction.DENY, reason, "guard.mcp.notification", call, self.fixed_agent),
            {"method": method},
        )

    async def _tools_call(self, msg_id: Any, params: Any, line: bytes) -> None:
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            self._send_client(
                _error(msg_id, INVALID_PARAMS, "tools/call needs params.name (a string)")
            )
            return
        name: str = params["name"]
        arguments = params.get("arguments")
        call = tool_call(name, arguments, self.cwd, self.session.id)
        verdict = self.gate.decide(call, context={"method": "tools/call"})
        if verdict.action is VerdictAction.ASK:
            self.stats.asked += 1
            self._spawn(self._ask_then_run(msg_id, call, verdict, line))
            return
        if verdict.action is not VerdictAction.ALLOW:  # MCP cannot rewrite: confined is deny
            self.stats.denied += 1
            self._send_client(_tool_error(msg_id, _refusal(name, verdict)))
            return
        self.stats.allowed += 1
        if name in TOOL_NAMES:
            self._spawn(self._planning_call(msg_id, name, dict(call.input)))
        else:
            self._pending[msg_id] = "tools/call"
            await self._forward(line)

    async def _ask(self, verdict: Verdict, context: Json) -> Verdict:
        """Put an "ask" to the user; the verdict is an allow only on an explicit yes."""
        if not self.client_can_elicit:
            reason = (
                f"{verdict.reason}; the policy asks the user first and this client cannot be"
                " asked (no elicitation capability), so the call is refused"
            )
            return verdict.resolved(VerdictAction.DENY, reason)
        call = verdict.call
        assert call is not None and verdict.decision is not None
        agent = verdict.agent or "?"
        message, schema = asking.call_question(agent, call.name, dict(call.input), verdict.decision)
        try:
            yes = asking.read_call_answer(await self._elicit(message, schema))
        except asking.AskFailed as exc:
            return verdict.resolved(VerdictAction.DENY, f"{verdict.reason}; {exc}")
        answered = verdict.resolved(
            VerdictAction.ALLOW if yes else VerdictAction.DENY,
            f"the user {'allowed' if yes else 'refused'} it when asked ({verdict.reason})",
        )
        return self.gate.audit(answered, {**context, "asked": True}, self.guard)

    async def _ask_then_run(
        self, msg_id: Any, call: ToolCall, verdict: Verdict, line: bytes
    ) -> None:
        verdict = await self._ask(verdict, {"method": "tools/call"})
        if not verdict.allowed:
            self._send_client(_tool_error(msg_id, _refusal(call.name, verdict)))
        elif call.name in TOOL_NAMES:
            await self._planning_call(msg_id, call.name, dict(call.input))
        else:
            self._pending[msg_id] = "tools/call"
            await self._forward(line)

    async def _resources_read(self, msg_id: Any, params: Any, line: bytes) -> None:
        """A ``file://`` resource is a read of that path: the policy decides it too."""
        uri = params.get("uri") if isinstance(params, dict) else None
        if not isinstance(uri, str):
            self._send_client(
                _error(msg_id, INVALID_PARAMS, "resources/read needs params.uri (a string)")
            )
            return
        if not is_file_uri(uri):
            self._pending[msg_id] = "resources/read"
            await self._forward(line)
            return
        context = {"method": "resources/read"}
        call = resource_call(uri, self.cwd, self.session.id)
        verdict = self.gate.decide(call, context=context)
        if verdict.action is VerdictAction.ASK:
            verdict = await self._ask(verdict, context)
        if verdict.action is VerdictAction.ALLOW:
            self._pending[msg_id] = "resources/read"
            await self._forward(line)
        else:
            self.stats.denied += 1
            text = _refusal("resources/read", verdict)
            self._send_client(_error(msg_id, INVALID_REQUEST, text))

    async def _planning_call(self, msg_id: Any, name: str, arguments: Json) -> None:
        self.stats.planning += 1
        can_ask = self.client_can_elicit

        def ask_enter(request: EnterRequest) -> bool:
            message, schema = asking.enter_question(request)
            return asking.read_enter_answer(self._elicit_from_thread(message, schema))

        def ask_exit(request: ExitRequest) -> UserDecision:
            message, schema = asking.exit_question(request)
            return asking.read_exit_answer(self._elicit_from_thread(message, schema))

        def ask_questions(args: RequestUserInputArgs) -> list[str]:
            message, schema = asking.input_question(args)
            return asking.read_input_answer(args, self._elicit_from_thread(message, schema))

        def run() -> ToolResult:
            with self._session_lock:
                return handle_tool_call(
                    self.session,
                    name,
                    arguments,
                    ask_enter=ask_enter if can_ask else None,
                    ask_exit=ask_exit if can_ask else None,
                    ask_questions=ask_questions if can_ask else None,
                )

        result = await asyncio.to_thread(run)
        self.log(f"{name}: {'refused' if result.is_error else 'done'}: {result.text:.200}")
        try:
            self._sync_mode()
        except GuardError as exc:
            self.log(str(exc))
        self._send_client({"jsonrpc": "2.0", "id": msg_id, "result": result.to_mcp()})

    # -- server -> client ------------------------------------------------------------------

    def _from_server(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            self.log(f"dropped a server line that is not JSON ({exc}): {line[:200]!r}")
            return
        if not isinstance(message, dict):
            self.log(f"dropped a server message that is not an object: {line[:200]!r}")
            return
        if "method" not in message and "id" in message:
            method = self._pending.pop(message["id"], None)
            if method in ("initialize", "tools/list") and isinstance(message.get("result"), dict):
                if method == "initialize":
                    self._patch_initialize(message["result"])
                else:
                    self._patch_tools_list(message["result"])
                self._send_client(message)
                return
        if message.get("method") == "roots/list" and "id" in message:
            self._roots_requests.add(message["id"])
        self._send_client(line)

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
        tools = result.get("tools")
        if not isinstance(tools, list):
            return
        kept = []
        for tool in tools:
            if isinstance(tool, dict) and tool.get("name") in TOOL_NAMES:
                self.log(f"the server's own tool {tool['name']!r} is hidden: guard answers it")
                continue
            kept.append(tool)
        if not result.get("nextCursor"):
            with contextlib.suppress(GuardError):
                self._sync_mode()
            kept.extend(self._planning_tools())
        result["tools"] = kept


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


def run_proxy(proxy: McpProxy) -> int:
    return asyncio.run(proxy.run())
