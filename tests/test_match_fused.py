"""Several lists compiled together answer exactly as each list compiled alone."""

from __future__ import annotations

import random

from guard.match import CompiledList, RuleSet, parse_pattern

NAMES = ["src", "lib", "docs", "build", "a", "b", "x.md", "node_modules"]
SHAPES = [
    "{n}",
    "{n}/",
    "*.{e}",
    "/{n}/{m}",
    "{n}/**",
    "/{n}/**",
    "**/{n}",
    "**/{n}/*.{e}",
    "{n}/*/{m}",
    "{n}/**/{m}",
    "{n}?",
    "[ab]*",
    "{plans}/*.md",
    "{plans}/{n}/",
    "//etc/{n}",
    "**",
    "*",
]
EXTS = ["md", "py", "txt"]
ROOTS = {"worktree": "/w", "plans": "/w/.openoxide/plans", "tmp": "/tmp"}


def _pattern(rng: random.Random) -> str:
    text = rng.choice(SHAPES).format(
        n=rng.choice(NAMES), m=rng.choice(NAMES), e=rng.choice(EXTS), plans="{plans}"
    )
    return ("!" if rng.random() < 0.3 else "") + text


def _path(rng: random.Random) -> str:
    base = rng.choice(["/w", "/w/.openoxide/plans", "/tmp", "/etc", "/w/.openoxide"])
    depth = rng.randint(1, 4)
    parts = [rng.choice([*NAMES, "c"]) for _ in range(depth - 1)]
    parts.append(rng.choice(NAMES) + rng.choice(["", ".md", ".py"]))
    return base + "/" + "/".join(parts)


def test_fused_rule_set_agrees_with_separate_lists(engine: str) -> None:
    """Every engine's fused answer equals the reference engine's list-by-list answer."""
    rng = random.Random(20261202)
    checked = 0
    for _ in range(300):
        lists = [
            [p for p in (parse_pattern(_pattern(rng)) for _ in range(rng.randint(0, 8))) if p]
            for _ in range(rng.randint(1, 4))
        ]
        fused = RuleSet(lists, ROOTS, engine=engine)
        assert fused.engine == engine or not any(lists)
        alone = [CompiledList(ps, ROOTS, engine="python") for ps in lists]
        for _ in range(40):
            path, is_dir = _path(rng), rng.random() < 0.2
            expected = None
            for list_id, cl in enumerate(alone):
                p = cl.matched(path, is_dir)
                if p is not None:
                    expected = (list_id, p)
                    break
            got = fused.first(path, is_dir)
            assert got == expected, (lists, path, is_dir)
            assert fused.first(path, is_dir) == expected  # the directory cache agrees too
            checked += 1
    assert checked == 12000


def test_exception_reincludes_below_an_excluded_directory_in_policies() -> None:
    """The one documented difference from git (see docs/matching.md)."""
    pats = [parse_pattern("**"), parse_pattern("!{plans}/*.md")]
    policy = CompiledList([p for p in pats if p], ROOTS)
    git = CompiledList([p for p in pats if p], ROOTS, reinclude=False)
    plan_file = "/w/.openoxide/plans/p.md"
    assert policy.matched(plan_file) is None
    assert git.matched(plan_file) is not None
    assert policy.matched("/w/.openoxide/plans/sub/p.md") is not None
