"""The reference engine: gitignore lists compiled into look-up classes, walked per level.

Patterns are anchored to named roots (the worktree by default) and compiled
against absolute, canonical paths, so one list may mix roots. Compilation
sorts patterns into classes that are answered by dictionary look-ups
(literal names, ``*.ext`` suffixes, literal paths, ``dir/**``); only what
remains runs as a combined regular expression. Matching walks the path's
levels top-down exactly as git does, and caches the walk's state per directory.

:class:`RuleSet` asks the compiled engine (:mod:`guard.match.re2_engine`) first
when it is in use, and walks only the paths that engine hands back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from guard.match import re2_engine
from guard.match.re2_engine import FALLBACK, Re2Sets
from guard.match.syntax import Pattern, PerList, as_bytes, base_of, glob_to_regex
from guard.record import Record
from guard.record import set_field as _set

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

DIR_CACHE_LIMIT = 1 << 15
_GLOB_CHARS = frozenset("*?[\\")


RxPair = tuple[re.Pattern[str] | None, re.Pattern[str] | None]


class _Rx(Record):
    """One list's patterns of one class, combined: per level kind (file, directory)."""

    __slots__ = ("idx", "list_id", "rx")
    __match_args__ = ("list_id", "rx", "idx")

    list_id: int
    rx: RxPair
    idx: tuple[list[int], list[int]]

    def __init__(self, list_id: int, rx: RxPair, idx: tuple[list[int], list[int]]) -> None:
        _set(self, "list_id", list_id)
        _set(self, "rx", rx)
        _set(self, "idx", idx)


class _RxClass(Record):
    """A class of regex patterns: a prefilter over every list, then one regex per list."""

    __slots__ = ("any_rx", "per_list")
    __match_args__ = ("any_rx", "per_list")

    any_rx: RxPair  # (None, None) when there is only one list: no prefilter needed
    per_list: list[_Rx]

    def __init__(self, any_rx: RxPair, per_list: list[_Rx]) -> None:
        _set(self, "any_rx", any_rx)
        _set(self, "per_list", per_list)

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
                src = p.regex_source
                assert src is not None
                suffix = literal_suffix(p.body if not p.body.startswith("**/") else p.body[3:])
                if suffix and src.endswith(re.escape(as_bytes(suffix))):
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


class _Group(Record, frozen=False):
    """The patterns of every list that share a root, sorted into look-up classes."""

    __slots__ = ("anchored", "fixed", "last", "match_all", "names", "paths", "prefix",
                 "prefix_len", "root", "root_hit", "tails", "under")  # fmt: skip
    __match_args__ = ("root", "prefix", "prefix_len", "match_all", "names", "last", "paths",
                      "under", "root_hit", "fixed", "tails", "anchored")  # fmt: skip

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

    def __init__(self, **fields: Any) -> None:
        for name in self.__match_args__:
            setattr(self, name, fields.pop(name))
        if fields:
            raise TypeError(f"unknown fields {sorted(fields)}")


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
                base = base_of(p, roots)
                if p.regex_source is None or base is None:
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
        self._fast: Re2Sets | None = None
        self.engine = "python"
        engine = re2_engine.DEFAULT_ENGINE if engine is None else engine
        if engine not in re2_engine.ENGINES:
            raise ValueError(
                f"unknown matching engine {engine!r} (known: {', '.join(re2_engine.ENGINES)})"
            )
        if engine == "re2" and any(self.lists):
            try:
                self._fast = Re2Sets(self.lists, reinclude, roots)
            except Exception:  # not installed, or a set RE2 cannot build: the reference decides
                self._fast = None
            else:
                self.engine = "re2"

    def decided(self, path: str, is_dir: bool = False) -> PerList:
        """Per list, the index of the deciding pattern for ``path`` (-1: none)."""
        if self._fast is not None:
            got = self._fast.decided(path, is_dir)
            if got is not FALLBACK:
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
            if got is not FALLBACK:
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
        tail = Pattern.lazy(p.text, p.negated, d, p.root, True, body, tail_src, p.source)
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
        self._bases = [base_of(p, roots) for p in self.patterns]

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
            if base is not None and p.body == "" and p.regex_source is not None:
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
        sources = [p.regex_source for _, p in chosen]
        assert all(s is not None for s in sources)
        src = "|".join(f"({s})" for s in sources if s is not None)
        out_rx.append(re.compile(src, re.DOTALL))
        out_idx.append([i for i, _ in chosen])
    return (out_rx[0], out_rx[1]), (out_idx[0], out_idx[1])
