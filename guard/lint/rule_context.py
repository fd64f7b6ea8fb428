"""What every rule sees: the loaded policy bound to fixed, imaginary roots.

Rules decide with the real evaluator (:class:`guard.decide.Guard`), bound to
roots under a directory that does not exist, so results never depend on the
machine lint runs on: ``{worktree}`` is ``/nonexistent-guard-lint/wt`` and
``{plans}`` is its ``.openoxide/plans``, as in any repository.

Patterns are probed with *samples*: concrete paths each pattern matches,
generated from its glob with a few fillers per wildcard. A rule that claims
"every path this pattern matches is ..." checks the claim on all samples.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from guard.decide import Guard
from guard.effects import Action, Decision, Effect, EffectKind
from guard.lint.findings import Finding
from guard.match import (
    ANY,
    CLASS,
    DSTAR_DIR,
    DSTAR_END,
    LIT,
    STAR,
    CompiledList,
    Pattern,
    glob_tokens,
    parse_pattern,
)
from guard.paths import Roots
from guard.policy import LoadedPolicy, patterns_of
from guard.policy.loader import Loc

LINT_BASE = "/nonexistent-guard-lint"
FAKE_ROOTS = Roots(
    worktree=Path(f"{LINT_BASE}/wt"),
    plans=Path(f"{LINT_BASE}/wt/.openoxide/plans"),
    data=Path(f"{LINT_BASE}/data"),
    home=Path(f"{LINT_BASE}/home"),
    tmp=Path(f"{LINT_BASE}/tmp"),
    plans_reason="lint: imaginary worktree",
)
PATH_KINDS = ("read", "write", "delete", "exec")
ALL_KINDS = (*PATH_KINDS, "network")
LISTS = ("deny", "ask", "allow")
WRITE_KINDS = ("write", "delete")

#: Fixed probes for "can this agent write outside {plans}?" (besides pattern samples).
PROBES = (
    "{worktree}/src/main.py",
    "{worktree}/README.md",
    "{worktree}/docs/guide.md",
    "{worktree}/.openoxide/plans/sub/nested.md",
    "{plans}/notes.txt",
    "{plans}/plan.md.bak",
    "{home}/notes.txt",
    "{tmp}/scratch.txt",
    "{data}/other.txt",
    "//etc/passwd",
    "//usr/local/bin/tool",
)
PLAN_PROBE = "{plans}/plan.md"

# fillers per style: (star, double star inside a path, trailing double star, bracket chars)
_STYLES = (
    ("x", "", "x"),
    ("guardlintprobe", "d1/d2", "d1/d2"),
    ("n.md", "d3", "n.md"),
)
_BRACKET_CHARS = "axZ0_.-"


@dataclass(frozen=True, slots=True)
class Sample:
    path: str  # absolute path under the imaginary roots
    shown: str  # {root}/rel form for messages


class LintContext:
    """One loaded policy file, ready for rules."""

    def __init__(self, loaded: LoadedPolicy, file: str) -> None:
        self.loaded = loaded
        self.file = file
        self.guard = Guard(loaded, FAKE_ROOTS, "lint")
        self.roots = self.guard.root_map
        self.cache: dict[str, object] = {}
        self._patterns: dict[tuple[str, str, str], list[Pattern]] = {}

    # -- locating ----------------------------------------------------------

    def finding(self, code: str, loc: Loc, message: str, fix: str = "") -> Finding:
        f, line = self.loaded.locate(loc)
        return Finding(code, message, f, line, fix)

    def finding_at(self, code: str, file: str, line: int, message: str, fix: str = "") -> Finding:
        return Finding(code, message, file, line, fix)

    def finding_for_rule(self, code: str, decision: Decision, message: str, fix: str) -> Finding:
        """A finding located where the decision's rule is written."""
        m = re.match(r"^(.+?):(\d+): ", decision.rule)
        if m:
            return Finding(code, message, m.group(1), int(m.group(2)), fix)
        parts = decision.rule.split(".")
        if parts[0] == "agents" and len(parts) >= 3:
            return self.finding(code, tuple(parts), message, fix)
        return Finding(code, message, self.loaded.name, 1, fix)

    # -- agents and patterns -------------------------------------------------

    @property
    def agents(self) -> list[str]:
        return list(self.loaded.model.agents)

    def mode(self, agent: str) -> str:
        return self.loaded.model.agents[agent].mode

    def patterns(self, agent: str, kind: str, list_name: str) -> list[Pattern]:
        """The parsed patterns of one list (shared with the evaluator's compiled lists)."""
        key = (agent, kind, list_name)
        got = self._patterns.get(key)
        if got is None:
            if kind == "network":
                got = patterns_of(self.loaded, agent, kind, list_name)
            else:
                # the evaluator's own parsed lists: parsed (and located) once
                got = self.guard.patterns(agent, EffectKind(kind))[list_name]
            self._patterns[key] = got
        return list(got)

    def compiled(self, patterns: list[Pattern]) -> CompiledList:
        return CompiledList(patterns, self.roots)

    @cached_property
    def protected(self) -> CompiledList:
        return CompiledList(self.guard.protected_patterns, self.roots)

    def abs_path(self, p: Pattern, rel: str) -> str | None:
        if p.root == "/":
            return "/" + rel
        base = self.roots.get(p.root)
        return None if base is None else f"{base}/{rel}"

    def samples(self, p: Pattern) -> list[Sample]:
        """Concrete absolute paths that ``p`` (ignoring ``!``) matches."""
        out: list[Sample] = []
        seen: set[str] = set()
        for rel in pattern_samples(p):
            path = self.abs_path(p, rel)
            if path is None or path in seen:
                continue
            seen.add(path)
            out.append(Sample(path, self.guard.roots.describe(path)))
        return out

    def expand(self, probe: str) -> str:
        if probe.startswith("//"):
            return probe[1:]
        m = re.match(r"^\{([a-z]+)\}/(.*)$", probe)
        assert m is not None
        return f"{self.roots[m.group(1)]}/{m.group(2)}"

    def is_plan_file(self, path: str) -> bool:
        plans = str(FAKE_ROOTS.plans)
        if not path.startswith(plans + "/"):
            return False
        rest = path[len(plans) + 1 :]
        return "/" not in rest and rest.endswith(".md") and rest != ".md"

    def matches(self, p: Pattern, path: str) -> bool:
        """Does ``p`` (ignoring ``!``) match ``path`` or one of its directories?"""
        positive = p if not p.negated else parse_pattern(p.text[1:])
        if positive is None:
            return False
        return CompiledList([positive], self.roots).matched(path) is not None

    # -- deciding ------------------------------------------------------------

    def decide(self, agent: str, kind: str, target: str | None) -> Decision:
        return self.guard.decide_effect(agent, Effect(EffectKind(kind), target))

    def decide_tool(self, agent: str, name: str) -> Decision:
        return self.guard.decide_effect(agent, Effect.tool(name))

    def permits(self, d: Decision) -> bool:
        return d.action in (Action.ALLOW, Action.ASK)


def pattern_samples(p: Pattern) -> Iterator[str]:
    """Relative paths (below the pattern's root) that ``p``'s glob matches."""
    if p.regex is None:
        return
    for style in _STYLES:
        for c in _BRACKET_CHARS:
            rel = _fill(p.body, style, c)
            if rel is None or not rel:
                continue
            subject = rel if p.anchored else rel.rsplit("/", 1)[-1]
            if p.regex.fullmatch(subject) is None:
                continue
            suffix = "/guardlintfile" if p.dir_only else ""
            yield rel + suffix
            if not p.anchored:
                yield "d0/" + rel + suffix
            break


def _fill(body: str, style: tuple[str, str, str], c: str) -> str | None:
    """A path the glob ``body`` matches: wildcards filled per ``style``, classes with ``c``."""
    tokens, _ = glob_tokens(body)
    if tokens is None:
        return None
    star, dstar, tail = style
    fill = {STAR: star, DSTAR_END: tail, DSTAR_DIR: dstar + "/", ANY: c if c != "." else "q"}
    out = [value if kind == LIT else c if kind == CLASS else fill[kind] for kind, value in tokens]
    return re.sub("/+", "/", "".join(out)).strip("/")
