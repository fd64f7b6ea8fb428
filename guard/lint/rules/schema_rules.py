"""Schema family: the file must load. These findings come from the loader's errors."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import ALL_KINDS, LintContext
from guard.policy.valid import Agent

_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<rest>.*)$")
_AGENT_KEY = re.compile(r"^agents\.(?P<agent>[^\s:.]+)\.(?P<key>[^.\s:\[]+): unknown key")


@rule(
    "GL001",
    "schema-error",
    Level.ERROR,
    "The policy file does not load: invalid TOML or JSON, an unknown key, a wrong value.",
    why="Guard refuses a policy it cannot read completely: every agent using it is denied"
    " everything (fail closed) until the file is fixed.",
    bad='version = 1\n[agents.plan]\nmode = "plan"\ndefault = "maybe"',
    fix="Follow the message: it names the file, the line, the key and what is expected."
    " `guard schema` prints the JSON schema for editor completion.",
    good='version = 1\n[agents.plan]\nmode = "plan"\ndefault = "deny"',
)
def _schema(ctx: LintContext) -> Iterable[Finding]:
    return ()  # reported by the runner from the loader's errors


@rule(
    "GL002",
    "unknown-effect-kind",
    Level.ERROR,
    "An agent table names an effect kind (or key) guard does not know, e.g."
    " `[agents.plan.writes]`.",
    why="A misspelt kind is not a harmless typo: the rules you meant for `write` never apply,"
    " and the kind's default decides instead. Guard refuses to load such a policy.",
    bad='[agents.plan.writes]\nallow = ["{plans}/*.md"]',
    fix="Use one of the kinds read, write, delete, exec, network (or another agent key:"
    " mode, default, description, tools, subagents, protected, sandbox).",
    good='[agents.plan.write]\nallow = ["{plans}/*.md"]',
)
def _kind(ctx: LintContext) -> Iterable[Finding]:
    return ()  # reported by the runner from the loader's errors


def findings_from_problems(problems: list[str], fallback: str) -> list[Finding]:
    """Turn the loader's located problem lines into GL001 / GL002 findings."""
    out: list[Finding] = []
    for problem in problems:
        m = _LINE.match(problem)
        if m is None:
            out.append(Finding("GL001", problem, fallback, 1, "fix the policy file"))
            continue
        rest = m.group("rest")
        km = _AGENT_KEY.match(rest)
        if km is not None:
            key = km.group("key")
            choices = [*ALL_KINDS, *Agent.__match_args__]
            close = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            out.append(
                Finding(
                    "GL002",
                    f"agents.{km.group('agent')}: unknown effect kind or key {key!r}",
                    m.group("file"),
                    int(m.group("line")),
                    f"{hint}effect kinds are {', '.join(ALL_KINDS)}",
                )
            )
            continue
        out.append(Finding("GL001", rest, m.group("file"), int(m.group("line")), ""))
    return out
