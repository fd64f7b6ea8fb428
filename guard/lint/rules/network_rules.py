"""Network rules of plan-mode agents (GL2xx, plan-mode isolation)."""

from __future__ import annotations

from collections.abc import Iterable

from guard.effects import Effect
from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import LintContext
from guard.lint.rules.plan_rules import plan_agents

#: Hosts no policy names on purpose: reaching them means reaching any host.
PROBES = ("guardlint-probe.invalid:443", "guardlint-probe.invalid:80", "203.0.113.7:443")


@rule(
    "GL208",
    "plan-network-any-host",
    Level.ERROR,
    "A plan-mode agent may connect to any host (`*`, `**`, `*:443` in its network allow or"
    " model_api list, or a network default of allow).",
    why="A confined command reaches the network only through guard's egress proxy, which"
    " decides HTTPS by host and port alone: what is sent inside the tunnel is not seen. A"
    " plan agent allowed every host can send the worktree anywhere, or change a remote"
    " service through its API with the user's credentials.",
    bad='[agents.plan.network]\nallow = ["*:443"]',
    fix="List the hosts a plan needs to read from by name (package indexes, documentation),"
    " and keep the network default at ask or deny.",
    good='[agents.plan.network]\nallow = ["pypi.org:443", "docs.python.org:443"]',
)
def _any_host(ctx: LintContext) -> Iterable[Finding]:
    for agent in plan_agents(ctx):
        seen: set[str] = set()
        for probe in PROBES:
            for via in ("", "run"):
                d = ctx.guard.decide_effect(agent, Effect.network(probe, via=via))
                if not d.allowed or d.rule in seen:
                    continue
                seen.add(d.rule)
                under = " under guard run" if via else ""
                yield ctx.finding_for_rule(
                    "GL208",
                    d,
                    f"plan-mode agent {agent!r} may connect to any host{under} ({probe} is"
                    f" allowed: {d.reason}); HTTPS is decided by host alone",
                    "list the hosts it needs by name",
                )
