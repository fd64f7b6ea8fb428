"""Plan-mode shell commands on hosts whose hooks can only allow or deny.

:class:`GrammarConfiner` is the :class:`guard.gate.Confiner` of hosts that cannot rewrite
a tool call (Codex CLI, Cursor). There the hook's answer is the last word before bash
runs the command, so a plan-mode shell command is allowed in two cases only:

* it is a sentence of guard's own grammar (:mod:`guard.analysis.shell.grammar`: bash,
  dash and guard read it alike), its canonical spelling analysed without any nested
  shell script (no ``sh -c``, ``xargs sh``, ``find -exec sh -c``...) is allowed by the
  policy, and so is the command as given;
* it is exactly the **confined form** ``GUARD confine -- ARGV...`` with guard's
  absolute path (:func:`confined_form`), whatever ARGV does: the kernel decides
  (``guard confine`` runs it as the rewriting hosts' confined commands run).

Everything else is refused, and the reason hands the model the confined form of its
own command, quoted so that it runs exactly that command.
"""

# Lazy imports: the shell analysis and the grammar only for a shell call (hook start-up).

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from guard.effects import Action, EffectKind

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.effects import Effect
    from guard.gate import Confinement, Verdict

#: The rule of a refusal for a command outside guard's grammar or found not read-only.
RULE = "guard.grammar"
#: The rule of an allowed confined form.
CONFINED_RULE = "guard.confined"


def guard_program() -> list[str]:
    """The argv prefix that runs guard: its absolute path (the ``guard`` script beside this
    interpreter, else the one on PATH), else this interpreter with ``-m guard``."""
    import shutil

    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "guard")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside]
    found = shutil.which("guard")
    if found and os.path.isabs(found):
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "guard"]


def quote(word: str) -> str:
    """``word`` quoted so that bash and dash read it back exactly (single quotes; a quote
    inside as ``"'"``), and so that the quoted form stays in guard's grammar."""
    if word and all(c.isascii() and (c.isalnum() or c in "_@%+=:,./-") for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def confined_form(command: str, program: list[str] | None = None) -> str:
    """The confined form of a shell command: ``GUARD confine -- bash -c 'COMMAND'``."""
    argv = [*(program or guard_program()), "confine", "--", "bash", "-c", command]
    return " ".join(quote(a) for a in argv)


def is_confined_form(command: str, program: list[str] | None = None) -> bool:
    """Whether ``command`` is exactly one ``GUARD confine -- ARGV...`` command (with guard's
    absolute path), in guard's grammar except that a single-quoted word may hold any
    character but the quote (bash and dash read single quotes alike, byte for byte)."""
    from guard.analysis.shell.grammar import NotInGrammar, parse

    prefix = [*(program or guard_program()), "confine", "--"]
    try:
        sentence = parse(command, literal_quotes=True)
    except NotInGrammar:
        return False
    if len(sentence.pipelines) != 1 or len(sentence.pipelines[0]) != 1:
        return False
    simple = sentence.pipelines[0][0]
    argv = list(simple.argv)
    return (
        not simple.redirects
        and len(argv) > len(prefix)
        and argv[: len(prefix)] == prefix
        and os.path.isabs(argv[0])
    )


class GrammarConfiner:
    """Allows a plan-mode shell command only in guard's grammar or in the confined form
    (see the module docstring)."""

    def __init__(self, program: list[str] | None = None) -> None:
        self._program = program

    @property
    def program(self) -> list[str]:
        if self._program is None:
            self._program = guard_program()
        return self._program

    def confine(self, verdict: Verdict, guard: Guard) -> Confinement | None:
        from guard.gate import Confinement
        from guard.sandbox.confiner import shell_command

        command = shell_command(verdict) or _argv_text(verdict)
        call, agent = verdict.call, verdict.agent
        if command is None or call is None or agent is None:
            return None
        if guard.agent(agent).mode != "plan":
            return None
        if is_confined_form(command, self.program):
            return Confinement(
                dict(call.input),
                "the confined form: guard confine runs it under the kernel's confinement"
                " for this worktree's plan session, which decides what it may change",
                CONFINED_RULE,
            )
        why = self._outside(command, verdict, guard, agent)
        if why is None:
            return None  # in the grammar and read-only: the policy's allow stands
        form = confined_form(command, self.program)
        return Confinement(
            None,
            f"{why}. Run it confined instead, exactly as: {form}",
            RULE,
        )

    def _outside(self, command: str, verdict: Verdict, guard: Guard, agent: str) -> str | None:
        """Why the command may not run directly, or None when it may."""
        from guard.analysis.shell.grammar import NotInGrammar, parse, render
        from guard.analysis.shell.walker import analyse_flat

        try:
            sentence = parse(command)
        except NotInGrammar as exc:
            return (
                f"in plan mode this host's hook can only allow or refuse, and this command"
                f" is outside guard's shell grammar ({exc})"
            )
        if not verdict.allowed:
            return verdict.reason
        call = verdict.call
        assert call is not None
        cwd = call.cwd or str(guard.roots.worktree or os.getcwd())
        found, nested = analyse_flat(render(sentence), cwd)
        if nested is not None:
            return (
                f"in plan mode this host's hook can only allow or refuse, and this command"
                f" runs a shell script guard would have to parse again ({nested})"
            )
        tools = [e for e in verdict.effects if e.kind is EffectKind.TOOL]
        decision = guard.decide(agent, [*tools, *_under(found, verdict.effects)], cwd=cwd)
        if decision.action is not Action.ALLOW:
            return decision.reason
        return None


def _argv_text(verdict: Verdict) -> str | None:
    """A shell tool's argv form (older Codex ``shell``: ``["bash", "-lc", "…"]``) as the
    shell text that runs the same argv, each word quoted: decided like a string command."""
    call = verdict.call
    if call is None or not any(e.kind is EffectKind.TOOL and e.target == "bash"
                               for e in verdict.effects):
        return None
    for key in ("command", "cmd"):
        value = call.input.get(key)
        if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
            return " ".join(quote(a) for a in value)
    return None


def _under(found: list[Effect], given: tuple[Effect, ...]) -> list[Effect]:
    """The canonical spelling's effects, as the shell tool reported the original's (a
    workdir the tool names stays the base of relative paths)."""
    workdirs = [e.target for e in given if e.kind is EffectKind.READ
                and e.detail.endswith("runs in this directory") and e.target]
    if not workdirs:
        return found
    from guard.analysis.dialect import under
    from guard.effects import Effect

    base = workdirs[0]
    return [Effect(e.kind, under(base, e.target), e.detail)
            if e.target is not None and e.kind.value in ("read", "write", "delete") else e
            for e in found]
