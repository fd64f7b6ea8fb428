"""The hook pipeline shared by every host, failing closed.

    stdin --adapter.parse--> HookCall --choose agent--> agent
    HookCall --adapter.effects--> [Effect] --Guard.decide--> Decision
    Decision --audit.append--> log;  Decision --adapter.answer--> stdout, exit 0

Any error on the way (bad JSON, unknown host, unreadable policy, a missing
module, an exception in any layer) becomes exit 2 with the reason on stderr,
which every supported host treats as a block. Nothing here may let a call run
because guard itself broke.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from guard.integrations import HOSTS
from guard.integrations.interface import HookAnswer, HookCall, HookInputError, HostAdapter

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.effects import Decision

PREFIX = "guard (fail-closed): "


class AgentChoiceError(Exception):
    """No agent can be chosen for this call."""


def adapter_for(host: str) -> HostAdapter:
    module = HOSTS.get(host)
    if module is None:
        raise HookInputError(f"unknown host {host!r}; known: {', '.join(HOSTS)}")
    adapter: HostAdapter = importlib.import_module(module).ADAPTER
    return adapter


def agent_for_mode(g: Guard, mode: str) -> str:
    """The policy's agent for a guard mode: the one named like the mode, else the first of it."""
    names = list(g.agent_names)
    found = g.plan_agent_name if mode == "plan" else g.build_agent_name
    if found is not None and mode in ("plan", "build"):
        return found
    raise AgentChoiceError(
        f"the policy defines no agent with mode {mode!r} (agents: {', '.join(names) or 'none'})"
    )


def _planning_mode(cwd: str | None) -> str | None:
    current_mode = None
    for module in ("guard.planning", "guard.planning.session"):
        try:
            current_mode = getattr(importlib.import_module(module), "current_mode", None)
        except ImportError:
            continue
        if current_mode is not None:
            break
    if current_mode is None:
        return None  # the planning runtime is not installed: skip this step
    found = current_mode(cwd if cwd is not None else os.getcwd())
    if found is None:
        return None
    mode = found[0]
    return str(mode)


def choose_agent(
    g: Guard,
    adapter: HostAdapter,
    call: HookCall,
    agent: str | None,
    env: Mapping[str, str],
) -> tuple[str, str]:
    """(agent name, why). First match wins: --agent, $GUARD_AGENT, guard mode, host mode."""
    names = list(g.agent_names)

    def known(name: str, source: str) -> str:
        if name not in names:
            raise AgentChoiceError(
                f"{source} names agent {name!r}, which the policy does not define"
                f" (agents: {', '.join(names) or 'none'})"
            )
        return name

    if agent:
        return known(agent, "--agent"), "--agent"
    env_agent = env.get("GUARD_AGENT", "").strip()
    if env_agent:
        return known(env_agent, "$GUARD_AGENT"), "$GUARD_AGENT"
    mode = _planning_mode(call.cwd)
    if mode is not None:
        if mode in names:
            return mode, f"guard mode {mode!r} of this worktree"
        return agent_for_mode(g, mode), f"guard mode {mode!r} of this worktree"
    hint = adapter.mode_hint(call)
    if hint is not None:
        return agent_for_mode(g, hint), f"{adapter.title} permission_mode {call.permission_mode!r}"
    return agent_for_mode(g, "build"), f"{adapter.title} gives no mode: build"


def _audit(record: dict[str, Any], g: Guard | None, cwd: str | None) -> None:
    try:
        audit = importlib.import_module("guard.audit")
    except ImportError:
        return  # the audit log module is not installed
    if g is not None:
        roots = g.roots
    else:
        from guard.paths import Roots

        roots = Roots.discover(record.get("cwd") or cwd or os.getcwd())
    audit.append(record, roots=roots)


def decide(
    host: str,
    payload_text: str | bytes,
    *,
    agent: str | None = None,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> HookAnswer:
    """Answer one hook invocation. Never raises; never answers "allow" by accident.

    ``env`` supplies $GUARD_AGENT and $GUARD_POLICY (default: this process's);
    ``cwd`` is where the hook runs, used when the payload names no cwd.
    """
    env = os.environ if env is None else env
    record: dict[str, Any] = {"source": "hook", "host": host}
    g: Guard | None = None
    try:
        adapter = adapter_for(host)
        try:
            payload = json.loads(payload_text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HookInputError(f"stdin is not JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise HookInputError(f"stdin must be a JSON object, got {type(payload).__name__}")
        call = adapter.parse(payload)
        here = cwd or os.getcwd()
        if call.cwd is None or not os.path.isabs(call.cwd):
            call = dataclasses.replace(call, cwd=os.path.join(here, call.cwd or "."))
        record.update(call.to_json())
        from guard.decide import Guard

        g = Guard.load(policy=policy or env.get("GUARD_POLICY") or None, cwd=call.cwd)
        if g.loaded.warnings:  # patterns that can never match: recorded, not in the protocol
            record["policy_warnings"] = list(g.loaded.warnings)
        name, why = choose_agent(g, adapter, call, agent, env)
        record.update(agent=name, agent_from=why)
        effects = adapter.effects(call)
        record["effects"] = [e.to_json() for e in effects]
        decision: Decision = g.decide(name, effects, cwd=call.cwd)
        answer = adapter.answer(decision, call)
        record.update(decision.to_json())
        if decision.action.value == "ask" and not adapter.honours_ask:
            record["answered"] = "deny"
        _audit(record, g, cwd)
        return answer
    except BaseException as exc:
        reason = _describe(exc)
        record.update(decision="deny", reason=reason, rule="guard hook failure (fail-closed)")
        try:
            _audit(record, g, cwd)
        except BaseException as audit_exc:
            reason += f"; the audit log could not record it either: {_describe(audit_exc)}"
        return HookAnswer.block(PREFIX + reason)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    kind = type(exc).__name__
    if isinstance(exc, HookInputError | AgentChoiceError):
        return text
    return f"{kind}: {text}" if text else kind
