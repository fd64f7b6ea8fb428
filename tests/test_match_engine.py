"""The compiled matching engine (google-re2) against the pure-Python reference.

test_match_git.py compares both engines with the real ``git check-ignore`` and
test_match_fused.py with lists compiled one by one; here: whole policies
decided by a Guard on each engine give the same decisions, word for word, and
every way the compiled engine can fail hands the decision to the reference
engine or denies it, never a silent "no pattern matched" (which would let the
list's default, possibly ``allow``, decide).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from engines import require_engine

import guard.match.re2_engine
from guard import Action, Effect, EffectKind, Guard
from guard.match import RuleSet, parse_pattern
from guard.match.re2_engine import FALLBACK

ROOTS = {"worktree": "/w", "plans": "/w/.openoxide/plans", "tmp": "/tmp"}

# a policy with every shape of pattern, several roots and exceptions at several depths
POLICY = """version = 1
[agents.t]
mode = "build"
default = "ask"
[agents.t.read]
deny = ["*.pem", "secret/", "!secret/public/", "{home}/.ssh/", "//etc/shadow"]
ask = [".env*", "**/node_modules/**", "{tmp}"]
allow = ["{worktree}", "{plans}", "!build/**/*.o", "[!.]*.md", "docs/*/x?"]
[agents.t.write]
deny = ["**", "!src/", "!{plans}/*.md", "!{plans}/*/**", "src/**/gen/", "!src/**/gen/keep"]
ask = ["*.lock", "/vendor/**"]
allow = ["src/**", "!src/**/*.bak", "{tmp}/**"]
[agents.t.delete]
allow = ["build/", "*.tmp", "!important*"]
[agents.t.network]
allow = ["*.example.com", "!evil.example.com", "pypi.org", "!*.example.com:22", "*:8[0-9]",
         "[::1]:443"]
ask = ["*"]
deny = ["*.example.com:25"]
"""

NAMES = ["src", "gen", "keep", "build", "x.o", "a.md", ".md", "secret", "public", "docs",
         "xy", "node_modules", ".env", ".env.local", "k.pem", "Cargo.lock", "vendor",
         "a.bak", "f.tmp", "important.tmp", ".ssh", "é.md", "日本", "a b", "[x]"]  # fmt: skip


@pytest.fixture
def guards(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Guard, Guard]]:
    """The same policy loaded twice: on the reference engine and on the compiled one."""
    require_engine("re2")
    (repo / "policy.toml").write_text(POLICY)
    monkeypatch.setattr(guard.match.re2_engine, "DEFAULT_ENGINE", "python")
    ref = Guard.load(repo / "policy.toml", worktree=repo)
    for name in ref.agent_names:
        ref._compiled(name)
    monkeypatch.setattr(guard.match.re2_engine, "DEFAULT_ENGINE", "re2")
    fast = Guard.load(repo / "policy.toml", worktree=repo)
    yield ref, fast


def _paths(g: Guard, rng: random.Random, n: int) -> list[str]:
    roots = [str(g.roots.worktree), str(g.roots.plans), str(g.roots.home), str(g.roots.tmp)]
    out = ["/etc/shadow", "/etc/passwd", str(g.roots.worktree), str(g.roots.plans)]
    for _ in range(n):
        parts = [rng.choice(NAMES) for _ in range(rng.randint(1, 5))]
        out.append("/".join([rng.choice(roots), *parts]))
    return out


def test_a_policy_decides_the_same_on_both_engines_word_for_word(
    guards: tuple[Guard, Guard],
) -> None:
    """Action, reason and rule agree for every agent kind on files and directories, under
    every root and outside them, with exceptions at several depths (where the compiled
    engine must find the deepest matching level, or hand the path back)."""
    ref, fast = guards
    a_ref, a_fast = ref._compiled("t"), fast._compiled("t")
    assert {r.engine for _, r in a_fast.rules.values() if any(r.lists)} == {"re2"}
    assert {r.engine for _, r in a_ref.rules.values()} == {"python"}
    rng = random.Random(17)
    checked = 0
    for kind in (EffectKind.READ, EffectKind.WRITE, EffectKind.DELETE):
        for path in _paths(ref, rng, 400):
            for is_dir in (False, True):
                e = Effect(kind, path)
                want = ref._decide_path(a_ref, kind, path, is_dir, e, None)
                got = fast._decide_path(a_fast, kind, path, is_dir, e, None)
                assert (got.action, got.reason, got.rule) == (want.action, want.reason, want.rule)
                checked += 1
    for host in ["pypi.org", "a.example.com", "evil.example.com", "x.evil.example.com", "h",
                 "::1"]:
        for port in ("", ":22", ":25", ":80", ":443"):
            target = f"[{host}]{port}" if ":" in host and port else host + port
            e = Effect(EffectKind.NETWORK, target)
            want, got = ref.decide_effect("t", e), fast.decide_effect("t", e)
            assert (got.action, got.reason, got.rule) == (want.action, want.reason, want.rule)
    assert checked == 3 * 2 * 404


def test_paths_outside_the_compiled_domain_go_to_the_reference_engine() -> None:
    """Spellings the compiled engine's whole-path regexes were not written for (empty
    components, a trailing slash, relative, a lone surrogate that has no bytes) are
    handed back, and the answer is the reference engine's."""
    require_engine("re2")
    lists = [[p for p in (parse_pattern(x) for x in ["*", "!a/", "//etc/**", "{tmp}"]) if p]]
    ref = RuleSet(lists, ROOTS, engine="python")
    fast = RuleSet(lists, ROOTS, engine="re2")
    assert fast._fast is not None
    odd = ["/w//a", "/w/a/", "/", "//etc/x", "w/a", "/w/\ud800", "/tmp//x", "/w/a//"]
    for path in odd:
        assert fast._fast.decided(path, False) is FALLBACK, path
        assert fast.decided(path) == ref.decided(path), path
        assert fast.first(path) == ref.first(path), path


class _Failing:
    """What ``RE2::Set::Match`` leaves when its automaton runs out of memory: it clears
    the answer and returns false, which the binding turns into an empty list."""

    def __call__(self, text: bytes) -> list[int]:
        return []


def test_an_re2_failure_is_not_read_as_no_match() -> None:
    """Attack: push RE2 past its memory budget so that every set answers "nothing
    matched"; read naively, that would let the default decide. The sentinel (index 0
    always matches) is missing from the failed answer, so the reference engine decides."""
    require_engine("re2")
    lists = [[p for p in (parse_pattern(x) for x in ["**", "!{plans}/*.md"]) if p]]
    rs = RuleSet(lists, ROOTS, engine="re2")
    assert rs._fast is not None
    assert rs.first("/w/src/a.py") is not None  # denied by "**"
    rs._fast._built = [tuple((_Failing(), m) for _, m in rs._fast._sets(i) or ()) for i in range(3)]
    assert rs._fast.first("/w/src/a.py", False) is FALLBACK
    hit = rs.first("/w/src/a.py")
    assert hit is not None and hit[1].text == "**"
    assert rs.first("/w/.openoxide/plans/p.md") is None


def test_an_re2_error_while_deciding_is_a_deny(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: make the compiled engine raise mid-decision. The decision is a deny that
    says why (fail closed), never the allow the policy would give."""
    require_engine("re2")
    monkeypatch.setattr(guard.match.re2_engine, "DEFAULT_ENGINE", "re2")
    (repo / "policy.toml").write_text(
        'version = 1\n[agents.t]\nmode = "build"\ndefault = "deny"\n'
        '[agents.t.write]\nallow = ["src/**"]\n'
    )
    g = Guard.load(repo / "policy.toml", worktree=repo)
    assert g.decide_effect("t", Effect.write("src/app.py")).action is Action.ALLOW
    g = Guard.load(repo / "policy.toml", worktree=repo)
    _, rules = g._compiled("t").rules[EffectKind.WRITE]
    assert rules._fast is not None

    def boom(text: bytes) -> list[int]:
        raise RuntimeError("re2 exploded")

    rules._fast._built = [tuple((boom, m) for _, m in rules._fast._sets(i) or ()) for i in range(3)]
    d = g.decide_effect("t", Effect.write("src/app.py"))
    assert d.action is Action.DENY
    assert "re2 exploded" in d.reason and "fail closed" in d.reason


def test_without_re2_the_pure_python_engine_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled engine is optional: where google-re2 is not installed a rule set asked
    for it builds the reference engine, with the same answers."""
    monkeypatch.setattr(guard.match.re2_engine, "_RE2", None)
    lists = [[p for p in (parse_pattern(x) for x in ["*.md", "!keep.md", "docs/"]) if p]]
    rs = RuleSet(lists, ROOTS, engine="re2")
    assert rs.engine == "python" and rs._fast is None
    hit = rs.first("/w/docs/x.txt")
    assert hit is not None and hit[1].text == "docs/"
    assert rs.first("/w/keep.md") is None
    assert rs.first("/w/docs/keep.md") is None  # the deepest level decides: the exception
    hit = rs.first("/w/a.md")
    assert hit is not None and hit[1].text == "*.md"


def test_a_set_re2_cannot_compile_hands_its_queries_to_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The directory-query and parent-level sets are compiled on first use. If RE2
    refuses one then (a policy too large for its memory budget), those queries are
    answered by the reference engine, never as "no pattern matched"."""
    require_engine("re2")
    lists = [[p for p in (parse_pattern(x) for x in ["build/", "*.o", "!keep.o"]) if p]]
    rs = RuleSet(lists, ROOTS, engine="re2")
    assert rs.engine == "re2" and rs._fast is not None

    def refuse(*args: object) -> None:
        raise RuntimeError("RE2 set did not compile (too large)")

    monkeypatch.setattr(guard.match.re2_engine, "_compile_set", refuse)
    assert rs._fast.first("/w/build", True) is FALLBACK
    hit = rs.first("/w/build", True)  # a directory: "build/" matches
    assert hit is not None and hit[1].text == "build/"
    hit = rs.first("/w/src/x.o")  # the file query was compiled at load: still answered
    assert hit is not None and hit[1].text == "*.o"
    assert rs._fast.first("/w/src/x.o", False) is not FALLBACK


ROOT_MAPS = [
    ROOTS,
    {"worktree": "/", "plans": "/.openoxide/plans", "home": "/", "tmp": "/tmp"},
    {"worktree": "/h/w", "plans": "/h/w/p", "home": "/h", "tmp": "/h/w/t"},
    {"worktree": None, "plans": "/d/plans", "home": "/ü", "tmp": "/tmp"},
]
SHAPES = ["{n}", "{n}/", "*.{e}", "/{n}/{m}", "{n}/**", "**/{n}", "**/{n}/*.{e}", "{n}/*/{m}",
          "{n}/**/{m}", "{n}?", "[ab]*", "**", "*", "{r}", "{r}/", "{r}/*.{e}", "{r}/{n}/",
          "{r}/**", "//{n}/**", "//{n}", "/{n}/**/"]  # fmt: skip
PARTS = ["a", "b", "src", "x.md", "p", "w", "t", "tmp", "h", "ü", "plans", ".openoxide"]


def test_both_engines_agree_under_odd_roots_and_nested_roots() -> None:
    """Roots of "/", roots inside roots, a missing worktree, a non-ASCII root; every
    pattern shape including "{root}" alone: the compiled engine's answer (``decided`` and
    ``first``, files and directories, both semantics) equals the reference engine's."""
    require_engine("re2")
    rng = random.Random(20261203)
    checked = 0
    for _ in range(300):
        roots = rng.choice(ROOT_MAPS)

        def pattern() -> str:
            text = rng.choice(SHAPES).format(
                n=rng.choice(PARTS), m=rng.choice(PARTS), e=rng.choice(["md", "py"]),
                r="{" + rng.choice(["worktree", "plans", "home", "tmp"]) + "}",
            )  # fmt: skip
            return ("!" if rng.random() < 0.3 else "") + text

        n_lists = rng.randint(1, 3)
        lists = [
            [p for p in (parse_pattern(pattern()) for _ in range(rng.randint(1, 6))) if p]
            for _ in range(n_lists)
        ]
        sems = [True, False] if n_lists == 1 else [True]
        for reinclude in sems:
            ref = RuleSet(lists, roots, reinclude=reinclude, engine="python")
            fast = RuleSet(lists, roots, reinclude=reinclude, engine="re2")
            for _ in range(30):
                base = rng.choice([r for r in roots.values() if r is not None] + ["/", "/etc"])
                depth = rng.randint(0, 4)
                path = "/".join([base.rstrip("/"), *(rng.choice(PARTS) for _ in range(depth))])
                path = path or "/"
                is_dir = rng.random() < 0.3
                assert fast.decided(path, is_dir) == ref.decided(path, is_dir), (
                    lists, roots, path, is_dir, reinclude,
                )  # fmt: skip
                assert fast.first(path, is_dir) == ref.first(path, is_dir)
                checked += 1
    assert checked >= 9000
