"""GL107: a rule whose effect kind can never match what it names.

An ``exec`` pattern that names a program guard's shell analysis models by what it does
(``rm`` deletes, ``cp`` reads and writes, ``curl`` reaches a host) never meets an exec
effect for that program: the rule is dead, and a deny of it protects nothing. This is
what a host's "deny the program rm" becomes when converted naively.
"""

from __future__ import annotations

# Lazy imports: the shell analysis only when an exec pattern names a program (lint speed).
import re
from collections.abc import Iterable

from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import LintContext
from guard.lint.rules.pattern_rules import loc_of

#: A last path component that is a plain program name (no glob characters).
_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")


def runs_as_a_program(name: str) -> bool:
    """Whether guard's shell analysis gives a run of ``name`` an exec effect of ``name``."""
    from guard.analysis.shell.registry import PROGRAMS

    if name not in PROGRAMS:
        return True  # an unknown program is an exec of itself
    from guard.importers.common import program_effects

    return program_effects(name)[0]


@rule(
    "GL107",
    "kind-never-matches",
    Level.ERROR,
    "An `exec` pattern names a program that guard never sees as a program run (`rm` is a"
    " delete, `cp` a read and a write, `curl` a connection).",
    why="Guard decides such programs by their effects, so no exec effect ever carries their"
    " name: the rule never matches, and a deny of it protects nothing (`rm -rf src` is then"
    " decided by the delete rules).",
    bad='[agents.build.exec]\ndeny = ["//**/rm"]',
    fix="Write the rule for the effect the program has: `delete` (or `write`, `network`)"
    " patterns for the paths or hosts it must not touch.",
    good='[agents.build.delete]\ndeny = ["src/**"]',
)
def _exec_of_a_modelled_program(ctx: LintContext) -> Iterable[Finding]:
    cache: dict[str, bool] = {}
    for agent in ctx.agents:
        for list_name in ("deny", "ask", "allow"):
            for p in ctx.patterns(agent, "exec", list_name):
                name = p.body.rstrip("/").rsplit("/", 1)[-1]
                if p.negated or not _NAME.match(name):
                    continue
                if name not in cache:
                    cache[name] = runs_as_a_program(name)
                if cache[name]:
                    continue
                yield ctx.finding(
                    "GL107",
                    loc_of(agent, "exec", list_name, p),
                    f"agents.{agent}.exec.{list_name}: {p.text!r} never matches: guard decides"
                    f" {name!r} by what it does (its file or network effects), not as a"
                    " program run",
                    f"write {list_name} rules of the kind {name!r} has (e.g. delete, write)",
                )
