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

That is the pure-Python engine, the reference. Where the optional google-re2
is installed, policies are matched by a compiled engine (:class:`_Re2Sets`)
that answers every pattern at every level of a path in one call per RE2 set,
and hands the path to the reference engine whenever its answer cannot settle
the decision. Both give the same decisions (tests/test_match_*.py compare them
with each other and with git).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DIR_CACHE_LIMIT = 1 << 15
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
        return self.regex.fullmatch(as_bytes(subject)) is not None


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
            # "{root}" alone: the root directory itself, so everything below it too
            return Pattern(text, negated, False, root, True, "", re.compile(""), source)
    dir_only = False
    if line.endswith("/") and not _ends_with_escape(line[:-1]) and len(line) > 1:
        dir_only = True
        line = line[:-1]
    anchored = anchored_by_root or "/" in line
    if line.startswith("/"):
        line = line[1:]
    if line == "":
        return Pattern(text, negated, dir_only, root, anchored, line, None, source, "empty pattern")
    regex_src, problem = glob_to_regex(as_bytes(line))
    regex = re.compile(regex_src, re.DOTALL) if regex_src is not None else None
    return Pattern(text, negated, dir_only, root, anchored, line, regex, source, problem)


def as_bytes(s: str) -> str:
    """``s`` as one character per UTF-8 byte, the unit git's wildmatch works on.

    Regexes are compiled from, and run on, this form, so ``?`` and ``[...]``
    match one byte as in git (``?.md`` does not match ``é.md``). Literal
    look-ups need no conversion: equal strings have equal bytes.
    """
    return s if s.isascii() else s.encode("utf-8", "surrogateescape").decode("latin-1")


def _ends_with_escape(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


#: Token kinds of a wildmatch glob (see :func:`glob_tokens`).
STAR = "star"  # ``*``: any run of characters but ``/``
DSTAR_END = "dstar-end"  # a trailing ``**`` after ``/`` (or alone): anything
DSTAR_DIR = "dstar-dir"  # ``**/`` at the start or after ``/``: zero or more directories
ANY = "any"  # ``?``: one character but ``/``
LIT = "lit"  # one literal character (escapes resolved)
CLASS = "class"  # ``[...]``: the value is its regex

GlobToken = tuple[str, str]


def glob_tokens(glob: str) -> tuple[list[GlobToken] | None, str | None]:
    """Split a wildmatch glob (WM_PATHNAME) into tokens: the one tokenizer of globs.

    Returns ``(None, reason)`` for a glob git can never match (an unterminated
    bracket, a trailing backslash, an unknown character class). Used to build
    the matcher's regexes (:func:`glob_to_regex`) and lint's sample paths.
    """
    out: list[GlobToken] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            double = j - i >= 2 and (i == 0 or glob[i - 1] == "/") and (j == n or glob[j] == "/")
            if not double:
                out.append((STAR, ""))
            elif j == n:
                out.append((DSTAR_END, ""))
            else:
                out.append((DSTAR_DIR, ""))
                j += 1
            i = j
        elif c == "?":
            out.append((ANY, ""))
            i += 1
        elif c == "\\":
            if i + 1 >= n:
                return None, "ends with a lone backslash"
            out.append((LIT, glob[i + 1]))
            i += 2
        elif c == "[":
            parsed = _bracket(glob, i)
            if parsed is None:
                return None, "has an unterminated or invalid [...] class"
            cls, i = parsed
            out.append((CLASS, cls))
        else:
            out.append((LIT, c))
            i += 1
    return out, None


_TOKEN_REGEX = {STAR: "[^/]*", DSTAR_END: ".*", DSTAR_DIR: "(?:.*/)?", ANY: "[^/]"}


def glob_to_regex(glob: str) -> tuple[str | None, str | None]:
    """Translate a wildmatch glob (WM_PATHNAME) into a regex for fullmatch.

    Returns ``(None, reason)`` for a glob git can never match (see :func:`glob_tokens`).
    """
    tokens, problem = glob_tokens(glob)
    if tokens is None:
        return None, problem
    parts = [
        re.escape(value) if kind == LIT else value if kind == CLASS else _TOKEN_REGEX[kind]
        for kind, value in tokens
    ]
    return "".join(parts), None


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


RxPair = tuple[re.Pattern[str] | None, re.Pattern[str] | None]
PerList = tuple[int, ...]  # the best pattern index per list, -1 for none


@dataclass(frozen=True, slots=True)
class _Rx:
    """One list's patterns of one class, combined: per level kind (file, directory)."""

    list_id: int
    rx: RxPair
    idx: tuple[list[int], list[int]]


@dataclass(frozen=True, slots=True)
class _RxClass:
    """A class of regex patterns: a prefilter over every list, then one regex per list."""

    any_rx: RxPair  # (None, None) when there is only one list: no prefilter needed
    per_list: list[_Rx]

    def hits(self, subject: str, sel: int, best: list[int] | None, n: int) -> list[int] | None:
        if not subject.isascii():
            subject = as_bytes(subject)
        pre = self.any_rx[sel]
        if pre is not None and pre.fullmatch(subject) is None:
            return best
        for r in self.per_list:
            best = _rx_hit(r, subject, sel, best, n)
        return best


SUFFIX_KEY = 4
_SPECIAL = frozenset("*?[]\\")


def literal_suffix(glob: str) -> str:
    """The longest tail of ``glob`` without glob syntax: every match ends with it."""
    i = len(glob)
    while i > 0 and glob[i - 1] not in _SPECIAL:
        i -= 1
    return glob[i:]


_Entry = tuple[tuple[tuple[str, "PerList"], ...], "_RxClass | None"]


class _Keyed:
    """Globs keyed by the text every match must end with, so most subjects run no regex.

    A literal suffix with a dot is keyed by its extension (from its last dot:
    a subject can only match if its own last dot starts the same text), one
    without a dot by its last SUFFIX_KEY characters. ``*SUFFIX`` patterns are
    answered by ``endswith``; other globs by their combined regex.
    """

    __slots__ = ("any", "by_ext", "by_suffix", "general", "lengths")

    def __init__(
        self,
        pure: tuple[dict[str, PerList], dict[str, PerList]],
        regex: dict[int, list[tuple[int, Pattern]]],
    ) -> None:
        rx_keyed: dict[tuple[bool, str], dict[int, list[tuple[int, Pattern]]]] = {}
        rest: dict[int, list[tuple[int, Pattern]]] = {}
        for list_id, items in regex.items():
            for idx, p in items:
                assert p.regex is not None
                suffix = literal_suffix(p.body if not p.body.startswith("**/") else p.body[3:])
                if suffix and p.regex.pattern.endswith(re.escape(as_bytes(suffix))):
                    rx_keyed.setdefault(_key(suffix), {}).setdefault(list_id, []).append((idx, p))
                else:
                    rest.setdefault(list_id, []).append((idx, p))
        rx_classes = {k: _combine_by_list(v) for k, v in rx_keyed.items()}
        tables: list[tuple[dict[str, _Entry], dict[str, _Entry]]] = []
        for sel in (0, 1):
            acc: dict[tuple[bool, str], list[tuple[str, PerList]]] = {}
            for suffix, t in pure[sel].items():
                acc.setdefault(_key(suffix), []).append((suffix, t))
            ext: dict[str, _Entry] = {}
            sfx: dict[str, _Entry] = {}
            for key in set(acc) | set(rx_classes):
                entry: _Entry = (tuple(acc.get(key, ())), rx_classes.get(key))
                (ext if key[0] else sfx)[key[1]] = entry
            tables.append((ext, sfx))
        self.by_ext = (tables[0][0], tables[1][0])
        self.by_suffix = (tables[0][1], tables[1][1])
        self.lengths = tuple(sorted({len(k) for k in self.by_suffix[1]}))
        self.general = _combine_by_list(rest) if rest else None
        self.any = bool(self.by_ext[1] or self.by_suffix[1] or self.general)

    def hits(self, subject: str, sel: int, best: list[int] | None, n: int) -> list[int] | None:
        dot = subject.rfind(".")
        if dot >= 0:
            e = self.by_ext[sel].get(subject[dot:])
            if e is not None:
                best = _entry_hits(e, subject, sel, best, n)
        if self.lengths:
            ls = len(subject)
            table = self.by_suffix[sel]
            for ln in self.lengths:
                if ln > ls:
                    break
                e = table.get(subject[ls - ln :])
                if e is not None:
                    best = _entry_hits(e, subject, sel, best, n)
        if self.general is not None:
            best = self.general.hits(subject, sel, best, n)
        return best


def _key(suffix: str) -> tuple[bool, str]:
    dot = suffix.rfind(".")
    return (True, suffix[dot:]) if dot >= 0 else (False, suffix[-SUFFIX_KEY:])


def _entry_hits(
    e: _Entry, subject: str, sel: int, best: list[int] | None, n: int
) -> list[int] | None:
    for suffix, t in e[0]:
        if subject.endswith(suffix):
            best = _merge(best, t)
    if e[1] is not None:
        best = e[1].hits(subject, sel, best, n)
    return best


class _Table:
    """Key -> per list, the best (file-level, directory-level-only) index."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: dict[str, list[list[int]]] = {}

    def add(self, key: str, list_id: int, idx: int, dir_only: bool) -> None:
        row = self.rows.setdefault(key, [[-1, -1] for _ in range(self.n)])
        cell = row[list_id]
        k = 1 if dir_only else 0
        cell[k] = max(cell[k], idx)

    def split(self) -> tuple[dict[str, PerList], dict[str, PerList]]:
        files = {
            k: tuple(c[0] for c in row)
            for k, row in self.rows.items()
            if any(c[0] >= 0 for c in row)
        }
        dirs = {k: tuple(max(c) for c in row) for k, row in self.rows.items()}
        return files, dirs


@dataclass(slots=True)
class _Group:
    """The patterns of every list that share a root, sorted into look-up classes."""

    root: str  # absolute root path without trailing slash ("" for "/")
    prefix: str
    prefix_len: int
    match_all: tuple[PerList | None, PerList | None]  # "**", "*" (per level kind)
    names: tuple[dict[str, PerList], dict[str, PerList]]  # literal last component
    last: _Keyed  # "*SUFFIX" and other globs of the last component, keyed by their ending
    paths: tuple[dict[str, PerList], dict[str, PerList]]  # literal anchored path
    under: dict[str, PerList]  # "PREFIX/**": every level below PREFIX
    root_hit: PerList | None  # "{root}" alone: the root directory itself
    fixed: dict[tuple[int, str], _RxClass]  # no "**": by depth and literal first component
    tails: tuple[tuple[int, _Keyed], ...]  # "**/a/*.b": the last k components
    anchored: _Keyed  # anything else anchored


def _is_literal(s: str) -> bool:
    return not (_GLOB_CHARS & set(s))


def _merge(best: list[int] | None, t: PerList) -> list[int]:
    if best is None:
        return list(t)
    for i, v in enumerate(t):
        if v > best[i]:
            best[i] = v
    return best


def _rx_hit(r: _Rx, subject: str, sel: int, best: list[int] | None, n: int) -> list[int] | None:
    rx = r.rx[sel]
    if rx is None:
        return best
    m = rx.fullmatch(subject)
    if m is None or m.lastindex is None:
        return best
    i = r.idx[sel][m.lastindex - 1]
    if best is None:
        best = [-1] * n
    if i > best[r.list_id]:
        best[r.list_id] = i
    return best


class RuleSet:
    """Several gitignore lists compiled together against concrete roots.

    One walk over a path answers every list: :meth:`decided` gives, per
    list, the index of the pattern that decides the path (a negated one means
    "explicitly not matched") or -1. The walk's state after each directory
    level is cached per directory, so a path whose parent was seen before
    costs one level.

    With ``reinclude=True`` (policies) an exception may re-include a path
    below an excluded directory: the deepest level that any pattern of the
    list matches decides. With ``reinclude=False`` (one list only) matching
    is exactly git's: the first excluded directory decides all below it.

    ``engine`` chooses how: "re2" (the default where google-re2 is installed)
    asks the compiled engine first and walks only the paths it hands back;
    "python" always walks. :attr:`engine` says which one was built ("python"
    when re2 was asked for but cannot be imported or cannot compile the lists).
    """

    __slots__ = ("_dirs", "_fast", "_groups", "_n", "engine", "lists", "reinclude")

    def __init__(
        self,
        lists: Sequence[Sequence[Pattern]],
        roots: Mapping[str, str | None],
        *,
        reinclude: bool = True,
        engine: str | None = None,
    ) -> None:
        if not reinclude and len(lists) != 1:
            raise ValueError("git semantics (reinclude=False) need exactly one list")
        self.lists: tuple[tuple[Pattern, ...], ...] = tuple(tuple(ps) for ps in lists)
        self.reinclude = reinclude
        n = self._n = len(self.lists)
        acc: dict[str, dict[str, Any]] = {}
        for list_id, patterns in enumerate(self.lists):
            for idx, p in enumerate(patterns):
                base = _base_of(p, roots)
                if p.regex is None or base is None:
                    continue  # e.g. no worktree: unanchored patterns match nothing
                a = acc.get(base)
                if a is None:
                    a = acc[base] = {
                        "all": _Table(n), "names": _Table(n), "suffixes": _Table(n),
                        "paths": _Table(n), "under": _Table(n), "fixed": {}, "tails": {},
                        "anchored": {}, "base": {},
                    }  # fmt: skip
                _classify(a, list_id, idx, p)
        groups = []
        for base, a in acc.items():
            all_files, all_dirs = a["all"].split()
            under_files, _ = a["under"].split()
            no_pure: tuple[dict[str, PerList], dict[str, PerList]] = ({}, {})
            groups.append(
                _Group(
                    root=base,
                    prefix=base + "/",
                    prefix_len=len(base) + 1,
                    match_all=(all_files.get("*"), all_dirs.get("*")),
                    names=a["names"].split(),
                    last=_Keyed(a["suffixes"].split(), a["base"]),
                    paths=a["paths"].split(),
                    root_hit=a["paths"].split()[1].get(""),
                    under=under_files,
                    fixed={k: _combine_by_list(v) for k, v in a["fixed"].items()},
                    tails=tuple((k, _Keyed(no_pure, v)) for k, v in sorted(a["tails"].items())),
                    anchored=_Keyed(no_pure, a["anchored"]),
                )
            )
        self._groups = tuple(sorted(groups, key=lambda gr: len(gr.root)))
        self._dirs: dict[str, tuple[PerList, dict[int, PerList], bool]] = {}
        self._fast: _Re2Sets | None = None
        self.engine = "python"
        engine = DEFAULT_ENGINE if engine is None else engine
        if engine not in ENGINES:
            raise ValueError(f"unknown matching engine {engine!r} (known: {', '.join(ENGINES)})")
        if engine == "re2" and any(self.lists):
            try:
                self._fast = _Re2Sets(self, roots)
            except Exception:  # not installed, or a set RE2 cannot build: the reference decides
                self._fast = None
            else:
                self.engine = "re2"

    def decided(self, path: str, is_dir: bool = False) -> PerList:
        """Per list, the index of the deciding pattern for ``path`` (-1: none)."""
        if self._fast is not None:
            got = self._fast.decided(path, is_dir)
            if got is not _FALLBACK:
                return got
        parent_end = path.rfind("/")
        state = self._dirs.get(path[:parent_end])
        if state is None:
            state = self._walk_dirs(path, parent_end)
        decided, unders, final = state
        if final:
            return decided
        best = self._level(path, parent_end + 1, len(path), is_dir, unders, None)
        if best is None:
            return decided
        return tuple(b if b >= 0 else d for b, d in zip(best, decided, strict=True))

    def first(self, path: str, is_dir: bool = False) -> tuple[int, Pattern] | None:
        """The first list (in order) whose deciding pattern is a positive match."""
        if self._fast is not None:
            got = self._fast.first(path, is_dir)
            if got is not _FALLBACK:
                return None if got is None else (got[0], self.lists[got[0]][got[1]])
        parent_end = path.rfind("/")
        state = self._dirs.get(path[:parent_end])
        if state is None:
            state = self._walk_dirs(path, parent_end)
        decided, unders, final = state
        best = None if final else self._level(path, parent_end + 1, len(path), is_dir, unders, None)
        lists = self.lists
        for list_id, idx in enumerate(decided):
            if best is not None and best[list_id] >= 0:
                idx = best[list_id]
            if idx >= 0:
                p = lists[list_id][idx]
                if not p.negated:
                    return list_id, p
        return None

    def _walk_dirs(self, path: str, parent_end: int) -> tuple[PerList, dict[int, PerList], bool]:
        """Walk and cache every directory level of ``path`` above its last component."""
        dirs = self._dirs
        if len(dirs) >= DIR_CACHE_LIMIT:
            dirs.clear()
        decided: PerList = (-1,) * self._n
        unders: dict[int, PerList] = {}
        final = False
        start = 1 if path.startswith("/") else 0
        while start <= parent_end:
            slash = path.find("/", start)
            if slash < 0 or slash > parent_end:
                break
            key = path[:slash]
            cached = dirs.get(key)
            if cached is not None:
                decided, unders, final = cached
            elif not final:
                unders = dict(unders)
                best = self._level(path, start, slash, True, unders, unders)
                if best is not None:
                    decided = tuple(b if b >= 0 else d for b, d in zip(best, decided, strict=True))
                    if not self.reinclude and best[0] >= 0 and not self.lists[0][best[0]].negated:
                        final = True  # git: an excluded directory excludes all below
                dirs[key] = (decided, unders, final)
            else:
                dirs[key] = (decided, unders, final)
            start = slash + 1
        state = (decided, unders, final)
        dirs[path[:parent_end]] = state
        return state

    def _level(
        self,
        path: str,
        start: int,
        end: int,
        is_dir: bool,
        unders: dict[int, PerList],
        record: dict[int, PerList] | None,
    ) -> list[int] | None:
        """Per list, the highest index of a pattern matching the level ``path[:end]``."""
        sel = 1 if is_dir else 0
        comp = path[start:end]
        n = self._n
        best: list[int] | None = None
        for gi, g in enumerate(self._groups):
            rl = g.prefix_len
            if rl > start:
                if g.root_hit is not None and end == rl - 1 and path.startswith(g.root):
                    best = _merge(best, g.root_hit)  # this level is the root itself
                continue
            if not path.startswith(g.prefix):
                continue
            level = path[rl:end]
            t = g.match_all[sel]
            if t is not None:
                best = _merge(best, t)
            if unders:
                t = unders.get(gi)
                if t is not None:
                    best = _merge(best, t)
            t = g.names[sel].get(comp)
            if t is not None:
                best = _merge(best, t)
            if g.last.any:
                best = g.last.hits(comp, sel, best, n)
            t = g.paths[sel].get(level)
            if t is not None:
                best = _merge(best, t)
            if g.fixed or g.tails:
                depth = level.count("/") + 1
                if g.fixed:
                    first = comp if depth == 1 else level[: level.find("/")]
                    for key in ((depth, first), (depth, "")):
                        c = g.fixed.get(key)
                        if c is not None:
                            best = c.hits(level, sel, best, n)
                if g.tails:
                    cut, done = len(level), 0
                    for k, tail in g.tails:
                        if k > depth:
                            break
                        while done < k:
                            cut = level.rfind("/", 0, cut)
                            done += 1
                        best = tail.hits(level[cut + 1 :], sel, best, n)
            if g.anchored.any:
                best = g.anchored.hits(level, sel, best, n)
            if record is not None and g.under:
                t = g.under.get(level)
                if t is not None:
                    old = record.get(gi)
                    record[gi] = t if old is None else tuple(map(max, old, t))
        return best


def _classify(a: dict[str, Any], list_id: int, idx: int, p: Pattern) -> None:
    """Put pattern ``idx`` of list ``list_id`` into its look-up class."""
    body = p.body
    d = p.dir_only
    if not p.anchored:
        if body.strip("*") == "":
            a["all"].add("*", list_id, idx, d)
        elif _is_literal(body):
            a["names"].add(body, list_id, idx, d)
        elif body.startswith("*") and _is_literal(body[1:]):
            a["suffixes"].add(body[1:], list_id, idx, d)
        else:
            a["base"].setdefault(list_id, []).append((idx, p))
        return
    if _is_literal(body):
        a["paths"].add(body, list_id, idx, d)
        return
    if body.endswith("/**") and _is_literal(body[:-3]) and not d:
        a["under"].add(body[:-3], list_id, idx, False)
        return
    comps = body.split("/")
    stars = [len(c) >= 2 and c.strip("*") == "" for c in comps]
    if body == "**" or (len(comps) == 1 and stars[0]):
        a["all"].add("*", list_id, idx, d)
    elif not any(stars):
        first = comps[0] if _is_literal(comps[0]) else ""
        a["fixed"].setdefault((len(comps), first), {}).setdefault(list_id, []).append((idx, p))
    elif stars[0] and not any(stars[1:]):
        tail_src, _ = glob_to_regex(as_bytes("/".join(comps[1:])))
        assert tail_src is not None  # the whole body compiled, so its tail does
        tail = Pattern(
            p.text, p.negated, d, p.root, True, body, re.compile(tail_src, re.DOTALL), p.source
        )
        a["tails"].setdefault(len(comps) - 1, {}).setdefault(list_id, []).append((idx, tail))
    else:
        a["anchored"].setdefault(list_id, []).append((idx, p))


def _combine_by_list(by_list: dict[int, list[tuple[int, Pattern]]]) -> _RxClass:
    """Per-list combined regexes, behind one prefilter over all of them."""
    per_list = [_Rx(list_id, *_combine(items)) for list_id, items in sorted(by_list.items())]
    if len(per_list) <= 1:
        return _RxClass((None, None), per_list)
    everything = [item for items in by_list.values() for item in items]
    rx, _ = _combine(everything)
    return _RxClass(rx, per_list)


class CompiledList:
    """One gitignore list compiled against concrete roots (see :class:`RuleSet`).

    :meth:`match` returns the pattern that decides a path (a negated one
    means "explicitly not matched"), or ``None``.
    """

    __slots__ = ("_bases", "_set", "patterns")

    def __init__(
        self,
        patterns: Sequence[Pattern],
        roots: Mapping[str, str | None],
        *,
        reinclude: bool = True,
        engine: str = "python",
    ) -> None:
        self.patterns: tuple[Pattern, ...] = tuple(patterns)
        self._set = RuleSet([self.patterns], roots, reinclude=reinclude, engine=engine)
        self._bases = [_base_of(p, roots) for p in self.patterns]

    @property
    def engine(self) -> str:
        """The matching engine in use: "re2" or "python" (see :class:`RuleSet`)."""
        return self._set.engine

    def match(self, path: str, is_dir: bool = False) -> Pattern | None:
        """The deciding pattern for absolute, canonical ``path``, or None."""
        idx = self._set.decided(path, is_dir)[0]
        return self.patterns[idx] if idx >= 0 else None

    def matched(self, path: str, is_dir: bool = False) -> Pattern | None:
        """The deciding pattern when it is a positive match, else None."""
        p = self.match(path, is_dir)
        return p if p is not None and not p.negated else None

    def explain(self, path: str, is_dir: bool = False) -> list[tuple[str, Pattern]]:
        """Every (level, pattern) pair where a pattern matches a level of ``path``."""
        hits: list[tuple[str, Pattern]] = []
        for p, base in zip(self.patterns, self._bases, strict=True):
            if base is not None and p.body == "" and p.regex is not None:
                if path == base or path.startswith(base + "/"):
                    hits.append((base, p))
                continue
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


# ---------------------------------------------------------------------------
# the compiled engine: every list answered by one RE2 set per query


def _load_re2() -> Any:
    """The ``re2`` module (google-re2, an optional dependency), or None."""
    try:
        import re2  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except Exception:  # not installed, or a broken build: the pure-Python engine decides
        return None
    return re2


_UNLOADED: Any = object()
_RE2: Any = _UNLOADED  # imported on first use (it costs milliseconds), None if it cannot be


def _re2() -> Any:
    """The ``re2`` module, imported on first use; None when it cannot be."""
    global _RE2
    if _RE2 is _UNLOADED:
        _RE2 = _load_re2()
    return _RE2


#: Which engine a RuleSet uses unless told: "re2" when google-re2 is installed.
DEFAULT_ENGINE = "re2" if importlib.util.find_spec("re2") is not None else "python"
ENGINES = ("python", "re2")
#: The memory budget of each RE2 set, its lazily built automaton included.
RE2_MAX_MEM = 8 << 20
#: Up to this many regexes a query is one set; above, anchored and unanchored patterns
#: are two sets (one automaton for both grows with the product of their states).
RE2_SPLIT_AT = 64
_FALLBACK: Any = object()  # the compiled engine cannot answer: the reference engine does


def engine_note() -> str:
    """Which matching engine policies use here, for ``guard doctor``."""
    if DEFAULT_ENGINE == "re2" and _re2() is not None:
        return "matching: re2 (google-re2, compiled)"
    return (
        "matching: pure Python (install the optional google-re2, e.g. the package's [re2]"
        " extra, for the compiled engine; decisions are the same)"
    )


_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_CLASS_BYTES: dict[str, tuple[int, ...]] = {}


def _re2_literal(s: str) -> str:
    """``s`` (one character per byte) as an RE2 literal in Latin-1 mode."""
    out = []
    for c in s:
        o = ord(c)
        if o > 0xFF:
            raise ValueError(f"character {c!r} is not a byte")
        out.append(c if c in _ALNUM else f"\\x{{{o:02x}}}")
    return "".join(out)


def _re2_class(value: str) -> str | None:
    """A bracket class (its Python regex, as :func:`_bracket` wrote it) as an explicit RE2
    byte class: every byte the Python class accepts, and only those. None: no byte."""
    chars = _CLASS_BYTES.get(value)
    if chars is None:
        rx = re.compile(value, re.DOTALL)
        chars = _CLASS_BYTES[value] = tuple(b for b in range(256) if rx.fullmatch(chr(b)))
    if not chars:
        return None
    return "[" + "".join(f"\\x{{{b:02x}}}" for b in chars) + "]"


def glob_to_re2(glob: str) -> str | None:
    """Translate a wildmatch glob (one character per byte, see :func:`as_bytes`) into
    RE2 syntax with the meaning of :func:`glob_to_regex`. None: it can never match."""
    tokens, _ = glob_tokens(glob)
    if tokens is None:
        return None
    parts = []
    for kind, value in tokens:
        if kind == LIT:
            parts.append(_re2_literal(value))
        elif kind == CLASS:
            cls = _re2_class(value)
            if cls is None:
                return None  # an empty class: no subject can match
            parts.append(cls)
        else:
            parts.append(_TOKEN_REGEX[kind])
    return "".join(parts)


class _Re2Sets:
    """Every pattern of every list as regexes over the whole path, in RE2 sets that
    match prefixes: ``LEVEL$`` (the pattern matches the path itself, the final level)
    and ``LEVEL/`` (it matches a proper ancestor directory). One call per set answers
    every pattern at every level of the path. Per list, the final level decides when a
    pattern matches it, else the one pattern that matches directory levels. When two or
    more do, the deepest directory level decides, which the answer does not say: a
    second set, ``LEVEL/[^/]+$`` (the pattern matches the parent directory, the deepest
    directory level), settles it when one of them matches there; otherwise (and for
    git's semantics, where the first excluded directory decides) the caller asks the
    reference engine.

    Unanchored and anchored patterns live in separate sets: RE2 builds its automaton
    lazily, and one automaton for both would track every combination of their states
    (slow on paths it has not seen). Each set's index 0 is the empty regex, which
    always matches: an answer without it means RE2 failed (its automaton ran out of
    memory), and the reference engine decides.
    """

    __slots__ = ("_built", "_re2", "negated", "single")

    def __init__(self, rs: RuleSet, roots: Mapping[str, str | None]) -> None:
        re2 = _re2()
        if re2 is None:
            raise ImportError("google-re2 is not installed")
        opts = re2.Options()
        opts.encoding = re2.Options.Encoding.LATIN1
        opts.dot_nl = True
        opts.never_capture = True
        opts.log_errors = False
        opts.max_mem = RE2_MAX_MEM
        self.negated = tuple(tuple(p.negated for p in ps) for ps in rs.lists)
        self.single = not rs.reinclude
        # per set (file query, directory query, parent level), by anchoring: the
        # regexes and what a hit on each means
        srcs: tuple[dict[bool, list[tuple[str, _Meta]]], ...] = ({}, {}, {})
        for list_id, patterns in enumerate(rs.lists):
            for idx, p in enumerate(patterns):
                base = _base_of(p, roots)
                if p.regex is None or base is None:
                    continue
                if base == "" and p.body == "":
                    # "{root}" alone for a root of "/": the reference engine has no level
                    # for "/" below which it could match (only the path "/" itself, which
                    # this engine hands back)
                    continue
                level = _re2_literal(as_bytes(base))
                if p.body != "":
                    body = glob_to_re2(as_bytes(p.body))
                    if body is None:
                        continue  # it can never match
                    level += ("/" if p.anchored else "/(?:.*/)?") + body
                for sel in (0, 1):
                    items = srcs[sel].setdefault(p.anchored, [])
                    if sel or not p.dir_only:
                        items.append((level + "$", (list_id, idx, _FINAL)))
                    items.append((level + "/", (list_id, idx, _DIR)))
                parent = (level + "/[^/]+$", (list_id, idx, _PARENT))
                srcs[2].setdefault(p.anchored, []).append(parent)
        self._re2 = (re2, opts, srcs)
        # compiled on first use (a directory query or a parent look-up is rare), but the
        # file query now: a policy RE2 cannot compile is then known at load time
        self._built: list[_SetGroup | bool | None] = [None, None, None]
        if self._sets(0) is None:
            raise RuntimeError("RE2 could not compile the sets")

    def _sets(self, i: int) -> _SetGroup | None:
        """The sets of the file query (0), the directory query (1) or the parent level
        (2), compiled on first use; None when RE2 cannot compile them."""
        got = self._built[i]
        if got is None:
            re2, opts, srcs = self._re2
            groups = [items for _, items in sorted(srcs[i].items())]
            if sum(map(len, groups)) <= RE2_SPLIT_AT:
                groups = [[item for items in groups for item in items]] if groups else []
            try:
                got = tuple(_compile_set(re2, opts, items) for items in groups)
            except Exception:  # the reference engine answers what these sets would have
                got = False
            self._built[i] = got
        return None if got is False else got  # type: ignore[return-value]

    def _query(
        self, text: bytes, sets: tuple[tuple[Any, list[_Meta | None]], ...]
    ) -> list[_Meta] | None:
        found: list[_Meta] = []
        for match, meta in sets:
            got = match(text)
            if 0 not in got:
                return None  # the sentinel did not match: RE2 failed
            found += [meta[h] for h in got if h]
        return found

    def _text(self, path: str) -> bytes | None:
        """``path`` as bytes, or None when it is outside what this engine answers."""
        if "//" in path or path[-1:] == "/" or path[:1] != "/":
            return None  # not canonical (or //network): the reference engine walks it
        try:
            return path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return None

    def decided(self, path: str, is_dir: bool) -> PerList | Any:
        text = self._text(path)
        if text is None:
            return _FALLBACK
        sets = self._sets(1 if is_dir else 0)
        found = None if sets is None else self._query(text, sets)
        if found is None:
            return _FALLBACK
        n = len(self.negated)
        if not found:
            return (-1,) * n
        fin, drs, amb, pos = self._resolve(found)
        if self.single and pos:
            # git: the first directory a positive pattern matches decides all below it;
            # which one is first is known only when one pattern matches directories
            return _FALLBACK if amb else (drs[0],)
        par = self._parent(text) if amb else None
        out = []
        for lid, f in enumerate(fin):
            if f < 0:
                f = drs[lid]
                if amb >> lid & 1:
                    if par is None or par[lid] < 0:
                        return _FALLBACK
                    f = par[lid]
            out.append(f)
        return tuple(out)

    def first(self, path: str, is_dir: bool) -> tuple[int, int] | Any | None:
        if self.single:
            d = self.decided(path, is_dir)
            if d is _FALLBACK:
                return _FALLBACK
            return (0, d[0]) if d[0] >= 0 and not self.negated[0][d[0]] else None
        # _text and _query inlined: this is every path decision's hot path
        if "//" in path or path[-1:] == "/" or path[:1] != "/":
            return _FALLBACK  # not canonical (or //network): the reference engine walks it
        try:
            text = path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return _FALLBACK
        sets = self._built[1 if is_dir else 0]
        if sets is None or sets is False:
            sets = self._sets(1 if is_dir else 0)
            if sets is None:
                return _FALLBACK
        found: list[_Meta] | None = None
        for match, meta in sets:  # type: ignore[union-attr]
            got = match(text)
            if 0 not in got:
                return _FALLBACK  # the sentinel did not match: RE2 failed
            if len(got) > 1:
                if found is None:
                    found = []
                found += [meta[h] for h in got if h]
        if found is None:
            return None
        fin, drs, amb, _ = self._resolve(found)
        par: list[int] | None = None
        for lid, f in enumerate(fin):
            if f < 0:
                f = drs[lid]
                if amb >> lid & 1:
                    if par is None:
                        par = self._parent(text)
                    if par is None or par[lid] < 0:
                        return _FALLBACK
                    f = par[lid]
                elif f < 0:
                    continue
            if not self.negated[lid][f]:
                return lid, f
        return None

    def _resolve(self, found: list[_Meta]) -> tuple[list[int], list[int], int, int]:
        """Per list the best pattern matching the final level and some directory level
        (-1: none); the bit sets of lists with two or more patterns matching directory
        levels, and of lists with a positive one."""
        n = len(self.negated)
        fin = [-1] * n
        drs = [-1] * n
        amb = pos = 0
        for lid, idx, where in found:
            if where == _FINAL:
                if idx > fin[lid]:
                    fin[lid] = idx
            else:
                if drs[lid] >= 0:
                    amb |= 1 << lid
                if idx > drs[lid]:
                    drs[lid] = idx
                if not self.negated[lid][idx]:
                    pos |= 1 << lid
        return fin, drs, amb, pos

    def _parent(self, text: bytes) -> list[int] | None:
        """Per list the best pattern matching the parent directory (-1: none)."""
        sets = self._sets(2)
        found = None if sets is None else self._query(text, sets)
        if found is None:
            return None
        par = [-1] * len(self.negated)
        for lid, idx, _ in found:
            if idx > par[lid]:
                par[lid] = idx
        return par


def _compile_set(
    re2: Any, opts: Any, items: list[tuple[str, _Meta]]
) -> tuple[Any, list[_Meta | None]]:
    """One RE2 prefix set: the always-matching sentinel at index 0, then ``items``."""
    rset = re2._re2.Set(re2._Anchor.ANCHOR_START, opts)
    meta: list[_Meta | None] = [None]
    if rset.Add(b"") != 0:
        raise RuntimeError("RE2 set: the sentinel is not index 0")
    for src, m in items:
        if rset.Add(src.encode("latin-1")) != len(meta):
            raise RuntimeError(f"RE2 set refused {src!r}")
        meta.append(m)
    if not rset.Compile():
        raise RuntimeError("RE2 set did not compile (too large)")
    return rset.Match, meta


_SetGroup = tuple[tuple[Any, list["_Meta | None"]], ...]  # (Set.Match, what each index means)
_FINAL, _PARENT, _DIR = 0, 1, 2  # which level a hit is on: the path, its parent, any directory
_Meta = tuple[int, int, int]  # (list, pattern index, _FINAL | _PARENT | _DIR)
