"""How the MCP proxy checks the client's calls: deciding, asking and recording verdicts.

This module holds, as a layer of :class:`guard.mcp.proxy.McpProxy`, everything between
a checked request and its verdict record: the proxy's gates (built in one place,
:meth:`CallChecks._build_gate`: it decides, and records through the sink when
the proxy says so), ``tools/call`` and ``resources/read`` of a ``file://``
URI decided for the current agent, an "ask" put to the user through elicitation,
the planning tools answered once allowed, a dropped client message recorded as a
deny, and the refusals the client gets.

It does not hold the gate itself (:mod:`guard.gate`, MCP side in :mod:`guard.mcp.gate_side`),
what a client message is and who handles it (:mod:`guard.mcp.proxy`), nor sending
answers and forwarding (:mod:`guard.mcp.forwarding`).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from guard.decide import Guard
from guard.effects import ToolCall
from guard.gate import Verdict, VerdictAction
from guard.mcp import asking
from guard.mcp.call_effects import EffectsFn
from guard.mcp.file_uris import is_file_uri
from guard.mcp.forwarding import Forwarding, unrecorded
from guard.mcp.gate_side import McpGate, McpSink, resource_call, tool_call
from guard.mcp.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    Json,
    RequestFailed,
    error,
    tool_error,
)
from guard.mcp.wire import Id
from guard.planning.session import Session
from guard.policy.freshness import PolicyWatch

__all__ = ["CallChecks"]

class CallChecks(Forwarding):
    """Deciding, asking and recording the client's checked calls (the state is set by
    :class:`McpProxy`, the gate by :meth:`_build_gate`)."""

    guard: Guard
    session: Session
    fixed_agent: str | None
    effects_fn: EffectsFn
    ask_timeout: float
    sink: McpSink
    gate: McpGate
    client_can_elicit: bool
    policy_watch: PolicyWatch | None

    def _build_gate(self, guard: Guard, agent: str | None) -> None:
        """The proxy's gate: it decides; the proxy records each verdict through it
        (:meth:`_record`), an allowed call's once it is forwarded (:meth:`_tools_call`)."""
        self.gate = McpGate(
            guard=guard,
            agent=agent,
            # this process's environment, read once ($GUARD_AGENT is looked up per call;
            # nothing in the proxy changes its own environment)
            env=dict(os.environ),
            sink=self.sink,
            source="mcp",
            proxy=self,
        )

    def _decide_call(self, call: ToolCall) -> Verdict:
        """The gate's verdict for ``call`` under the policy as it is on disk now: a policy
        file changed since the last call is loaded again first (:mod:`guard.policy.freshness`);
        one that no longer loads refuses the call with the reason."""
        watch = self.policy_watch
        if watch is not None:
            try:
                fresh = watch.current()
            except Exception as exc:
                return self.gate.failure(call, exc)
            if fresh is not self.guard:
                self._policy_changed(fresh)
        return self.gate.decide(call)

    def _policy_changed(self, fresh: Guard) -> None:
        """Decide with ``fresh`` from now on; a server started later is confined by it."""
        self.log(f"the policy changed on disk; deciding with {fresh.loaded.name} from now on")
        if not self.sink.audit_allowed and fresh.managed is not None and (
            "audit" in fresh.managed.pins
        ):  # as at start-up: a managed pin on the audit overrides --audit refusals
            self.sink.audit_allowed = True
            self.log("the managed policy now pins the audit: every call is recorded")
        self.guard = fresh
        self.sink.shipping = fresh.audit_settings
        self.sink.data = fresh.roots.data
        self.pipe.launcher.guard = fresh
        self._build_gate(fresh, self.fixed_agent)

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

    # -- checked calls -----------------------------------------------------------------

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
        verdict = self._decide_call(call)
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
        return self._record(self._decide_call(call), context)

    def _write(self, verdict: Verdict, context: Json) -> Verdict:
        """:meth:`Gate.record` with this proxy's policy and, once it said, the MCP client's
        (name, version) for the record's fleet fields."""
        client = self.sink.client if self.sink.client[0] is not None else None
        return self.gate.record(verdict, context, guard=self.guard, host_agent=client)

    def _record(self, verdict: Verdict, context: Json) -> tuple[Verdict, int]:
        """Record ``verdict`` (a record that cannot be written makes it a deny: see
        :meth:`Gate.record`); the verdict and the number of its record (0: none)."""
        before = self.sink.last
        verdict = self._write(verdict, context)
        return verdict, (self.sink.last if self.sink.last != before else 0)

    def _record_forwarded(self, msg_id: Id, verdict: Verdict) -> int:
        """Queue the record of an allowed call already forwarded; its number (0: none). It is
        queued even should a write fail meanwhile (the answer then waits for a record that
        failed, and is withheld); one that cannot even be queued withholds the answer too."""
        before = self.sink.last
        self.sink.queue_only = True
        try:
            recorded = self._write(verdict, {"method": "tools/call"})
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
            withheld=lambda why: tool_error(msg_id, f"{text}; {unrecorded(why)}"),
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
        final = self._write(answered, {**context, "asked": True})
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
                withheld=lambda why: error(msg_id, INVALID_REQUEST, f"{text}; {unrecorded(why)}"),
            )

    async def _planning_call(self, msg_id: Id, name: str, arguments: Json, record: int) -> None:
        self.stats.planning += 1
        elicit = self._elicit_from_thread if self.client_can_elicit else None
        result = await self.bridge.call(name, arguments, elicit)
        self._reply(
            msg_id,
            {"jsonrpc": "2.0", "id": msg_id, "result": result.to_mcp()},
            record=record,
            withheld=lambda why: tool_error(msg_id, f"{name}: {unrecorded(why)}"),
        )


def _refusal(tool: str, v: Verdict) -> str:
    return f"guard refused {tool}: {v.reason} (rule: {v.rule})"
