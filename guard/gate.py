"""The gate: the one place where guard decides a tool call.

Every front door (the hook runner, ``guard check``, the MCP proxy) hands the gate
a :class:`~guard.effects.ToolCall` and gets a :class:`Verdict` back::

    host payload / MCP tools/call / CLI options --front door--> ToolCall
    ToolCall --Gate.effects (guard.analysis.effects_of)--> [Effect]
    --Gate.session_mode--> the deciding session's guard mode, asked only when neither
    --agent nor $GUARD_AGENT names the agent (the session: a plan session the agent run
    is bound to, of any worktree the call's cwd or a changed path lies in, or of one the
    run was seen in; else the nearest worktree's; :mod:`guard.planning.binding`)
    --resolve--> (policy, agent, why): the one decision order, and the front doors' one
    reader of $GUARD_POLICY and $GUARD_AGENT for it (Guard.load reads $GUARD_POLICY too,
    for the library's own callers):
    --agent > $GUARD_AGENT > the deciding session's mode > the host's hint --> agent
    (agent, effects) --Guard.decide--> Decision
    Decision --confiner (plan-mode calls)--> Verdict
    Verdict --Gate.record--> the audit log (the front door records what it answers)
    Verdict --front door--> the host's answer

**Verdict.** ``allow``, ``ask``, ``deny`` or ``allow_confined``: allowed because
the call will run under kernel confinement. An ``allow_confined`` verdict
carries ``updated_input``, the whole tool input the host must run instead (the
shell command wrapped for confined execution); hosts that cannot rewrite a call
answer it as a deny (see :mod:`guard.hooks.adapter`).

**Fail closed.** Any exception anywhere in the pipeline (the policy cannot be
loaded, no agent can be chosen, malformed input, a bug in a dialect, the session lookup, the
confiner, the audit sink) is a ``deny`` whose reason is the error, with
``failed=True`` so that a front door may answer it in its strongest form (the
hook exits 2). A verdict the audit sink cannot record becomes such a deny too.

**Audit.** :meth:`Gate.decide` writes nothing; :meth:`Gate.record` writes a
verdict to the gate's :class:`~guard.audit.sinks.AuditSink` and is the only builder
of a verdict record: one shape for every front door, so the hook's, the check's and
the proxy's records read the same; the front door adds its own context (host,
event, JSON-RPC method, ...) and records when it knows what it answers.

**One gate per kind of front door.** :class:`Gate` reads a call with
:func:`guard.analysis.effects_of` and asks the planning sessions of the call's worktree
for its mode (``sessions=False``: none asked, for the offline readers, replay and
review, and the egress relay); the MCP proxy's gate is a subclass that overrides the
two (:class:`guard.mcp.gate_side.McpGate`: its own reading of MCP calls, its own
session).

**The confiner seam.** A :class:`Confiner` (none by default) is asked about
every call of a plan-mode agent, whatever the policy decided (a call analysis
allows may still be run confined, since analysis is never the last line).
It answers ``None`` (the policy's verdict stands) or a :class:`Confinement`:
the tool input to run instead and why that is safe; the verdict becomes
``allow_confined`` (or, for a confinement the policy requires and the kernel
cannot give, a ``deny`` with the reason). The sandbox layer provides the confiner that wraps shell
commands for confined execution; the gate knows nothing of how.

This module must stay cheap to import: the hook imports it on every call. The
policy core, the dialects and the planning runtime are imported when used.
"""

# Lazy imports: the policy core, the dialects, the planning sessions and the fleet
# senders, for the hook's start-up (the hook imports this module on every call).

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from guard.effects import Action, Decision, Effect, EffectKind, GuardError, ToolCall
from guard.planning.found import ModeFound

if TYPE_CHECKING:
    from guard.audit.sinks import AuditSink
    from guard.decide import Guard

__all__ = [
    "AgentChoiceError",
    "Confinement",
    "Confiner",
    "Gate",
    "ModeHint",
    "Resolved",
    "ToolCall",
    "Verdict",
    "VerdictAction",
    "policy_for",
    "policy_named",
    "resolve",
    "sessions_decide",
]


class VerdictAction(enum.StrEnum):
    """What a front door does with a call."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"
    ALLOW_CONFINED = "allow_confined"


class AgentChoiceError(GuardError):
    """No agent can be chosen for this call."""


@dataclass(frozen=True, slots=True)
class ModeHint:
    """The guard mode (``plan`` or ``build``) a host's own state suggests, and where from."""

    mode: str
    source: str


@dataclass(frozen=True, slots=True)
class Confinement:
    """A confiner's answer: run ``updated_input`` (the whole tool input) instead, confined;
    or, with ``updated_input`` None, refuse the call (the confinement the policy requires
    cannot be given here)."""

    updated_input: Mapping[str, Any] | None
    reason: str
    rule: str = "guard.confined"


class Confiner(Protocol):
    """Decides whether a call the policy refuses may run confined instead.

    Asked for every call of a plan-mode agent (allow, ask or deny); ``verdict`` is
    the provisional verdict (its call, agent, effects, decision).
    Return None to let it stand. An exception is a deny (fail closed).
    """

    def confine(self, verdict: Verdict, guard: Guard) -> Confinement | None: ...


@dataclass(frozen=True, slots=True)
class Verdict:
    """The gate's answer for one tool call."""

    action: VerdictAction
    reason: str
    rule: str
    call: ToolCall | None = None
    agent: str | None = None
    agent_from: str = ""
    effects: tuple[Effect, ...] = ()
    #: The policy's decision (None when the pipeline failed before deciding).
    decision: Decision | None = None
    #: For allow_confined: the whole tool input the host must run instead.
    updated_input: Mapping[str, Any] | None = None
    #: The pipeline failed: the reason is the error.
    failed: bool = False
    #: The policy that decided (None when none was loaded): its warnings, fleet fields
    #: and audit settings go with the record (:meth:`Gate.record`).
    guard: Guard | None = field(default=None, compare=False, repr=False)

    @property
    def allowed(self) -> bool:
        return self.action in (VerdictAction.ALLOW, VerdictAction.ALLOW_CONFINED)

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.action.value, "reason": self.reason, "rule": self.rule}

    def resolved(self, action: VerdictAction, reason: str) -> Verdict:
        """This verdict after a question was answered (an ask became allow or deny)."""
        return replace(self, action=action, reason=reason)


#: ``why`` of an agent $GUARD_AGENT names.
FROM_ENV = "$GUARD_AGENT"


def agent_for_mode(g: Guard, mode: str) -> str:
    """The policy's agent for a guard mode: its plan agent, or its build agent."""
    found = g.plan_agent_name if mode == "plan" else g.build_agent_name
    if found is not None and mode in ("plan", "build"):
        return found
    names = list(g.agent_names)
    raise AgentChoiceError(
        f"the policy defines no agent with mode {mode!r} (agents: {', '.join(names) or 'none'})"
    )


def env_agent(env: Mapping[str, str]) -> str:
    """The agent ``$GUARD_AGENT`` names in ``env`` ("" when none)."""
    return env.get("GUARD_AGENT", "").strip()


def sessions_decide(agent: str | None, env: Mapping[str, str]) -> bool:
    """Whether the sessions' mode can choose the agent: neither ``agent`` (--agent) nor
    ``$GUARD_AGENT`` names one (only then is a session asked: :meth:`Gate.resolve`)."""
    return not agent and not env_agent(env)


def agent_from(
    g: Guard, agent: str | None, env_agent: str, found: ModeFound | None, hint: ModeHint | None
) -> tuple[str, str]:
    """:func:`resolve`'s choice of agent once its inputs are known: the same inputs, the
    same answer."""
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
    if env_agent:
        return known(env_agent, FROM_ENV), FROM_ENV
    if found is not None:
        mode = found.mode
        if mode in ("plan", "build"):  # a mode picks the agent declared with it, not a name
            return agent_for_mode(g, mode), found.why
        return known(mode, "the session's mode"), found.why
    if hint is not None:
        return agent_for_mode(g, hint.mode), hint.source
    return agent_for_mode(g, "build"), "no mode given: build"


def policy_named(policy: str | None, env: Mapping[str, str]) -> str | None:
    """The policy a front door names: ``policy`` (its --policy), else ``$GUARD_POLICY``,
    else None (then :meth:`guard.decide.Guard.load` finds the worktree's, else the default)."""
    return policy or env.get("GUARD_POLICY") or None


@dataclass(frozen=True, slots=True)
class Resolved:
    """:func:`resolve`'s answer: the policy that decides a call, its agent, and why.

    ``found``: the deciding session's guard mode when a session was asked and gave one
    (it names the plan file a refusal points to).
    """

    guard: Guard
    agent: str
    why: str
    found: ModeFound | None = None


def policy_for(
    call: ToolCall,
    found: ModeFound | None,
    env: Mapping[str, str],
    *,
    guard: Guard | None = None,
    policy: str | None = None,
    shared: bool = False,
) -> Guard:
    """The policy for ``call`` (:func:`resolve`'s half): of the deciding session's worktree
    when ``found`` names one (even over ``guard``, fixed for another worktree), else
    ``guard``, else the one :func:`policy_named` names or the call's cwd finds."""
    if guard is not None and (
        found is None or found.worktree is None or str(guard.roots.worktree) == found.worktree
    ):
        return guard
    from guard.decide import Guard

    named = policy_named(policy, env)
    worktree = found.worktree if found is not None else None
    if shared:  # a long-lived front door: the compiled policy while its files read the same
        return Guard.load_shared(policy=named, cwd=call.cwd, worktree=worktree)
    return Guard.load(policy=named, cwd=call.cwd, worktree=worktree)


def resolve(
    call: ToolCall,
    env: Mapping[str, str],
    *,
    policy: str | None = None,
    agent: str | None = None,
    hint: ModeHint | None = None,
    found: ModeFound | None = None,
    guard: Guard | None = None,
    shared: bool = False,
    memo: dict[tuple[Any, ...], tuple[str, str]] | None = None,
) -> Resolved:
    """The one decision order: which policy and which agent decide ``call``, and why.

    Every front door's one reader of ``$GUARD_AGENT`` and ``$GUARD_POLICY`` (from ``env``)
    for that choice (outside the front doors, :meth:`guard.decide.Guard.load` reads
    ``$GUARD_POLICY`` for the library's callers); every front door and ``guard mode`` come
    here. ``found``: the deciding session's guard mode, which the caller asks for only when
    :func:`sessions_decide` (:meth:`Gate.session_mode`; ``guard mode``'s own lookup);
    ignored when --agent or ``$GUARD_AGENT`` decides. The agent: ``agent`` (--agent) >
    ``$GUARD_AGENT`` > ``found`` > the host's ``hint`` > build. The policy: the deciding
    session's worktree's when ``found`` names one (even over ``guard``, fixed for another
    worktree), else ``guard``, else ``policy`` > ``$GUARD_POLICY`` > the cwd's worktree's >
    the built-in default (``shared``: reuse the compiled one while its files read the
    same). ``memo`` keeps agent choices made with ``guard``.
    Raises :class:`~guard.effects.GuardError` when no policy or agent can be chosen.
    """
    named = env_agent(env)
    if agent or named:
        found = None
    g = policy_for(call, found, env, guard=guard, policy=policy, shared=shared)
    if memo is None or g is not guard:  # a policy loaded for this call: nothing to keep
        name, why = agent_from(g, agent, named, found, hint)
    else:
        key = (agent, named, found, hint)
        chosen = memo.get(key)
        if chosen is None:
            chosen = agent_from(g, agent, named, found, hint)
            if len(memo) < 64:
                memo[key] = chosen
        name, why = chosen
    return Resolved(g, name, why, found)


def describe(exc: BaseException) -> str:
    """An exception as a one-line reason: the message of guard's own errors, else kind: text."""
    text = str(exc).strip()
    if isinstance(exc, GuardError):
        return text or type(exc).__name__
    kind = type(exc).__name__
    return f"{kind}: {text}" if text else kind


FAIL_RULE = "guard.gate: fail closed"


@dataclass(frozen=True)
class Gate:
    """The pipeline, configured once per front door (frozen: the confiner, the sink and
    the rest are given when it is built).

    ``guard``: a loaded policy; without one, each call loads ``policy`` (else
    ``$GUARD_POLICY``, else the worktree's, else the default) from the call's cwd.
    ``agent``: the --agent of the front door. ``sessions``: ask the planning sessions
    for the call's guard mode (:meth:`session_mode`); False for the offline readers
    (replay, review) and the egress relay. ``sink``: where records go (None: nowhere).
    ``source``: names the front door in records.

    A call's effects are :meth:`effects`, its session's mode :meth:`session_mode`; the
    MCP proxy's gate overrides both (:class:`guard.mcp.gate_side.McpGate`).
    """

    guard: Guard | None = None
    policy: str | None = None
    agent: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    sessions: bool = True
    sink: AuditSink | None = None
    confiner: Confiner | None = None
    source: str = "gate"
    #: Reuse the compiled policy across calls while its files read the same
    #: (:meth:`guard.decide.Guard.load_shared`): for long-lived front doors (hookd).
    shared: bool = False
    #: The sentence a plan-mode refusal carries (where the plan goes). None: the deciding
    #: session's plan file, else the plan directory (:func:`guard.planning.runtime.plan_refusal`).
    refusal: Callable[[ToolCall], str] | None = None
    #: The agent chosen for (--agent, $GUARD_AGENT, mode, hint) with ``guard`` fixed: the
    #: mode is still read for every call, so a mode change counts from the next call.
    _agents: dict[tuple[Any, ...], tuple[str, str]] = field(
        default_factory=dict, init=False, repr=False
    )

    def load(self, call: ToolCall, found: ModeFound | None = None) -> Guard:
        """The policy for ``call`` as this front door finds it (:func:`policy_for`); without
        ``found``, as the call's cwd alone tells (no session asked)."""
        return policy_for(
            call, found, self.env, guard=self.guard, policy=self.policy, shared=self.shared
        )

    def effects(self, call: ToolCall) -> list[Effect]:
        """What ``call`` does: :func:`guard.analysis.effects_of` (the dialect tables)."""
        from guard.analysis import effects_of

        return effects_of(call)

    def session_mode(self, call: ToolCall, effects: Sequence[Effect]) -> ModeFound | None:
        """The guard mode of the session deciding for ``call``
        (:func:`guard.planning.binding.ruling`: a plan session of any worktree the call or
        a changed path lies in, else the nearest worktree's session); None when there is
        none or this gate asks no sessions (``sessions``)."""
        if not self.sessions:
            return None
        from guard.planning.binding import ruling

        return ruling(call, effects)

    def resolve(
        self, call: ToolCall, hint: ModeHint | None = None, effects: Sequence[Effect] = ()
    ) -> Resolved:
        """:func:`resolve` with this front door's policy, agent, environment and the
        session's mode (asked only when neither --agent nor $GUARD_AGENT decides)."""
        found = None
        if sessions_decide(self.agent, self.env):
            found = self.session_mode(call, effects)
        return resolve(
            call, self.env, policy=self.policy, agent=self.agent, hint=hint, found=found,
            guard=self.guard, shared=self.shared, memo=self._agents,
        )  # fmt: skip

    def decide(
        self,
        call: ToolCall,
        *,
        hint: ModeHint | None = None,
        effects: Sequence[Effect] | None = None,
    ) -> Verdict:
        """Decide ``call``; nothing is written (:meth:`record` does). Never raises.

        ``effects`` skips the analysis (``guard check KIND PATH`` knows them).
        """
        g: Guard | None = None
        try:
            seen = list(effects) if effects is not None else self.effects(call)
            if not all(isinstance(e, Effect) for e in seen):
                raise TypeError(f"the analysis of {call.name!r} returned non-effects")
            chosen = self.resolve(call, hint, seen)  # the policy, the agent, the session
            g = chosen.guard
            verdict = self._decide(chosen, call, seen)
        except Exception as exc:  # fail closed, whatever went wrong
            verdict = replace(self.failure(call, exc), guard=g)
        return verdict

    def _decide(self, chosen: Resolved, call: ToolCall, effects: list[Effect]) -> Verdict:
        """The policy's decision for ``effects``, the plan-mode sentence, the confiner's
        answer and the session's note, in that order."""
        g, name, why, mode = chosen.guard, chosen.agent, chosen.why, chosen.found
        decision = g.decide(name, effects, cwd=call.cwd)
        reason = decision.reason
        detail = decision.effect.detail if decision.effect is not None else None
        if detail and decision.action is not Action.ALLOW and detail not in reason:
            reason = f"{reason} ({detail})"  # what the analysis saw, e.g. the read-only form
        planning = g.agent(name).mode == "plan"
        # the plan-mode paragraph (where the plan goes) only where the refusal is of a change
        # (a write, a delete, a tool plan mode does not offer), not of a read, a connection
        # or a tool it only asks about (a web fetch)
        kind = decision.effect.kind if decision.effect is not None else None
        changes = kind is None or kind in (EffectKind.WRITE, EffectKind.DELETE) or (
            kind is EffectKind.TOOL and decision.action is Action.DENY)
        if decision.action is not Action.ALLOW and planning and changes:
            if self.refusal is not None:
                told = self.refusal(call)
            else:
                from guard.planning.runtime import plan_refusal  # tells the model where to write

                where = mode.worktree if mode is not None and mode.worktree else call.cwd
                sid = mode.session if mode is not None and mode.session else call.session
                told = plan_refusal(where, sid)
            reason = f"{reason}. {told}"
        verdict = Verdict(
            VerdictAction(decision.action.value),
            reason,
            decision.rule,
            call,
            name,
            why,
            tuple(effects),
            decision,
            guard=g,
        )
        if self.confiner is not None and planning:
            confined = self.confiner.confine(verdict, g)
            if confined is not None:
                rewrite = confined.updated_input
                verdict = replace(
                    verdict,
                    action=VerdictAction.DENY if rewrite is None else VerdictAction.ALLOW_CONFINED,
                    reason=confined.reason,
                    rule=confined.rule,
                    updated_input=None if rewrite is None else dict(rewrite),
                )
        if mode is not None and mode.note and not verdict.allowed:
            verdict = replace(verdict, reason=f"{verdict.reason} {mode.note}")
        return verdict

    def failure(self, call: ToolCall | None, exc: BaseException) -> Verdict:
        """The deny verdict for an error in the pipeline: its reason is the error."""
        return Verdict(
            VerdictAction.DENY, describe(exc), FAIL_RULE, call, self.agent, failed=True
        )

    def record(
        self,
        verdict: Verdict,
        context: Mapping[str, Any] | None = None,
        answered: Callable[[Verdict], str] | None = None,
        guard: Guard | None = None,
        host_agent: tuple[str | None, str | None] | None = None,
    ) -> Verdict:
        """Write the verdict's record to the sink (none: nothing); the verdict as it stands
        then: a record that cannot be written makes it a deny (fail closed).

        ``context``: the front door's own fields (host, event, JSON-RPC method, ...);
        ``answered``: what the host will actually be told (recorded when it differs);
        ``guard``: the policy whose log and fleet fields apply (default: the deciding one);
        ``host_agent``: the agent's (name, version) when the front door knows them (the MCP
        client's; default: a hook's host, its version from the context).
        """
        if self.sink is None:
            return verdict
        g = guard if guard is not None else verdict.guard
        try:
            from guard.fleet.records import stamp

            record = _record_of(verdict, self.source, context)
            if g is not None and g.loaded.warnings:  # patterns that can never match (GL101)
                record["policy_warnings"] = list(g.loaded.warnings)
            if answered is not None:
                told = answered(verdict)
                if told != verdict.action.value:
                    record["answered"] = told
            call = verdict.call
            if host_agent is None:
                host = record.get("host") if self.source == "hook" else None
                host_agent = (host if isinstance(host, str) else None, None)
            stamp(record, g, session=call.session if call is not None else None,
                  host_agent=host_agent[0], host_agent_version=host_agent[1])
            self.sink.write(record, g.roots if g is not None else None)
            if g is not None and not getattr(self.sink, "ships", False):
                from guard.fleet.syslog import ship

                ship(g.audit_settings, [record], g.roots.data)  # never raises, never waits
        except Exception as exc:
            reason = f"the audit log could not record the verdict: {describe(exc)}"
            if verdict.failed:
                reason = f"{verdict.reason}; {reason}"
            return replace(
                verdict, action=VerdictAction.DENY, reason=reason, rule=FAIL_RULE, failed=True
            )
        return verdict


def _record_of(
    verdict: Verdict, source: str, context: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The audit record's one shape, for every front door (only :meth:`Gate.record` builds it).

    ``type`` and ``source`` first, then the front door's ``context``, the call
    (dialect, tool_name, cwd, session_id), the agent and why, the effects, the
    deciding effect, and the verdict (decision, reason, rule).
    """
    out: dict[str, Any] = {"type": "verdict", "source": source}
    if context:
        out.update(context)
    if verdict.call is not None:
        out.update(verdict.call.to_json())
    if verdict.agent is not None:
        out["agent"] = verdict.agent
    if verdict.agent_from:
        out["agent_from"] = verdict.agent_from
    if verdict.effects:
        out["effects"] = [e.to_json() for e in verdict.effects]
    decision = verdict.decision
    if decision is not None and decision.effect is not None:
        out["effect"] = decision.effect.to_json()
    if decision is not None and decision.action.value != verdict.action.value:
        out["policy_decision"] = decision.action.value
    if verdict.updated_input is not None:
        out["updated_input"] = dict(verdict.updated_input)
    out.update(verdict.to_json())
    return out
