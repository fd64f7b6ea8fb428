"""Tool family: tool table names, and the three concepts kept apart per mode."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from guard.effects import CANONICAL_TOOLS
from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import LintContext

#: Tools whose calls may change files; fine in plan mode only when paths confine writes.
WRITE_TOOLS = (
    "bash", "write", "edit", "multiedit", "patch", "apply_patch", "notebook_edit",
    "create_directory", "move", "save_memory",
)  # fmt: skip


def is_wildcard(name: str) -> bool:
    return name == "*" or (name.startswith("mcp__") and "*" in name)


@rule(
    "GL003",
    "unknown-tool",
    Level.WARNING,
    "A tool table names a tool guard's adapters never produce (often a typo or host spelling).",
    why="Adapters map every host's tool names to canonical lowercase names (`Bash` -> `bash`,"
    " `run_shell_command` -> `bash`). An entry under any other name never applies, so the"
    " agent's `*` entry or default decides the tool instead of the rule you wrote.",
    bad='[agents.plan.tools]\nBash = "deny"\n"*" = "allow"',
    fix="Use the canonical name (see docs/tools.md); MCP tools keep their `mcp__server__tool`"
    " names.",
    good='[agents.plan.tools]\nbash = "deny"\n"*" = "deny"',
)
def _unknown_tool(ctx: LintContext) -> Iterable[Finding]:
    known = CANONICAL_TOOLS
    for agent in ctx.agents:
        for name in ctx.loaded.model.agents[agent].tools:
            if name == "*" or name in known or name.startswith("mcp__"):
                continue
            if name.startswith("task:") or name.startswith("unknown:"):
                continue
            close = difflib.get_close_matches(name.lower(), sorted(known), n=1, cutoff=0.7)
            if name.lower() in known:
                hint = f"write {name.lower()!r}: tool names are canonical and lowercase"
            elif close:
                hint = f"did you mean {close[0]!r}?"
            else:
                hint = "use a canonical tool name (docs/tools.md) or remove the entry"
            yield ctx.finding(
                "GL003",
                ("agents", agent, "tools", name),
                f"agents.{agent}.tools: unknown tool {name!r}; this entry never applies",
                hint,
            )


@rule(
    "GL205",
    "plan-update-plan",
    Level.ERROR,
    "A plan-mode agent may use `update_plan` / `todowrite`, the execution checklist.",
    why="Plan mode, the plan artifact and the execution checklist are three separate things."
    " The checklist tracks work in progress; letting a planning agent drive it blurs"
    " planning into executing.",
    bad='[agents.plan.tools]\nupdate_plan = "allow"',
    fix="Deny `update_plan` and `todowrite` in plan-mode agents; the plan goes in the plan"
    " file.",
    good='[agents.plan.tools]\nupdate_plan = "deny"\ntodowrite = "deny"',
)
def _plan_update_plan(ctx: LintContext) -> Iterable[Finding]:
    for agent in ctx.agents:
        if ctx.mode(agent) != "plan":
            continue
        for tool in ("update_plan", "todowrite"):
            d = ctx.decide_tool(agent, tool)
            if ctx.permits(d):
                yield ctx.finding_for_rule(
                    "GL205",
                    d,
                    f"plan-mode agent {agent!r} may use {tool!r} ({d.action}): the execution"
                    " checklist belongs to build mode",
                    f'set agents.{agent}.tools.{tool} = "deny"',
                )


@rule(
    "GL206",
    "build-request-user-input",
    Level.WARNING,
    "A build-mode agent may use `request_user_input`, which belongs to plan mode.",
    why="`request_user_input` is plan mode's way to ask structured questions before work"
    " starts; a build agent that can use it stalls unattended runs and mixes the modes.",
    bad='[agents.build.tools]\n"*" = "allow"',
    fix="Deny `request_user_input` in build-mode agents.",
    good='[agents.build.tools]\nrequest_user_input = "deny"\n"*" = "allow"',
)
def _build_request_input(ctx: LintContext) -> Iterable[Finding]:
    for agent in ctx.agents:
        if ctx.mode(agent) != "build":
            continue
        d = ctx.decide_tool(agent, "request_user_input")
        if ctx.permits(d):
            yield ctx.finding_for_rule(
                "GL206",
                d,
                f"build-mode agent {agent!r} may use 'request_user_input' ({d.action});"
                " it belongs to plan mode",
                f'set agents.{agent}.tools.request_user_input = "deny"',
            )
