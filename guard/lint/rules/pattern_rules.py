"""Pattern family: patterns that do nothing, or do something else than they seem to."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from guard.lint.checks import rule
from guard.lint.findings import Finding, Level
from guard.lint.rule_context import ALL_KINDS, LISTS, PATH_KINDS, LintContext
from guard.match import Pattern
from guard.policy.loader import Loc, never_match_message

#: Top-level directories of a Unix filesystem: `/etc/x` almost surely means `//etc/x`.
SYSTEM_DIRS = frozenset(
    {
        "bin", "boot", "dev", "etc", "home", "lib", "lib64", "media", "mnt", "opt", "proc",
        "root", "run", "sbin", "srv", "sys", "tmp", "usr", "var", "Users", "Volumes",
        "Applications", "Library", "System", "private", "nix",
    }
)  # fmt: skip


def each_list(ctx: LintContext) -> Iterator[tuple[str, str, str, list[Pattern]]]:
    for agent in ctx.agents:
        for kind in ALL_KINDS:
            for list_name in LISTS:
                yield agent, kind, list_name, ctx.patterns(agent, kind, list_name)


def loc_of(agent: str, kind: str, list_name: str, p: Pattern) -> Loc:
    index = p.source.index if p.source is not None else 0
    return ("agents", agent, kind, list_name, index)


@rule(
    "GL101",
    "never-matches",
    Level.ERROR,
    "A pattern can never match any path (unterminated `[`, trailing backslash, empty).",
    why="git silently ignores such a line, and so does guard's matcher. In a deny list the"
    " author believes something is denied that is not.",
    bad='[agents.plan.read]\ndeny = ["secrets/[abc"]',
    fix="Close the bracket expression, escape a literal `[` as `\\[`, or remove the pattern.",
    good='[agents.plan.read]\ndeny = ["secrets/[abc]*"]',
)
def _never(ctx: LintContext) -> Iterable[Finding]:
    for agent, kind, list_name, pats in each_list(ctx):
        for p in pats:
            message = never_match_message(p)
            if message is not None:
                yield ctx.finding(
                    "GL101",
                    loc_of(agent, kind, list_name, p),
                    message,
                    "fix the glob or remove the pattern",
                )


@rule(
    "GL102",
    "duplicate-pattern",
    Level.WARNING,
    "The same pattern appears twice in one list.",
    why="The second copy changes nothing (or, after a `!` exception, silently undoes it);"
    " duplicates are usually a merge or copy-paste slip that hides what was meant.",
    bad='[agents.build.write]\nallow = ["src/**", "docs/**", "src/**"]',
    fix="Remove the repeated pattern.",
    good='[agents.build.write]\nallow = ["src/**", "docs/**"]',
)
def _duplicate(ctx: LintContext) -> Iterable[Finding]:
    for agent, kind, list_name, pats in each_list(ctx):
        seen: dict[str, Pattern] = {}
        for p in pats:
            key = p.text.rstrip(" ")
            first = seen.get(key)
            if first is None:
                seen[key] = p
                continue
            where = f" (first at line {first.source.line})" if first.source else ""
            yield ctx.finding(
                "GL102",
                loc_of(agent, kind, list_name, p),
                f"agents.{agent}.{kind}.{list_name}: pattern {p.text!r} is repeated{where}",
                "remove the duplicate",
            )


@rule(
    "GL103",
    "useless-exception",
    Level.WARNING,
    "A `!` exception re-includes nothing: no earlier pattern in its list matches its paths.",
    why="An exception only carves out of what earlier patterns of the *same* list match."
    " One that carves from nothing usually means the author expected it to override"
    " another list, which it never does (deny > ask > allow across lists).",
    bad='[agents.plan.write]\ndeny = ["src/**", "!docs/*.md"]',
    fix="Put the exception after the pattern it carves out of, in the same list, or"
    " remove it.",
    good='[agents.plan.write]\ndeny = ["**", "!{plans}/*.md"]',
)
def _useless_exception(ctx: LintContext) -> Iterable[Finding]:
    for agent, kind, list_name, pats in each_list(ctx):
        if kind == "network":
            continue
        for i, p in enumerate(pats):
            if not p.negated or p.problem is not None:
                continue
            earlier = [q for q in pats[:i] if not q.negated and q.problem is None]
            samples = ctx.samples(p)
            if not samples:
                continue
            compiled = ctx.compiled(earlier) if earlier else None
            if compiled is None or not any(compiled.matched(s.path) for s in samples):
                yield ctx.finding(
                    "GL103",
                    loc_of(agent, kind, list_name, p),
                    f"exception {p.text!r} re-includes nothing: no earlier pattern in"
                    f" agents.{agent}.{kind}.{list_name} matches {samples[0].shown}",
                    "place it after the pattern it carves out of, or remove it",
                )


@rule(
    "GL104",
    "shadowed-allow",
    Level.WARNING,
    "An allow pattern is unreachable: every path it matches is denied or asked first.",
    why="Across lists deny > ask > allow. An allow pattern fully covered by a deny or ask"
    " pattern never decides anything; the author likely expected it to win.",
    bad='[agents.build.write]\ndeny = ["docs/**"]\nallow = ["docs/api/*.md"]',
    fix="Narrow the deny/ask pattern with a `!` exception in its own list, or remove the"
    " allow pattern.",
    good='[agents.build.write]\ndeny = ["docs/**", "!docs/api/*.md"]\nallow = ["docs/api/*.md"]',
)
def _shadowed(ctx: LintContext) -> Iterable[Finding]:
    for agent in ctx.agents:
        policy = ctx.loaded.model.agents[agent]
        for kind in PATH_KINDS:
            allow = ctx.patterns(agent, kind, "allow")
            if not allow:
                continue
            blockers = [
                ("deny", ctx.compiled(ctx.patterns(agent, kind, "deny"))),
                ("ask", ctx.compiled(ctx.patterns(agent, kind, "ask"))),
            ]
            if policy.protected and kind in ("write", "delete"):
                blockers.insert(0, ("protected paths", ctx.protected))
            for p in allow:
                if p.negated or p.problem is not None:
                    continue
                samples = ctx.samples(p)
                if not samples:
                    continue
                by: list[str] = []
                for s in samples:
                    hit = next(
                        ((n, q) for n, cl in blockers if (q := cl.matched(s.path)) is not None),
                        None,
                    )
                    if hit is None:
                        break
                    by.append(f"{hit[0]} {hit[1].text!r}")
                else:
                    blockers_text = ", ".join(sorted(set(by)))
                    yield ctx.finding(
                        "GL104",
                        loc_of(agent, kind, "allow", p),
                        f"allow pattern {p.text!r} is unreachable in agents.{agent}.{kind}:"
                        f" its paths are caught first by {blockers_text}",
                        "add a `!` exception to the deny/ask list, or remove the allow pattern",
                    )


_STAR_RUN = re.compile(r"(?<!\\)\*+")


@rule(
    "GL105",
    "slow-pattern",
    Level.WARNING,
    "A pattern with many wildcards in one path segment (or many `**`) backtracks badly.",
    why="Each `*` inside a segment becomes a backtracking loop; three or more in one segment"
    " (`*a*b*c*`) make matching polynomial in the name's length, and a hostile file name"
    " can stall every decision (a denial of service on the policy evaluator).",
    bad='[agents.build.read]\ndeny = ["*_*_*_*.log"]',
    fix="Use at most two `*` per segment and at most two `**`; prefer literal directories"
    " (`logs/**`) or a suffix (`*.log`).",
    good='[agents.build.read]\ndeny = ["logs/**", "*.log"]',
)
def _slow(ctx: LintContext) -> Iterable[Finding]:
    for agent, kind, list_name, pats in each_list(ctx):
        for p in pats:
            if p.problem is not None:
                continue
            segments = p.body.split("/")
            doubles = sum(1 for s in segments if s == "**")
            worst = max((len(_STAR_RUN.findall(s)) for s in segments if s != "**"), default=0)
            if worst >= 3 or doubles >= 3:
                what = (
                    f"{worst} wildcards in one segment"
                    if worst >= 3
                    else f"{doubles} '**' components"
                )
                yield ctx.finding(
                    "GL105",
                    loc_of(agent, kind, list_name, p),
                    f"pattern {p.text!r} has {what}: matching may backtrack catastrophically",
                    "use at most two wildcards per segment and two '**'",
                )


@rule(
    "GL106",
    "absolute-without-slashes",
    Level.WARNING,
    "A pattern looks like an absolute path (`/etc/...`, `~/...`) but is relative to the"
    " worktree.",
    why="As in gitignore, a leading `/` anchors a pattern to the worktree root: `/etc/passwd`"
    " means `<worktree>/etc/passwd`. A deny meant for the system file protects nothing;"
    " `~` is not expanded in patterns either.",
    bad='[agents.plan.read]\ndeny = ["/etc/shadow", "~/.ssh/**"]',
    fix="Write absolute paths with two slashes (`//etc/shadow`) and home paths with"
    " `{home}` (`{home}/.ssh/**`).",
    good='[agents.plan.read]\ndeny = ["//etc/shadow", "{home}/.ssh/**"]',
)
def _absolute(ctx: LintContext) -> Iterable[Finding]:
    for agent, kind, list_name, pats in each_list(ctx):
        if kind == "network":
            continue
        for p in pats:
            if p.root != "worktree":
                continue
            text = p.text[1:] if p.negated else p.text
            first = p.body.split("/", 1)[0]
            if text.startswith("~"):
                fix = "{home}" + text[1:] if text.startswith("~/") else "{home}/..."
                yield ctx.finding(
                    "GL106",
                    loc_of(agent, kind, list_name, p),
                    f"pattern {p.text!r}: '~' is not expanded in patterns; it names a"
                    " directory called '~' in the worktree",
                    f"write {fix!r}",
                )
            elif text.startswith("/") and first in SYSTEM_DIRS:
                yield ctx.finding(
                    "GL106",
                    loc_of(agent, kind, list_name, p),
                    f"pattern {p.text!r} is anchored to the worktree root, not the filesystem"
                    f" root: it means {{worktree}}{text}",
                    f"write '/{text}' for the absolute path",
                )
