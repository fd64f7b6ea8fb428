"""Differential test: guard's gitignore matcher against the real git binary.

Every policy pattern list is a gitignore file, and ``git check-ignore`` is the
oracle (DESIGN.md, "Policy semantics"). A seeded generator writes pattern
lists that mix every syntax class (literal names, ``*.ext``, ``?``, brackets,
``**/``, ``/**``, ``/**/``, leading and trailing ``/``, ``!`` exceptions,
escapes, names with dots, dashes, spaces and non-ASCII letters) into the
``.gitignore`` of a scratch ``git init`` repository, and feeds paths that do
not exist on disk (so the last component is a file and every parent a
directory) through one ``git check-ignore --no-index --stdin -z -v -n`` call
per list.

Two comparisons:

* ``reinclude=False`` is git's exact semantics: the verdict *and* the line of
  the deciding pattern must agree on every pair.
* ``reinclude=True`` is the policy semantics. It differs from git in exactly
  one documented class: an exception re-includes a path below a directory
  that an earlier pattern excluded (git never descends into an excluded
  directory; policies allow it so that ``deny = ["**", "!{plans}/*.md"]``
  works). Every disagreement must be of that class, and the class has its
  own explicit tests below.

Both matching engines run every comparison: the pure-Python reference
(``engine="python"``) and the compiled one (``engine="re2"``, google-re2, a dev
dependency and an optional one of the package), which must be identical.

``GUARD_DIFF_LISTS`` (default 200) sets how many pattern lists run; each list
is checked against 40 paths, so CI compares 8,000 pairs per engine.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from engines import require_engine

from guard.match import CompiledList, Pattern, Source, parse_pattern

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None, reason="the git binary is the oracle and is not installed"
)

LISTS = int(os.environ.get("GUARD_DIFF_LISTS", "200"))
PATHS_PER_LIST = 40
SEED = int(os.environ.get("GUARD_DIFF_SEED", "20261202"))

# Path components: shared by paths and patterns so that patterns hit often.
NAMES = [
    "a",
    "b",
    "c",
    "ab",
    "abc",
    "src",
    "docs",
    "build",
    "a.md",
    "b.md",
    "x.txt",
    "y.py",
    "lib.so.1",
    ".env",
    ".env.local",
    ".hidden",
    "x-y",
    "foo bar",
    "trailing ",
    "ünï",
    "日本",
    "é.md",
    "[a]",
    "a*b",
    "q?",
    "!bang",
    "#hash",
    "back\\slash",
]
EXTS = [".md", ".txt", ".py", ".1", ".local", "", ".MD"]


def _escape(name: str) -> str:
    """A gitignore-literal spelling of ``name`` (every special character escaped)."""
    out = "".join("\\" + ch if ch in "*?[\\" else ch for ch in name)
    if out.startswith(("!", "#")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def _glob_component(rng: random.Random) -> str:
    """One path component of a pattern, in a randomly chosen syntax class."""
    name = rng.choice(NAMES)
    kind = rng.randrange(12)
    if kind <= 2:
        return _escape(name)
    if kind == 3:
        return "*" + rng.choice(EXTS)
    if kind == 4:  # ? replaces one character
        lit = _escape(name)
        if len(lit) > 1 and lit[0] not in "\\!#":
            return "?" + lit[1:]
        return "?"
    if kind == 5:
        return rng.choice(["[a-c]", "[ab]*", "[!x]*", "[^a]", "[a-c]b", "[[:alpha:]]*", "[]]"])
    if kind == 6:
        return _escape(name)[:2] + "*"
    if kind == 7:
        return "*" + _escape(name)[-2:].lstrip("\\")
    if kind == 8:
        return "*"
    if kind == 9:
        return "**"
    if kind == 10:  # names with the special characters escaped differently
        return rng.choice(["\\a", "a\\*b", "\\[a]", "q\\?", "\\!bang", "\\#hash", "foo\\ bar"])
    return rng.choice(["a?c", "?b", "*.*", "a*", "*b*", "x-?", "日*", "*.m?"])


def gen_pattern(rng: random.Random) -> str:
    depth = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    parts = [_glob_component(rng) for _ in range(depth)]
    shape = rng.randrange(10)
    if shape == 0:
        parts = ["**", *parts]  # **/x
    elif shape == 1:
        parts = [*parts, "**"]  # x/**
    elif shape == 2 and depth >= 2:
        parts.insert(1, "**")  # x/**/y
    body = "/".join(parts)
    if rng.random() < 0.2:
        body = "/" + body
    if rng.random() < 0.2:
        body += "/"
    if rng.random() < 0.25:
        body = "!" + body
    if rng.random() < 0.03:
        body = rng.choice(["# a comment", "", "   ", "\\", "[a", "a/**b", "***", "/", "!"])
    return body


def gen_path(rng: random.Random, patterns: Sequence[str]) -> str:
    depth = rng.choices([1, 2, 3, 4, 5], weights=[3, 4, 3, 2, 1])[0]
    parts = [rng.choice(NAMES) for _ in range(depth)]
    if rng.random() < 0.3 and patterns:
        # a path shaped like one of the patterns, to reach deep matches
        lit = rng.choice(patterns).lstrip("!/").rstrip("/")
        words = [w for w in lit.replace("\\", "").split("/") if w and not set(w) & set("*?[]")]
        parts = (words or parts)[:4] + parts[: rng.randrange(3)]
    return "/".join(parts)


@dataclass(frozen=True)
class GitAnswer:
    line: int | None  # the .gitignore line that decided, None when no pattern matched
    pattern: str


def git_check(repo: Path, lines: Sequence[str], paths: Sequence[str]) -> list[GitAnswer]:
    """One ``git check-ignore`` call for all ``paths`` against ``lines``."""
    (repo / ".gitignore").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin", "-z", "-v", "-n"],
        cwd=repo,
        input=b"".join(p.encode("utf-8") + b"\0" for p in paths),
        capture_output=True,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr.decode("utf-8", "replace")
    fields = proc.stdout.split(b"\0")
    assert fields[-1] == b""
    fields = fields[:-1]
    assert len(fields) == 4 * len(paths), (len(fields), len(paths))
    out: list[GitAnswer] = []
    for k, path in enumerate(paths):
        source, linenum, pattern, echoed = fields[4 * k : 4 * k + 4]
        assert echoed.decode("utf-8") == path
        if source:
            out.append(GitAnswer(int(linenum), pattern.decode("utf-8")))
        else:
            out.append(GitAnswer(None, ""))
    return out


def compile_lines(
    lines: Sequence[str], repo: Path, *, reinclude: bool, engine: str = "python"
) -> CompiledList:
    parsed: list[Pattern] = []
    for i, line in enumerate(lines):
        p = parse_pattern(line, Source(".gitignore", i + 1, "list", i))
        if p is not None:
            parsed.append(p)
    cl = CompiledList(parsed, {"worktree": str(repo)}, reinclude=reinclude, engine=engine)
    # an engine that silently fell back to the reference would prove nothing about itself
    assert cl.engine == engine or not any(p.regex is not None for p in parsed), (engine, lines)
    return cl


def line_of(p: Pattern | None) -> int | None:
    return p.source.line if p is not None and p.source is not None else None


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gitoracle")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "config", "core.ignorecase", "false"], check=True)
    return Path(os.path.realpath(path))


@dataclass
class Case:
    lines: list[str]
    paths: list[str]
    git: list[GitAnswer]


@pytest.fixture(scope="module")
def cases(repo: Path) -> list[Case]:
    """The generated lists and paths with git's answers (one git call per list)."""
    rng = random.Random(SEED)
    out: list[Case] = []
    for _ in range(LISTS):
        lines = [gen_pattern(rng) for _ in range(rng.randint(1, 8))]
        paths = list(dict.fromkeys(gen_path(rng, lines) for _ in range(PATHS_PER_LIST)))
        out.append(Case(lines, paths, git_check(repo, lines, paths)))
    return out


def _show(lines: Sequence[str]) -> str:
    return "\n".join(f"  {i + 1}: {line!r}" for i, line in enumerate(lines))


def test_generated_pairs_exercise_every_outcome(cases: list[Case]) -> None:
    """Guards the generator itself: a differential test that never matches proves nothing."""
    answers = [a for c in cases for a in c.git]
    ignored = [a for a in answers if a.line is not None and not a.pattern.startswith("!")]
    negated = [a for a in answers if a.pattern.startswith("!")]
    assert len(answers) >= 2000
    assert len(ignored) >= len(answers) // 10, "too few paths ignored: generator drifted"
    assert len(negated) >= len(answers) // 100, "too few exceptions decide: generator drifted"
    assert len(ignored) <= len(answers) * 9 // 10, "almost everything ignored: generator drifted"


def test_git_semantics_match_git_check_ignore_exactly(
    repo: Path, cases: list[Case], engine: str
) -> None:
    """reinclude=False must reproduce git's verdict and deciding line on every pair."""
    problems: list[str] = []
    for case in cases:
        cl = compile_lines(case.lines, repo, reinclude=False, engine=engine)
        for rel, git in zip(case.paths, case.git, strict=True):
            ours = cl.match(str(repo / rel))
            git_ignored = git.line is not None and not git.pattern.startswith("!")
            our_ignored = ours is not None and not ours.negated
            same_line = git.line is None or line_of(ours) == git.line
            if git_ignored != our_ignored or not same_line:
                problems.append(
                    f"path {rel!r}: git line {git.line} {git.pattern!r} ignored={git_ignored};"
                    f" ours line {line_of(ours)} ignored={our_ignored}\n{_show(case.lines)}"
                )
    pairs = sum(len(c.paths) for c in cases)
    assert not problems, f"{len(problems)} of {pairs} pairs disagree with git:\n" + "\n".join(
        problems[:15]
    )


def test_compiled_engine_answers_on_its_own_and_agrees_with_the_reference(
    repo: Path, cases: list[Case]
) -> None:
    """The re2 engine hands a path back to the reference engine when its one answer per
    path cannot tell which directory level is deepest (two patterns of a list matching
    directory levels only). The differential tests above would pass if it always did
    that, so: it must answer most pairs itself, every one of those answers must equal
    the reference engine's, and the hand-back must occur in the generated data (dense in
    ``**`` and in exceptions, so far more often than in policies)."""
    from guard.match.re2_engine import FALLBACK

    answered = handed_back = 0
    for case in cases:
        for reinclude in (False, True):
            ref = compile_lines(case.lines, repo, reinclude=reinclude, engine="python")
            fast = compile_lines(
                case.lines, repo, reinclude=reinclude, engine=require_engine("re2")
            )._set._fast
            if fast is None:
                continue  # nothing compiled: no pattern can match
            for rel in case.paths:
                path = str(repo / rel)
                got = fast.decided(path, False)
                if got is FALLBACK:
                    handed_back += 1
                    continue
                answered += 1
                want = ref._set.decided(path, False)
                assert got == want, (case.lines, rel, reinclude, got, want)
    assert answered >= 4 * (answered + handed_back) // 5, (answered, handed_back)
    assert handed_back > 0


def _levels(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]


def test_policy_semantics_differ_from_git_only_by_reinclusion(
    repo: Path, cases: list[Case], engine: str
) -> None:
    """reinclude=True: every disagreement is "an exception re-includes a path below an
    excluded directory" -- git says ignored because a proper ancestor directory is
    excluded, and ours finds a negated pattern matching a level below that ancestor."""
    problems: list[str] = []
    reincluded = 0
    for case in cases:
        cl = compile_lines(case.lines, repo, reinclude=True, engine=engine)
        for rel, git in zip(case.paths, case.git, strict=True):
            path = str(repo / rel)
            ours = cl.match(path)
            git_ignored = git.line is not None and not git.pattern.startswith("!")
            our_ignored = ours is not None and not ours.negated
            if git_ignored == our_ignored:
                continue
            why = _not_reinclusion(cl, repo, rel, git, ours) if git_ignored else "ours ignores"
            if why:
                problems.append(
                    f"path {rel!r}: git line {git.line} {git.pattern!r}; ours line"
                    f" {line_of(ours)}: {why}\n{_show(case.lines)}"
                )
            else:
                reincluded += 1
    assert not problems, f"{len(problems)} undocumented disagreements:\n" + "\n".join(problems[:15])
    # the class must actually occur in the generated data, or this test proves nothing
    assert reincluded > 0


def _not_reinclusion(
    cl: CompiledList, repo: Path, rel: str, git: GitAnswer, ours: Pattern | None
) -> str:
    """Why a disagreement is NOT the documented class, or "" when it is."""
    if ours is None or not ours.negated:
        return "ours found no exception"
    levels = _levels(rel)
    hits = cl.explain(str(repo / rel))
    git_levels = [
        i
        for i, lvl in enumerate(levels[:-1])
        if any(p.source and p.source.line == git.line and h == str(repo / lvl) for h, p in hits)
    ]
    if not git_levels:
        return "git's deciding pattern does not match a proper ancestor directory"
    excluded_at = git_levels[0]
    deeper = [
        i
        for i, lvl in enumerate(levels)
        if i > excluded_at and any(p is ours and h == str(repo / lvl) for h, p in hits)
    ]
    if not deeper:
        return "ours' exception does not match below git's excluded directory"
    return ""


# -- the documented class, explicitly -------------------------------------


def test_reinclusion_below_excluded_directory_git_refuses_policy_allows(repo: Path) -> None:
    """The one documented difference, checked against git itself: after ``docs/``
    excludes a directory, git cannot re-include ``docs/keep.md`` with an exception;
    a policy list can (the exception is what the author wrote)."""
    lines = ["docs/", "!docs/keep.md"]
    paths = ["docs/keep.md", "docs/other.md", "docs/sub/keep.md"]
    git = git_check(repo, lines, paths)
    assert [a.line for a in git] == [1, 1, 1]  # git: all ignored through docs/
    exact = compile_lines(lines, repo, reinclude=False)
    policy = compile_lines(lines, repo, reinclude=True)
    assert [line_of(exact.matched(str(repo / p))) for p in paths] == [1, 1, 1]
    assert policy.matched(str(repo / "docs/keep.md")) is None
    assert line_of(policy.match(str(repo / "docs/keep.md"))) == 2
    assert line_of(policy.matched(str(repo / "docs/other.md"))) == 1
    assert line_of(policy.matched(str(repo / "docs/sub/keep.md"))) == 1


def test_deny_everything_but_plans_works_only_with_policy_semantics(repo: Path) -> None:
    """The shape the shipped plan agent relies on: ``["**", "!.openoxide/plans/*.md"]``.
    git ignores the plan file (``**`` excludes ``.openoxide`` first); the policy
    semantics must exempt exactly the plan files, and nothing beside or below them."""
    lines = ["**", "!.openoxide/plans/*.md"]
    paths = [
        ".openoxide/plans/p.md",
        ".openoxide/plans/p.txt",
        ".openoxide/plans/sub/p.md",
        ".openoxide/policy.toml",
        "src/.openoxide/plans/p.md",
    ]
    git = git_check(repo, lines, paths)
    assert all(a.line == 1 for a in git), git
    policy = compile_lines(lines, repo, reinclude=True)
    verdicts = [policy.matched(str(repo / p)) is None for p in paths]
    assert verdicts == [True, False, False, False, False]


def test_reinclusion_cannot_escape_through_a_later_positive_pattern(repo: Path) -> None:
    """An attacker-friendly reading of re-inclusion would let a deeper exception win
    over a later pattern at the same level; it must not: last match wins per level."""
    lines = ["a/", "!a/b/c", "a/b/c"]
    policy = compile_lines(lines, repo, reinclude=True)
    assert line_of(policy.matched(str(repo / "a/b/c"))) == 3
    git = git_check(repo, lines, ["a/b/c"])
    assert git[0].line == 1


def test_named_root_list_matches_like_an_anchored_gitignore(repo: Path, tmp_path: Path) -> None:
    """``{plans}/PATTERN`` in a policy means what ``/PATTERN`` means in a .gitignore at
    the root of the plans directory: same verdicts, same deciding lines."""
    lines = ["/*.md", "!/keep.md", "/sub/", "/d/**/x?"]
    rels = ["a.md", "keep.md", "sub/x", "d/a.md", "d/e/f/xy", "e/a.md", "dxy"]
    git = git_check(repo, lines, rels)
    assert [a.line for a in git] == [1, 2, 3, None, 4, None, None]
    plans = tmp_path / "plans"
    parsed = [
        parse_pattern(ln.replace("/", "{plans}/", 1), Source("p", i + 1, "l", i))
        for i, ln in enumerate(lines)
    ]
    cl = CompiledList([p for p in parsed if p], {"plans": str(plans)}, reinclude=False)
    assert [line_of(cl.match(str(plans / rel))) for rel in rels] == [a.line for a in git]
    # and the same list does not reach outside its root
    assert cl.match(str(tmp_path / "a.md")) is None


def test_question_mark_and_brackets_match_one_utf8_byte_like_git(repo: Path) -> None:
    """git's wildmatch works on bytes: ``?`` and ``[...]`` match one byte of UTF-8, so
    ``?.md`` does not match ``é.md`` (two bytes) while ``??.md`` does. A character-
    based matcher would disagree with the oracle on every non-ASCII name."""
    lines = ["?.md", "x??", "[!a]b", "日*"]
    rels = ["é.md", "a.md", "xé", "xab", "éb", "日本", "d/é.md"]
    git = git_check(repo, lines, rels)
    assert [a.line for a in git] == [None, 1, 2, 2, None, 4, None]
    cl = compile_lines(lines, repo, reinclude=False)
    assert [line_of(cl.match(str(repo / r))) for r in rels] == [a.line for a in git]
