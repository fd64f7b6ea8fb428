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
    """

    __slots__ = ("_dirs", "_groups", "_n", "lists", "reinclude")

    def __init__(
        self,
        lists: Sequence[Sequence[Pattern]],
        roots: Mapping[str, str | None],
        *,
        reinclude: bool = True,
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

    def decided(self, path: str, is_dir: bool = False) -> PerList:
        """Per list, the index of the deciding pattern for ``path`` (-1: none)."""
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
    ) -> None:
        self.patterns: tuple[Pattern, ...] = tuple(patterns)
        self._set = RuleSet([self.patterns], roots, reinclude=reinclude)
        self._bases = [_base_of(p, roots) for p in self.patterns]

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
