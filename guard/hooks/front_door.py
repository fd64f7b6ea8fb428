"""The hook front door shared by every host, failing closed.

    stdin --adapter.parse--> HookCall (a ToolCall and the hook's own fields)
    ToolCall --guard.gate.Gate.decide--> Verdict --Gate.record--> the audit log
    Verdict --adapter.answer--> stdout, exit 0

Choosing the agent, the effects, the decision and the audit record are the
gate's (:mod:`guard.gate`); this module only reads the payload and renders the
verdict. Any error on the way (bad JSON, unknown host, unreadable policy, an
exception in any layer) becomes exit 2 with the reason on stderr, which every
supported host treats as a block. Nothing here may let a call run because
guard itself broke.
"""

from __future__ import annotations

# Lazy imports: a hook call loads only the parts its own call needs (start-up).
import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from guard.hooks import adapter_for
from guard.hooks.adapter import HookAnswer, HookCall, HookInputError, HostAdapter

__all__ = ["PREFIX", "adapter_for", "decide", "hook_gate"]

if TYPE_CHECKING:
    from guard.gate import Confiner, Gate

PREFIX = "guard (fail-closed): "
SOURCE = "hook"


def hook_gate(
    *,
    agent: str | None = None,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
    confiner: Confiner | None = None,
) -> Gate:
    """The gate as the hook uses it: records to the project's log; the policy is found
    for each call's cwd, and compiled again only when one of its files changed (hookd
    answers many calls)."""
    from guard.audit.sinks import AuditLog
    from guard.gate import Gate

    return Gate(
        policy=policy,
        agent=agent,
        env=os.environ if env is None else env,
        sink=AuditLog(),
        confiner=confiner,
        source=SOURCE,
        shared=True,
    )


def _confiner(adapter: HostAdapter | None) -> Confiner | None:
    """Plan-mode shell commands may run confined (guard.sandbox.confiner); on a host that
    cannot rewrite a call they run directly only in guard's grammar, else in the confined
    form ``guard confine -- …`` the refusal hands the model (guard.sandbox.direct)."""
    if adapter is None:
        return None
    if not adapter.can_rewrite:
        from guard.sandbox.direct import GrammarConfiner

        return GrammarConfiner()
    from guard.sandbox.confiner import ShellConfiner

    return ShellConfiner()


def decide(
    host: str,
    payload_text: str | bytes,
    *,
    agent: str | None = None,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    client_pid: int | None = None,
) -> HookAnswer:
    """Answer one hook invocation. Never raises; never answers "allow" by accident.

    ``env`` supplies $GUARD_AGENT and $GUARD_POLICY (default: this process's);
    ``cwd`` is where the hook runs, used when the payload names no cwd;
    ``client_pid`` is the hook process the host started (default: this one's parent),
    whose ancestors tell the host agent's version. Every lock the call waits on shares
    :data:`guard.locking.HOOK_BUDGET`: one held past it is a deny naming the lock.
    """
    from guard import locking

    with locking.budget(locking.HOOK_BUDGET):
        return _decide(host, payload_text, agent=agent, policy=policy, env=env, cwd=cwd,
                       client_pid=client_pid)


def _decide(
    host: str,
    payload_text: str | bytes,
    *,
    agent: str | None,
    policy: str | None,
    env: Mapping[str, str] | None,
    cwd: str | None,
    client_pid: int | None,
) -> HookAnswer:
    context: dict[str, Any] = {"host": host}
    try:
        from guard.fleet.hostinfo import version_of

        pid = client_pid if client_pid is not None else os.getppid()
        context["host_agent_version"] = version_of(host, pid)
    except Exception:  # informational only
        context["host_agent_version"] = None
    gate: Gate | None = None
    try:
        known: HostAdapter | None = None
        try:
            known = adapter_for(host)
        finally:  # built for a host guard does not know too: its refusal is recorded
            gate = hook_gate(agent=agent, policy=policy, env=env, confiner=_confiner(known))
        adapter = known
        try:
            payload = json.loads(payload_text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HookInputError(f"stdin is not JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise HookInputError(f"stdin must be a JSON object, got {type(payload).__name__}")
        here = cwd or os.getcwd()
        post = adapter.post_event is not None and payload.get("hook_event_name") == \
            adapter.post_event
        hook = _with_cwd(adapter.parse_post(payload) if post else adapter.parse(payload), here)
        call = hook.call
        context.update(hook.to_json())
        from guard.hooks import decided, missed

        if post:
            _capture_checklist(host, call.name, call.input, call.cwd or here)
            told = missed.after_tool(gate, adapter, hook, payload)
            return adapter.post_answer(_with_notes(told, call))
        context["input_sha256"] = decided.input_digest(call.input)
        # tools that ran without guard's decision since the last look are hook_missed:
        # recorded now; in plan mode they hold the session, which refuses every call
        notice = missed.report_missed(gate, adapter, hook, payload)
        held = missed.held_refusal(gate, adapter, hook, context)
        if held is not None:
            return adapter.answer(held, hook)
        verdict = gate.record(
            gate.decide(call, hint=adapter.mode_hint(hook)),
            context,
            answered=lambda v: adapter.answered(v, hook),
        )
        if verdict.failed:
            return HookAnswer.block(PREFIX + verdict.reason)
        if notice:
            verdict = dataclasses.replace(verdict, reason=f"{notice} {verdict.reason}")
        if adapter.answered(verdict, hook) == "deny":  # the refusal reaches the model
            verdict = dataclasses.replace(verdict, reason=_with_notes(verdict.reason, call) or "")
        return adapter.answer(verdict, hook)
    except BaseException as exc:
        return _refuse(exc, gate, context, cwd)


def _with_notes(text: str | None, call: Any) -> str | None:
    """``text`` and the user's words waiting for the model (a reject reason, a refine note:
    guard.planning.notes), taken once."""
    from guard.planning.notes import take_notes, with_notes

    return with_notes(text, take_notes(call))


def _capture_checklist(host: str, tool: str, tool_input: Any, cwd: str) -> None:
    """A host's checklist tool ran: its list goes to the session's events (guard ui shows
    it). Informational: a list that cannot be recorded changes no answer."""
    from guard.planning import todos

    if not todos.is_checklist_tool(host, tool) or not isinstance(tool_input, Mapping):
        return
    with contextlib.suppress(Exception):  # the tool already ran; the list is only shown
        todos.capture(host, tool, tool_input, cwd)


def _with_cwd(hook: HookCall, here: str) -> HookCall:
    """The hook call with an absolute cwd (the hook's own when the payload names none)."""
    call = hook.call
    if call.cwd is None or not os.path.isabs(call.cwd):
        call = dataclasses.replace(call, cwd=os.path.join(here, call.cwd or "."))
        hook = dataclasses.replace(hook, call=call)
    return hook


def _refuse(
    exc: BaseException, gate: Gate | None, context: dict[str, Any], cwd: str | None
) -> HookAnswer:
    """The block for an error outside the gate (the payload, the host), audited if possible."""
    from guard.gate import describe

    reason = describe(exc)
    try:
        if gate is not None:
            context.setdefault("cwd", cwd or os.getcwd())
            verdict = gate.record(gate.failure(None, exc), context)
            reason = verdict.reason
    except BaseException as audit_exc:
        reason += f"; the audit log could not record it either: {describe(audit_exc)}"
    return HookAnswer.block(PREFIX + reason)
