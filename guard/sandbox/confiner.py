"""The gate's confiner for shell commands: which plan-mode calls run confined instead.

:class:`ShellConfiner` is the :class:`guard.gate.Confiner` of hosts that can
rewrite a tool call (Claude Code, Gemini CLI). For a shell tool call of a
plan-mode agent whose policy sets ``[agents.NAME.sandbox] confine = true``
(the default policy does), when this kernel can confine:

* a command the analysis allows runs confined anyway (static analysis of
  shell is never the last line);
* a command whose only objections are programs the analyser cannot prove
  read-only (``exec`` effects the policy *asks* about: tests, linters, builds,
  interpreters, code it cannot follow) runs confined instead of asking;
* a command whose only write is a cache the program updates only when it can
  (``git status`` and ``git diff`` refresh the stat cache in ``.git/index``) runs
  confined: the kernel refuses the write, git skips it and answers the same. Hosts
  that cannot rewrite a call (Codex, Cursor) have no confiner: there the write is
  refused, and the reason names the spelling that only reads;
* anything else stands as the policy decided: a write or delete the analysis
  can see outside what the policy allows (``echo > src/app.py``), an explicit
  ``deny``, a network or read question, a refused tool.

"Confined" is the helper of :mod:`guard.sandbox.helper`: in namespaces (a
read-only view of everything but the plan directory (regular files), a fresh
private TMPDIR, ``/dev/null`` and the terminal; loopback-only network; its own
PID and IPC namespaces), then Landlock, no capabilities, and the seccomp filter
for system state, other processes and Unix sockets. Where the kernel cannot make
namespaces it falls back to Landlock, capabilities and seccomp alone and says so
in the reason, unless the policy requires a wall (``[agents.NAME.sandbox]
require``): then every such shell call is denied, naming what is missing.
Without Landlock (or on an architecture without a syscall table) it answers None
and today's analysis-only decisions stand (or, with ``require``, the deny).
"""

# Lazy imports: the sandbox modules only to confine a call: the hook path imports this one.

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from guard.effects import Action, EffectKind

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.effects import Effect
    from guard.gate import Confinement, Verdict

RULE = "guard.confined"
#: The rule of a deny for a wall the policy requires and the kernel cannot give.
REQUIRE_RULE = "guard.sandbox-require"


def shell_command(verdict: Verdict) -> str | None:
    """The shell command text of a shell tool call, or None for any other call."""
    call = verdict.call
    if call is None or not any(
        e.kind is EffectKind.TOOL and e.target == "bash" for e in verdict.effects
    ):
        return None
    command = call.input.get("command")
    return command if isinstance(command, str) else None


def confined_run(
    guard: Guard, agent: str, argv: list[str], cwd: str, source: str = "hook"
) -> tuple[list[str] | None, str]:
    """(the helper argv that runs ``argv`` exactly as a plan-mode shell command the hooks
    rewrite runs, why it is safe) — or (None, why not): no Landlock here, or a wall the
    policy requires (``[agents.NAME.sandbox] require``) cannot stack here. What
    ``guard confine`` runs."""
    from guard.sandbox.confine import (
        FALLBACK,
        available,
        confine_argv,
        namespaces_unavailable,
        walls_off,
    )

    required = guard.agent(agent).sandbox.require
    kernel = available()
    if kernel:
        return None, f"the kernel cannot confine commands here: {kernel}"
    spaces = namespaces_unavailable()
    off = walls_off()
    if required and (spaces or off):
        return None, (
            f"the policy requires the {', '.join(required)} wall(s) ([agents.{agent}.sandbox]"
            f" require), and they cannot stack here: {spaces or off}"
        )
    from guard.sandbox.roots import policy_of, socket_paths

    egress: list[str] = []
    if not spaces:
        from guard.sandbox.egress_proxy import EgressSpec

        egress = EgressSpec(agent, os.path.abspath(cwd), policy_of(guard), source).to_argv()
    worktree = guard.roots.worktree
    helper = confine_argv(
        argv, plans=[str(guard.roots.plans)], cwd=cwd, isolate=not spaces,
        sockets=socket_paths(guard, agent), egress=egress,
        worktree=str(worktree) if worktree else None,
    )  # fmt: skip
    plans = guard.roots.describe(str(guard.roots.plans))
    how = f"writes only to {plans}, a private TMPDIR and the terminal"
    if spaces:
        how = f"{how}; {FALLBACK.format(why=spaces)}"
    else:
        how = f"{how}; namespaces, Landlock, seccomp and guard's egress proxy"
    if off:
        how = f"{how}; {off}"
    return helper, how


class ShellConfiner:
    """Turns plan-mode shell calls into ``allow_confined`` (see the module docstring)."""

    def __init__(
        self, available: str | None = None, namespaces: str | None = None, *, build: bool = True
    ) -> None:
        #: why the kernel cannot confine here ("" when it can); probed once, lazily
        self._available = available
        #: why it cannot make namespaces here ("" when it can); probed once, lazily
        self._namespaces = namespaces
        #: build the confined command (False: the decision alone, as ``guard replay`` needs
        #: it: nothing is made on disk, not even the audit key the helper hides)
        self.build = build

    def unavailable(self) -> str:
        if self._available is None:
            from guard.sandbox.confine import available

            self._available = available()
        return self._available

    def no_namespaces(self) -> str:
        if self._namespaces is None:
            from guard.sandbox.confine import namespaces_unavailable

            self._namespaces = namespaces_unavailable()
        return self._namespaces

    def confine(self, verdict: Verdict, guard: Guard) -> Confinement | None:
        from guard.gate import Confinement

        agent = verdict.agent
        command = shell_command(verdict)
        if agent is None or command is None or verdict.call is None:
            return None
        policy = guard.agent(agent)
        if policy.mode != "plan" or not policy.sandbox.confine:
            return None
        cwd = verdict.call.cwd or str(guard.roots.worktree or os.getcwd())
        objections = [e for e in verdict.effects if not self._fine(guard, agent, e, cwd)]
        if any(not self._confinable(guard, agent, e, cwd) for e in objections):
            return None
        if "\0" in command:
            return None
        required = policy.sandbox.require
        kernel = self.unavailable()
        spaces = "" if kernel else self.no_namespaces()
        from guard.sandbox.confine import walls_off

        off = walls_off()
        if required and (kernel or spaces or off):
            return Confinement(
                None,
                f"the policy requires the {', '.join(required)} wall(s) for shell commands in"
                f" plan mode ([agents.{agent}.sandbox] require), and this machine cannot give"
                f" them: {kernel or spaces or off}. Guard refuses the command rather than run it"
                " weaker; read files with the host's read tools, or ask the user to enable"
                " unprivileged user namespaces",
                REQUIRE_RULE,
            )
        if kernel:
            return None
        from guard.sandbox.confine import FALLBACK

        wrapped = self._wrap(command, guard, agent, cwd, spaces) if self.build else command
        caches = [e for e in objections if e.cache and e.target is not None]
        programs = sorted({str(e.target or "unknown code") for e in objections
                           if e not in caches})
        if programs:
            why = f"runs programs guard cannot prove read-only ({', '.join(programs)})"
        elif caches:
            why = (
                f"read-only by analysis but for a cache it updates when it can"
                f" ({', '.join(sorted({str(e.target) for e in caches}))}), which the kernel"
                " refuses here"
            )
        else:
            why = "read-only by analysis"
        plans = guard.roots.describe(str(guard.roots.plans))
        if spaces:
            how = (
                f"writes only to {plans}, a private TMPDIR and the terminal; no capabilities;"
                " system-state syscalls, other processes and Unix sockets refused;"
                f" {FALLBACK.format(why=spaces)}"
            )
        else:
            how = (
                f"a read-only view of everything but {plans}, a private TMPDIR and the terminal;"
                " no network but loopback and guard's egress proxy, which decides each"
                " connection by the policy's network rules; no other processes, local sockets"
                " or host IPC in reach; no capabilities; system-state syscalls refused"
            )
        if off:
            how = f"{how}; {off}"
        return Confinement({"command": wrapped}, f"{why}: runs confined ({how})", RULE)

    @staticmethod
    def _wrap(command: str, guard: Guard, agent: str, cwd: str, spaces: str) -> str:
        from guard.sandbox.confine import wrap_command
        from guard.sandbox.roots import policy_of, socket_paths

        sockets = socket_paths(guard, agent)
        egress: list[str] = []
        if not spaces:
            from guard.sandbox.egress_proxy import EgressSpec

            spec = EgressSpec(agent, os.path.abspath(cwd), policy_of(guard), "hook")
            egress = spec.to_argv()
        worktree = guard.roots.worktree
        return wrap_command(
            command, plans=[str(guard.roots.plans)], cwd=cwd, isolate=not spaces,
            sockets=sockets, egress=egress, worktree=str(worktree) if worktree else None,
        )  # fmt: skip

    @staticmethod
    def _fine(guard: Guard, agent: str, effect: Effect, cwd: str) -> bool:
        return guard.decide(agent, [effect], cwd=cwd).action is Action.ALLOW

    @staticmethod
    def _confinable(guard: Guard, agent: str, effect: Effect, cwd: str) -> bool:
        """An objection confinement answers: a program the policy asks about, a write
        whose target the analysis cannot name (the kernel decides where it lands), or a
        cache the program updates only when it can, outside the plan directory (the kernel
        refuses it there; the program answers the same: ``git status``'s index refresh)."""
        action = guard.decide(agent, [effect], cwd=cwd).action
        if effect.kind is EffectKind.EXEC:
            return action is Action.ASK
        if effect.kind is EffectKind.WRITE and effect.cache and effect.target is not None:
            target = os.path.realpath(os.path.join(cwd, os.path.expanduser(effect.target)))
            plans = os.path.realpath(str(guard.roots.plans))
            return os.path.commonpath([target, plans]) != plans
        return effect.kind in (EffectKind.WRITE, EffectKind.DELETE) and effect.target is None
