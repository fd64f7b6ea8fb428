"""Managed family: rules of a policy that the managed layer overrides, so they do nothing."""

from __future__ import annotations

from collections.abc import Iterable

from guard.decide import LIST_ACTION, Guard
from guard.effects import Decision, Effect, EffectKind
from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import FAKE_ROOTS, PATH_KINDS, LintContext
from guard.policy.managed import ManagedLayer, load_managed


def _layer(ctx: LintContext) -> ManagedLayer | None:
    if "managed" not in ctx.cache:
        ctx.cache["managed"] = load_managed()  # an untrusted layer: an error, as everywhere
    layer = ctx.cache["managed"]
    return layer if isinstance(layer, ManagedLayer) else None


def _by_managed(d: Decision, layer: ManagedLayer) -> bool:
    return any(d.rule.startswith(f + ":") for f in layer.files)


@rule(
    "GL401",
    "managed-overrides",
    Level.WARNING,
    "A rule of this policy has no effect: the managed layer (/etc/openoxide/managed.d)"
    " decides every path or tool it names more strictly, or pins the setting it changes.",
    why="The managed layer has the last word: no user, project or --policy layer can turn"
    " its deny or ask into an allow, nor switch off what it pins. A project rule it"
    " overrides reads as a permission the project does not have; whoever relies on it is"
    " surprised by a refusal.",
    bad='# /etc/openoxide/managed.d/10-org.toml: [managed.all.write] deny = ["secrets/"]\n'
    '[agents.build.write]\nallow = ["secrets/**"]',
    fix="Remove the rule, or ask the owners of the managed policy to change theirs.",
    good='[agents.build.write]\nallow = ["src/**"]',
)
def _overridden(ctx: LintContext) -> Iterable[Finding]:
    layer = _layer(ctx)
    if layer is None:
        return
    g = Guard(ctx.loaded, FAKE_ROOTS, "lint", layer)
    pins = layer.pins
    for agent in ctx.agents:
        policy = ctx.loaded.model.agents[agent]
        for kind in PATH_KINDS:
            for list_name in ("allow", "ask"):
                own = LIST_ACTION[list_name]
                for i, p in enumerate(ctx.patterns(agent, kind, list_name)):
                    samples = ctx.samples(p) if not p.negated else []
                    if not samples:
                        continue
                    found = [g.decide_effect(agent, Effect(EffectKind(kind), s.path))
                             for s in samples]
                    if all(_by_managed(d, layer) and d.action.severity > own.severity
                           for d in found):
                        d = found[0]
                        yield ctx.finding(
                            "GL401",
                            ("agents", agent, kind, list_name, i),
                            f"agents.{agent}.{kind}.{list_name}[{i}] {p.text!r} has no effect:"
                            f" the managed policy {d.action}s every path it matches"
                            f" ({d.rule})",
                            "remove it; the managed layer cannot be weakened",
                        )
        for tool, action in policy.tools.items():
            found_tool = layer.tool(policy.mode, tool)
            if found_tool is not None and found_tool[0].severity > action.severity:
                yield ctx.finding(
                    "GL401",
                    ("agents", agent, "tools", tool),
                    f"agents.{agent}.tools.{tool} = {str(action)!r} has no effect: the managed"
                    f" policy says {found_tool[0]} ({found_tool[1]})",
                    "remove it; the managed layer cannot be weakened",
                )
        if "protected" in pins and _set_false(ctx, agent, "protected"):
            yield ctx.finding(
                "GL401", ("agents", agent, "protected"),
                f"agents.{agent}.protected = false has no effect: the managed policy pins"
                " protected paths", "remove it")
        if "confine" in pins and policy.mode == "plan" and _set_false(ctx, agent, "confine"):
            yield ctx.finding(
                "GL401", ("agents", agent, "sandbox", "confine"),
                f"agents.{agent}.sandbox.confine = false has no effect: the managed policy pins"
                " confinement", "remove it")
    if "audit" in pins and any(loc[:1] == ("audit",) for loc in ctx.loaded.provenance):
        yield ctx.finding(
            "GL401", ("audit",),
            "[audit] has no effect: the managed policy pins the audit (its [audit] table"
            " alone applies)", "remove the [audit] table")


def _set_false(ctx: LintContext, agent: str, key: str) -> bool:
    """Whether the policy's own files write ``key`` of ``agent`` as false."""
    policy = ctx.loaded.model.agents[agent]
    if key == "protected":
        return ("agents", agent, "protected") in ctx.loaded.provenance and not policy.protected
    loc = ("agents", agent, "sandbox", "confine")
    return loc in ctx.loaded.provenance and not policy.sandbox.confine
