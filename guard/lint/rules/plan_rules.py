"""Plan family: is a plan-mode agent really confined to its plan file?

Every check decides with the real evaluator on the imaginary roots (see
:mod:`guard.lint.rule_context`): the fixed probes, every sample of every write
and delete pattern, and an unknown target. Any write or delete that is
allowed or asked outside ``{plans}/*.md`` is a leak.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from guard.effects import Decision
from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import LISTS, PLAN_PROBE, PROBES, WRITE_KINDS, LintContext
from guard.lint.rules.tool_rules import WRITE_TOOLS
from guard.match import Pattern


@dataclass(frozen=True, slots=True)
class Leak:
    kind: str
    path: str | None  # absolute, None for an unknown target
    shown: str  # the path as {root}/rel, or "an unknown target"
    decision: Decision


def plan_agents(ctx: LintContext) -> list[str]:
    return [a for a in ctx.agents if ctx.mode(a) == "plan"]


def pattern_rule(ctx: LintContext, agent: str, kind: str, list_name: str, p: Pattern) -> str:
    """The ``rule`` text the evaluator gives for a decision made by ``p``."""
    src = p.source
    loc = f"agents.{agent}.{kind}.{list_name}"
    return f"{src.file}:{src.line}: {loc}[{src.index}] {p.text!r}" if src else loc


def _candidates(ctx: LintContext, agent: str, kind: str) -> list[tuple[str, str]]:
    out = [(ctx.expand(p), p) for p in PROBES]
    for list_name in LISTS:
        for p in ctx.patterns(agent, kind, list_name):
            out.extend((s.path, s.shown) for s in ctx.samples(p))
    return out


def leaks(ctx: LintContext, agent: str) -> list[Leak]:
    """Writes and deletes ``agent`` may do (allow or ask) outside ``{plans}/*.md``."""
    key = f"leaks:{agent}"
    cached = ctx.cache.get(key)
    if cached is not None:
        return cached  # type: ignore[return-value]
    found: list[Leak] = []
    for kind in WRITE_KINDS:
        d = ctx.decide(agent, kind, None)
        if ctx.permits(d):
            found.append(Leak(kind, None, "an unknown target", d))
        seen: set[str] = set()
        for path, shown in _candidates(ctx, agent, kind):
            if path in seen or ctx.is_plan_file(path):
                continue
            seen.add(path)
            d = ctx.decide(agent, kind, path)
            if ctx.permits(d):
                found.append(Leak(kind, path, shown, d))
    ctx.cache[key] = found
    return found


def broad_patterns(ctx: LintContext, agent: str) -> dict[str, tuple[str, Pattern, Leak]]:
    """Rule text -> (list name, pattern, an example leak) for plan exceptions that are too broad."""
    plan_file = ctx.expand(PLAN_PROBE)
    by_rule: dict[str, Leak] = {}
    for leak in leaks(ctx, agent):
        by_rule.setdefault(leak.decision.rule, leak)
    out: dict[str, tuple[str, Pattern, Leak]] = {}
    for kind in WRITE_KINDS:
        for list_name in ("allow", "ask"):
            for p in ctx.patterns(agent, kind, list_name):
                if p.negated or not ctx.matches(p, plan_file):
                    continue
                r = pattern_rule(ctx, agent, kind, list_name, p)
                if r in by_rule:
                    out[r] = (list_name, p, by_rule[r])
        # a `!` exception in the deny list lets the rest decide: report it when what
        # it lets through is permitted
        for p in ctx.patterns(agent, kind, "deny"):
            if not p.negated or not ctx.matches(p, plan_file):
                continue
            for leak in leaks(ctx, agent):
                if leak.kind != kind or leak.path is None:
                    continue
                if ctx.matches(p, leak.path):
                    out[pattern_rule(ctx, agent, kind, "deny", p)] = ("deny", p, leak)
                    break
    return out


@rule(
    "GL201",
    "plan-write-outside-plans",
    Level.ERROR,
    "A plan-mode agent may write or delete outside `{plans}/*.md` (a rule or a default allows"
    " or asks).",
    why="Plan mode's promise is that the agent changes nothing but its plan file. A write"
    " rule, an ask, or a write/delete default of allow or ask outside `{plans}` breaks that"
    " promise for every tool with write effects, the shell included.",
    bad='[agents.plan.write]\nallow = ["{plans}/*.md", "notes/**"]\ndefault = "ask"',
    fix="Allow writes and deletes only for `{plans}/*.md` and set `default = \"deny\"` for"
    " the write and delete kinds.",
    good='[agents.plan.write]\nallow = ["{plans}/*.md"]\ndefault = "deny"',
)
def _outside(ctx: LintContext) -> Iterable[Finding]:
    for agent in plan_agents(ctx):
        broad = broad_patterns(ctx, agent)
        reported: set[str] = set()
        for leak in leaks(ctx, agent):
            r = leak.decision.rule
            if r in broad or r in reported:
                continue
            reported.add(r)
            yield ctx.finding_for_rule(
                "GL201",
                leak.decision,
                f"plan-mode agent {agent!r} may {leak.kind} {leak.shown}"
                f" ({leak.decision.action}): {leak.decision.reason}",
                "confine writes and deletes to '{plans}/*.md' with default \"deny\"",
            )


@rule(
    "GL204",
    "plan-exception-too-broad",
    Level.ERROR,
    "A plan agent's exception for its plan file also lets through other paths"
    " (`**/*.md`, `.openoxide/**`, `{plans}/**`).",
    why="The plan file's exception must be exactly `{plans}/*.md`. Broader forms let the"
    " planning agent rewrite documentation, guard's own policy in `.openoxide/`, or hide"
    " executable files next to the plan.",
    bad='[agents.plan.write]\nallow = ["**/*.md"]',
    fix="Write the exception as `{plans}/*.md`.",
    good='[agents.plan.write]\nallow = ["{plans}/*.md"]',
)
def _broad(ctx: LintContext) -> Iterable[Finding]:
    for agent in plan_agents(ctx):
        for list_name, p, leak in broad_patterns(ctx, agent).values():
            assert p.source is not None
            yield ctx.finding_at(
                "GL204",
                p.source.file,
                p.source.line,
                f"plan-mode agent {agent!r}: {list_name} pattern {p.text!r} covers the plan"
                f" file but also {leak.shown} ({leak.kind} {leak.decision.action})",
                "write the exception as '{plans}/*.md'",
            )


@rule(
    "GL202",
    "plan-write-tool-unconfined",
    Level.ERROR,
    "A plan agent allows a tool with write effects (bash, write, an MCP wildcard...) while"
    " its paths do not confine writes, or allows unknown tools wholesale.",
    why="Allowing `bash` or `write` in plan mode is safe only because the path rules deny"
    " every write outside `{plans}/*.md`. A `*` (or `mcp__*`) allow admits tools guard"
    " cannot analyse at all: their writes carry no path effects to deny.",
    bad='[agents.plan.tools]\nbash = "allow"\n"*" = "allow"\n[agents.plan.write]\ndefault = "ask"',
    fix="Confine writes (`allow = [\"{plans}/*.md\"]`, `default = \"deny\"`) and set"
    ' `"*" = "deny"`; allow MCP tools one by one.',
    good='[agents.plan.tools]\nbash = "allow"\n"*" = "deny"\n[agents.plan.write]\n'
    'allow = ["{plans}/*.md"]\ndefault = "deny"',
)
def _tools(ctx: LintContext) -> Iterable[Finding]:
    for agent in plan_agents(ctx):
        policy = ctx.loaded.model.agents[agent]
        if leaks(ctx, agent):
            allowed = [t for t in WRITE_TOOLS if ctx.permits(ctx.decide_tool(agent, t))]
            if allowed:
                yield ctx.finding(
                    "GL202",
                    ("agents", agent, "tools"),
                    f"plan-mode agent {agent!r} allows write tools ({', '.join(allowed)}) but"
                    " its write/delete rules do not confine them to '{plans}/*.md'",
                    "confine writes and deletes to '{plans}/*.md', or deny these tools",
                )
        probe = ctx.decide_tool(agent, "mcp__guardlint__probe")
        if ctx.permits(probe):
            yield ctx.finding_for_rule(
                "GL202",
                probe,
                f"plan-mode agent {agent!r} allows tools guard does not know, MCP tools"
                f" included ({probe.action}): their writes are invisible to path rules",
                f'set agents.{agent}.tools."*" = "deny" and allow tools by name',
            )
        for name, action in policy.tools.items():
            if name.startswith("mcp__") and "*" in name and action != "deny":
                yield ctx.finding(
                    "GL202",
                    ("agents", agent, "tools", name),
                    f"plan-mode agent {agent!r}: MCP wildcard {name!r} = {action!r} admits"
                    " tools whose effects guard cannot analyse",
                    "allow MCP tools one by one, read-only ones only",
                )


@rule(
    "GL203",
    "plan-subagent-build",
    Level.ERROR,
    "A plan agent may start a subagent type that names a build-mode agent (or any type).",
    why="A subagent is another way to act. If a plan agent can spawn the build agent, the"
    " subagent's host-side permissions are build mode's and plan mode's isolation ends at"
    " the first delegation.",
    bad='[agents.plan]\nmode = "plan"\ndefault = "deny"\nsubagents = ["explore", "build"]\n\n'
    '[agents.build]\nmode = "build"\ndefault = "ask"',
    fix="List only read-only subagent types; never a build-mode agent's name, never `*`.",
    good='[agents.plan]\nmode = "plan"\ndefault = "deny"\nsubagents = ["explore"]\n\n'
    '[agents.build]\nmode = "build"\ndefault = "ask"',
)
def _subagents(ctx: LintContext) -> Iterable[Finding]:
    builds = [a for a in ctx.agents if ctx.mode(a) == "build"]
    for agent in plan_agents(ctx):
        subs = ctx.loaded.model.agents[agent].subagents
        for name in builds:
            d = ctx.decide_tool(agent, f"task:{name}")
            if not ctx.permits(d):
                continue
            if subs is None:
                how = "no subagents list, and the tool table allows 'task'"
                fix = f"add agents.{agent}.subagents listing read-only types only"
            elif name in subs:
                how = f"{name!r} is listed in agents.{agent}.subagents"
                fix = f"remove {name!r} from agents.{agent}.subagents"
            else:
                how = f"agents.{agent}.subagents has '*'"
                fix = "list the read-only subagent types by name"
            yield ctx.finding_for_rule(
                "GL203",
                d,
                f"plan-mode agent {agent!r} may start build-mode agent {name!r} as a subagent"
                f" ({d.action}): {how}",
                fix,
            )
        if subs is not None and "*" in subs and not builds:
            yield ctx.finding(
                "GL203",
                ("agents", agent, "subagents"),
                f"plan-mode agent {agent!r} may start any subagent type ('*'), whatever"
                " permissions the host gives it",
                "list the read-only subagent types by name",
            )


@rule(
    "GL207",
    "protected-disabled",
    Level.ERROR,
    "An agent sets `protected = false`: guard's own files, git hooks and agent hook"
    " settings become writable by its rules.",
    why="Protected paths are what keeps an agent from editing its own guard: the policy,"
    " the audit log, `.git/hooks`, `.claude/settings.json`. Without them one allowed write"
    " disables every other layer on the next run.",
    bad='[agents.build]\nmode = "build"\ndefault = "ask"\nprotected = false',
    fix="Remove `protected = false`. Protected files are for people to change, outside the"
    " agent (no allow rule can reach them while protection is on, by design).",
    good='[agents.build]\nmode = "build"\ndefault = "ask"',
)
def _protected(ctx: LintContext) -> Iterable[Finding]:
    for agent in ctx.agents:
        if not ctx.loaded.model.agents[agent].protected:
            yield ctx.finding(
                "GL207",
                ("agents", agent, "protected"),
                f"agent {agent!r} ({ctx.mode(agent)} mode) turns protected paths off: guard's"
                " policy, git hooks and agent hook settings are writable under its rules",
                "remove `protected = false`",
            )


@rule(
    "GL209",
    "plan-socket-reachable",
    Level.WARNING,
    "A plan-mode agent lists Unix sockets its confined commands may reach"
    " (`[agents.NAME.sandbox] sockets`).",
    why="Behind a socket is a daemon that acts with its own rights: docker starts"
    " containers that mount the worktree, tmux types into shells, an IDE's server edits"
    " files. A confined command that may reach one may have it change what plan mode keeps"
    " unchanged; guard cannot see what the daemon does. Listing a socket also lets every"
    " confined command create Unix sockets (the other sockets on the host stay covered).",
    bad='[agents.plan]\nmode = "plan"\ndefault = "deny"\n\n[agents.plan.sandbox]\nconfine = true\n'
    'sockets = ["//var/run/docker.sock"]',
    fix="List only sockets of read-only services (a language server that answers queries,"
    " a metrics endpoint), or none: a plan needs no daemon that writes. Give a build agent"
    " the sockets it needs instead.",
    good='[agents.plan]\nmode = "plan"\ndefault = "deny"\n\n[agents.plan.sandbox]\nconfine = true',
)
def _plan_sockets(ctx: LintContext) -> Iterable[Finding]:
    for agent in plan_agents(ctx):
        for i, entry in enumerate(ctx.loaded.model.agents[agent].sandbox.sockets):
            yield ctx.finding(
                "GL209",
                ("agents", agent, "sandbox", "sockets", i),
                f"plan-mode agent {agent!r} may reach the Unix socket {entry!r} from confined"
                " commands: the daemon behind it can change things for them",
                "remove the entry unless the service behind it only reads",
            )
