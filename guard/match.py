"""Compiled gitignore matching over absolute paths.

Each pattern list of a policy is a gitignore file: same syntax, same meaning,
``!`` for exceptions, last match wins, and a path inside an excluded
directory stays excluded (git does not descend into it, so an exception
cannot re-include it). ``git check-ignore --no-index`` is the oracle the
tests compare against.

Patterns are anchored to named roots (the worktree by default) and compiled
against absolute, canonical paths, so one list may mix roots. Compilation
sorts patterns into classes that are answered by dictionary look-ups
(literal names, ``*.ext`` suffixes, literal paths, ``dir/**``); only what
remains runs as a combined regular expression. Matching walks the path's
levels top-down exactly as git does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ROOT_RE = re.compile(r"^\{([a-z]+)\}(?:/|$)")
_GLOB_CHARS = frozenset("*?[\\")
_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


@dataclass(frozen=True, slots=True)
class Source:
    """Where a pattern was written: file, line, dotted key and list index."""

    file: str
    line: int
    key: str
    index: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.key}[{self.index}]"


@dataclass(frozen=True, slots=True)
class Pattern:
    """One parsed gitignore line."""

    text: str
    negated: bool
    dir_only: bool
    root: str  # a root name, or "/" for //absolute patterns
    anchored: bool  # matched against the path below the root, else the last component
    body: str
    regex: re.Pattern[str] | None  # None: the pattern can never match
    source: Source | None = None
    problem: str | None = None  # why it can never match, for lint and explain

    def matches_level(self, rel: str, is_dir: bool) -> bool:
        if self.regex is None or (self.dir_only and not is_dir):
            return False
        subject = rel if self.anchored else rel.rsplit("/", 1)[-1]
        return self.regex.fullmatch(subject) is not None


class PatternError(ValueError):
    """A pattern that cannot be used (unknown root, control characters)."""


def parse_pattern(line: str, source: Source | None = None) -> Pattern | None:
    """Parse one gitignore line; ``None`` for blank lines and comments."""
    text = line
    if "\x00" in line or "\n" in line or "\r" in line:
        raise PatternError(f"pattern {line!r} contains a NUL or newline character")
    if line == "" or line.startswith("#"):
        return None
    # trailing spaces are ignored unless escaped with a backslash
    stripped = line.rstrip(" ")
    if len(stripped) < len(line) and _ends_with_escape(stripped):
        stripped += " "
    line = stripped
    if line == "":
        return None
    negated = False
    if line.startswith("!"):
        negated = True
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    root = "worktree"
    anchored_by_root = False
    m = ROOT_RE.match(line)
    if line.startswith("//"):
        root, line, anchored_by_root = "/", line[2:], True
    elif m:
        root = m.group(1)
        line = line[m.end() :]
        anchored_by_root = True
        if line == "":
            line = "**"
    dir_only = False
    if line.endswith("/") and not _ends_with_escape(line[:-1]) and len(line) > 1:
        dir_only = True
        line = line[:-1]
    anchored = anchored_by_root or "/" in line
    if line.startswith("/"):
        line = line[1:]
    if line == "":
        return Pattern(text, negated, dir_only, root, anchored, line, None, source, "empty pattern")
    regex_src, problem = glob_to_regex(line)
    regex = re.compile(regex_src, re.DOTALL) if regex_src is not None else None
    return Pattern(text, negated, dir_only, root, anchored, line, regex, source, problem)


def _ends_with_escape(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


def glob_to_regex(glob: str) -> tuple[str | None, str | None]:
    """Translate a wildmatch glob (WM_PATHNAME) into a regex for fullmatch.

    Returns ``(None, reason)`` for a glob git can never match (an unterminated
    bracket, a trailing backslash, an unknown character class).
    """
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            double = j - i >= 2 and (i == 0 or glob[i - 1] == "/") and (j == n or glob[j] == "/")
            if not double:
                out.append("[^/]*")
            elif j == n:
                out.append(".*")
            else:
                out.append("(?:.*/)?")
                j += 1
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "\\":
            if i + 1 >= n:
                return None, "ends with a lone backslash"
            out.append(re.escape(glob[i + 1]))
            i += 2
        elif c == "[":
            parsed = _bracket(glob, i)
            if parsed is None:
                return None, "has an unterminated or invalid [...] class"
            cls, i = parsed
            out.append(cls)
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out), None


def _bracket(glob: str, start: int) -> tuple[str, int] | None:
    i = start + 1
    n = len(glob)
    negate = False
    if i < n and glob[i] in "!^":
        negate = True
        i += 1
    items: list[str] = []
    first = True
    while i < n:
        c = glob[i]
        if c == "]" and not first:
            body = "".join(items)
            if negate:
                return f"[^/{body}]", i + 1
            return (f"(?:(?!/)[{body}])" if body else "(?!)"), i + 1
        first = False
        if c == "[" and glob.startswith("[:", i):
            end = glob.find(":]", i + 2)
            if end < 0:
                return None
            name = glob[i + 2 : end]
            if name not in _CLASSES:
                return None
            items.append(_CLASSES[name])
            i = end + 2
            continue
        if c == "\\":
            if i + 1 >= n:
                return None
            c = glob[i + 1]
            i += 1
        lo = c
        i += 1
        if i + 1 < n and glob[i] == "-" and glob[i + 1] != "]":
            hi = glob[i + 1]
            if hi == "\\":
                if i + 2 >= n:
                    return None
                hi = glob[i + 2]
                i += 1
            i += 2
            if ord(hi) < ord(lo):
                continue  # a reversed range matches nothing
            items.append(f"{_esc(lo)}-{_esc(hi)}")
        else:
            items.append(_esc(lo))
    return None


def _esc(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c


# ---------------------------------------------------------------------------
# compiled lists


@dataclass(slots=True)
class _Group:
    """The patterns of one list that share a root, sorted into look-up classes."""

    root: str  # absolute root path without trailing slash ("" for "/")
    names: dict[str, tuple[int, int]] = field(default_factory=dict)  # literal basename
    suffixes: dict[str, tuple[int, int]] = field(default_factory=dict)  # "*SUFFIX"
    suffix_lengths: tuple[int, ...] = ()
    paths: dict[str, tuple[int, int]] = field(default_factory=dict)  # literal anchored path
    under: dict[str, int] = field(default_factory=dict)  # "PREFIX/**"
    match_all: tuple[int, int] = (-1, -1)  # "**" or "*" without slash
    anchored_rx: tuple[re.Pattern[str] | None, re.Pattern[str] | None] = (None, None)
    anchored_idx: tuple[list[int], list[int]] = field(default_factory=lambda: ([], []))
    base_rx: tuple[re.Pattern[str] | None, re.Pattern[str] | None] = (None, None)
    base_idx: tuple[list[int], list[int]] = field(default_factory=lambda: ([], []))


def _bump(d: dict[str, tuple[int, int]], key: str, idx: int, dir_only: bool) -> None:
    any_i, dir_i = d.get(key, (-1, -1))
    d[key] = (any_i, max(dir_i, idx)) if dir_only else (max(any_i, idx), dir_i)


def _is_literal(s: str) -> bool:
    return not (_GLOB_CHARS & set(s))


class CompiledList:
    """One gitignore list compiled against concrete roots.

    :meth:`match` returns the pattern that decides a path (a negated one
    means "explicitly not matched"), or ``None``.

    With ``reinclude=True`` (policies) an exception may re-include a path
    below an excluded directory: the deepest level that any pattern matches
    decides. With ``reinclude=False`` matching is exactly git's: the first
    excluded directory decides everything below it.
    """

    __slots__ = ("_bases", "_groups", "patterns", "reinclude")

    def __init__(
        self,
        patterns: Sequence[Pattern],
        roots: Mapping[str, str | None],
        *,
        reinclude: bool = True,
    ) -> None:
        self.patterns: tuple[Pattern, ...] = tuple(patterns)
        self.reinclude = reinclude
        groups: dict[str, _Group] = {}
        pending: dict[str, tuple[list[tuple[int, Pattern]], list[tuple[int, Pattern]]]] = {}
        self._bases: list[str | None] = []
        for idx, p in enumerate(self.patterns):
            base = _base_of(p, roots)
            self._bases.append(base)
            if p.regex is None or base is None:
                continue  # e.g. no worktree: unanchored patterns match nothing
            g = groups.get(base)
            if g is None:
                g = groups[base] = _Group(root=base)
                pending[base] = ([], [])
            body = p.body
            if not p.anchored:
                if body.strip("*") == "":
                    a, d = g.match_all
                    g.match_all = (a, max(d, idx)) if p.dir_only else (max(a, idx), d)
                elif _is_literal(body):
                    _bump(g.names, body, idx, p.dir_only)
                elif body.startswith("*") and _is_literal(body[1:]):
                    _bump(g.suffixes, body[1:], idx, p.dir_only)
                else:
                    pending[base][1].append((idx, p))
            elif _is_literal(body):
                _bump(g.paths, body, idx, p.dir_only)
            elif body.endswith("/**") and _is_literal(body[:-3]) and not p.dir_only:
                g.under[body[:-3]] = max(g.under.get(body[:-3], -1), idx)
            elif body == "**":
                a, d = g.match_all
                g.match_all = (a, max(d, idx)) if p.dir_only else (max(a, idx), d)
            else:
                pending[base][0].append((idx, p))
        for base, g in groups.items():
            g.suffix_lengths = tuple(sorted({len(s) for s in g.suffixes}))
            anchored, basename = pending[base]
            g.anchored_rx, g.anchored_idx = _combine(anchored)
            g.base_rx, g.base_idx = _combine(basename)
        self._groups = tuple(sorted(groups.values(), key=lambda gr: len(gr.root)))

    def match(self, path: str, is_dir: bool = False) -> Pattern | None:
        """The deciding pattern for absolute, canonical ``path``, or None."""
        covering = [g for g in self._groups if path.startswith(g.root + "/")]
        if not covering:
            return None
        pats = self.patterns
        under_hits = [-1] * len(covering)
        decided = -1
        start = len(covering[0].root) + 1
        n = len(path)
        while start < n:
            slash = path.find("/", start)
            end = n if slash < 0 else slash
            sel = 1 if (slash >= 0 or is_dir) else 0
            comp = path[start:end]
            best = -1
            for gi, g in enumerate(covering):
                rl = len(g.root) + 1
                if rl > start:
                    continue
                level = path[rl:end]
                b = under_hits[gi]
                m_all = g.match_all
                if m_all[0] > b:
                    b = m_all[0]
                if sel and m_all[1] > b:
                    b = m_all[1]
                if g.names:
                    hit = g.names.get(comp)
                    if hit is not None:
                        b = max(b, hit[0], hit[1] if sel else -1)
                if g.suffix_lengths:
                    lc = len(comp)
                    for ln in g.suffix_lengths:
                        if ln > lc:
                            break
                        hit = g.suffixes.get(comp[lc - ln :])
                        if hit is not None:
                            b = max(b, hit[0], hit[1] if sel else -1)
                if g.paths:
                    hit = g.paths.get(level)
                    if hit is not None:
                        b = max(b, hit[0], hit[1] if sel else -1)
                if g.anchored_rx[sel] is not None:
                    b = _rx_best(g.anchored_rx, g.anchored_idx, level, sel, b)
                if g.base_rx[sel] is not None:
                    b = _rx_best(g.base_rx, g.base_idx, comp, sel, b)
                if g.under:
                    u = g.under.get(level)
                    if u is not None and u > under_hits[gi]:
                        under_hits[gi] = u
                if b > best:
                    best = b
            if best >= 0:
                decided = best
                if slash >= 0 and not self.reinclude and not pats[best].negated:
                    return pats[best]  # git: an excluded directory excludes all below
            if slash < 0:
                break
            start = slash + 1
        return pats[decided] if decided >= 0 else None

    def matched(self, path: str, is_dir: bool = False) -> Pattern | None:
        """The deciding pattern when it is a positive match, else None."""
        p = self.match(path, is_dir)
        return p if p is not None and not p.negated else None

    def explain(self, path: str, is_dir: bool = False) -> list[tuple[str, Pattern]]:
        """Every (level, pattern) pair where a pattern matches a level of ``path``."""
        hits: list[tuple[str, Pattern]] = []
        for p, base in zip(self.patterns, self._bases, strict=True):
            if base is None or not path.startswith(base + "/"):
                continue
            rel = path[len(base) + 1 :]
            parts = rel.split("/")
            for k in range(1, len(parts) + 1):
                lvl = "/".join(parts[:k])
                if p.matches_level(lvl, k < len(parts) or is_dir):
                    hits.append((base + "/" + lvl, p))
        return hits


def _base_of(p: Pattern, roots: Mapping[str, str | None]) -> str | None:
    if p.root == "/":
        return ""
    base = roots.get(p.root)
    return base.rstrip("/") if base is not None else None


def _rx_best(
    rx: tuple[re.Pattern[str] | None, re.Pattern[str] | None],
    idx: tuple[list[int], list[int]],
    subject: str,
    sel: int,
    best: int,
) -> int:
    r = rx[sel]
    if r is not None:
        m = r.fullmatch(subject)
        if m is not None and m.lastindex is not None:
            i = idx[sel][m.lastindex - 1]
            if i > best:
                return i
    return best


def _combine(
    items: list[tuple[int, Pattern]],
) -> tuple[
    tuple[re.Pattern[str] | None, re.Pattern[str] | None],
    tuple[list[int], list[int]],
]:
    """Two combined regexes (file level, directory level), latest pattern first.

    ``fullmatch`` takes the first alternative that matches the whole
    subject, so the group that matched names the last matching pattern.
    """
    out_rx: list[re.Pattern[str] | None] = []
    out_idx: list[list[int]] = []
    for dir_level in (False, True):
        chosen = [(i, p) for i, p in reversed(items) if dir_level or not p.dir_only]
        if not chosen:
            out_rx.append(None)
            out_idx.append([])
            continue
        assert all(p.regex is not None for _, p in chosen)
        src = "|".join(f"({p.regex.pattern})" for _, p in chosen if p.regex is not None)
        out_rx.append(re.compile(src, re.DOTALL))
        out_idx.append([i for i, _ in chosen])
    return (out_rx[0], out_rx[1]), (out_idx[0], out_idx[1])
