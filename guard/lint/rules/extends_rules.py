"""Extends family: a later file of an ``extends`` chain quietly undoing an earlier deny."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from guard.effects import Action
from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import PATH_KINDS, LintContext
from guard.match import PatternError, parse_pattern
from guard.policy.loader import _parse, locate_line


def _raw(ctx: LintContext, name: str) -> dict[str, Any]:
    try:
        return _parse(name, ctx.loaded.texts.get(name, ""))
    except Exception:  # already validated when the chain loaded
        return {}


@rule(
    "GL301",
    "extends-reallows",
    Level.ERROR,
    "A later file of an `extends` chain replaces a list, tool entry or default so that"
    " something an earlier file denied is allowed (or asked) again.",
    why="`extends` merges per key and later files win: a child that sets"
    " `write.deny = [...]` replaces the parent's whole deny list. A reviewer reading the"
    " parent believes a path is denied; the merged policy allows it.",
    bad='# base.toml\n[agents.build.write]\ndeny = ["secrets/**"]\n\n# team.toml\n'
    'extends = ["base.toml"]\n[agents.build.write]\ndeny = ["*.pem"]\nallow = ["**"]',
    fix="Repeat the parent's patterns in the child's list (lists are replaced, not"
    " appended), or make the change explicit in the parent.",
    good='# team.toml\nextends = ["base.toml"]\n[agents.build.write]\n'
    'deny = ["secrets/**", "*.pem"]\nallow = ["**"]',
)
def _reallows(ctx: LintContext) -> Iterable[Finding]:
    files = ctx.loaded.files
    if len(files) < 2:
        return
    agents = set(ctx.agents)
    for name in files[:-1]:
        raw = _raw(ctx, name)
        text = ctx.loaded.texts.get(name, "")
        raw_agents = raw.get("agents")
        if not isinstance(raw_agents, dict):
            continue
        for agent, table in raw_agents.items():
            if agent not in agents or not isinstance(table, dict):
                continue
            yield from _kinds(ctx, name, text, agent, table)
            yield from _tools(ctx, name, text, agent, table)


def _later(ctx: LintContext, loc: tuple[str | int, ...], earlier: str) -> str | None:
    """The file that last set ``loc`` when it is not ``earlier``."""
    f = ctx.loaded.file_of(loc)
    return f if f != earlier else None


def _kinds(
    ctx: LintContext, name: str, text: str, agent: str, table: dict[str, Any]
) -> Iterable[Finding]:
    for kind in PATH_KINDS:
        rules = table.get(kind)
        if not isinstance(rules, dict):
            continue
        deny = rules.get("deny")
        if isinstance(deny, list):
            later = _later(ctx, ("agents", agent, kind, "deny"), name)
            for i, item in enumerate(deny if later is not None else []):
                if not isinstance(item, str):
                    continue
                try:
                    p = parse_pattern(item)
                except PatternError:
                    continue
                if p is None or p.negated:
                    continue
                for s in ctx.samples(p):
                    d = ctx.decide(agent, kind, s.path)
                    if d.action is Action.DENY:
                        continue
                    line = locate_line(text, ("agents", agent, kind, "deny", i))
                    yield ctx.finding(
                        "GL301",
                        ("agents", agent, kind, "deny"),
                        f"{name}:{line} denies {kind} {item!r}, but the merged policy"
                        f" {d.action}s {s.shown} ({later} replaces"
                        f" agents.{agent}.{kind}.deny; decided by {d.rule})",
                        "repeat the parent's deny patterns in the later file's list",
                    )
                    break
        if rules.get("default") == "deny":
            d = ctx.decide(agent, kind, None)
            later = _later(ctx, ("agents", agent, kind, "default"), name)
            if d.action is not Action.DENY and later is not None:
                line = locate_line(text, ("agents", agent, kind, "default"))
                yield ctx.finding(
                    "GL301",
                    ("agents", agent, kind, "default"),
                    f"{name}:{line} sets agents.{agent}.{kind}.default = 'deny'; {later}"
                    f" changes it to {d.action!s}",
                    "keep the default, or say why in the later file",
                )


def _tools(
    ctx: LintContext, name: str, text: str, agent: str, table: dict[str, Any]
) -> Iterable[Finding]:
    tools = table.get("tools")
    if not isinstance(tools, dict):
        return
    for tool, action in tools.items():
        if action != "deny" or tool == "*":
            continue
        d = ctx.decide_tool(agent, tool)
        if d.action is Action.DENY:
            continue
        line = locate_line(text, ("agents", agent, "tools", tool))
        yield ctx.finding_for_rule(
            "GL301",
            d,
            f"{name}:{line} denies tool {tool!r} for agent {agent!r}; the merged policy"
            f" answers {d.action!s} ({d.rule})",
            "keep the deny in the later file, or drop it from the earlier one deliberately",
        )
