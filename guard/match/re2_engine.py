"""The compiled engine: every pattern of every list answered by one RE2 set per query.

Where the optional google-re2 is installed, policies are matched by
:class:`Re2Sets`, which answers every pattern at every level of a path in one
call per RE2 set, and hands the path back (:data:`FALLBACK`) to the reference
engine (:mod:`guard.match.reference`) whenever its answer cannot settle the
decision. Both give the same decisions (tests/test_match_*.py compare them with
each other and with git).
"""

# Lazy imports: re2 (optional extra `re2`) on first use; without it the Python engine runs.

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping, Sequence

from guard.match.syntax import (
    CLASS,
    LIT,
    TOKEN_REGEX,
    Pattern,
    PerList,
    as_bytes,
    base_of,
    glob_tokens,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any


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
FALLBACK: Any = object()  # the compiled engine cannot answer: the reference engine does


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
    """A bracket class (its Python regex, as :mod:`guard.match.syntax` wrote it) as an
    explicit RE2 byte class: every byte the Python class accepts, and only those.
    None: no byte."""
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
            parts.append(TOKEN_REGEX[kind])
    return "".join(parts)


class Re2Sets:
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

    def __init__(
        self,
        lists: Sequence[Sequence[Pattern]],
        reinclude: bool,
        roots: Mapping[str, str | None],
    ) -> None:
        re2 = _re2()
        if re2 is None:
            raise ImportError("google-re2 is not installed")
        opts = re2.Options()
        opts.encoding = re2.Options.Encoding.LATIN1
        opts.dot_nl = True
        opts.never_capture = True
        opts.log_errors = False
        opts.max_mem = RE2_MAX_MEM
        self.negated = tuple(tuple(p.negated for p in ps) for ps in lists)
        self.single = not reinclude
        # per set (file query, directory query, parent level), by anchoring: the
        # regexes and what a hit on each means
        srcs: tuple[dict[bool, list[tuple[str, _Meta]]], ...] = ({}, {}, {})
        for list_id, patterns in enumerate(lists):
            for idx, p in enumerate(patterns):
                base = base_of(p, roots)
                if p.regex_source is None or base is None:
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
            return FALLBACK
        sets = self._sets(1 if is_dir else 0)
        found = None if sets is None else self._query(text, sets)
        if found is None:
            return FALLBACK
        n = len(self.negated)
        if not found:
            return (-1,) * n
        fin, drs, amb, pos = self._resolve(found)
        if self.single and pos:
            # git: the first directory a positive pattern matches decides all below it;
            # which one is first is known only when one pattern matches directories
            return FALLBACK if amb else (drs[0],)
        par = self._parent(text) if amb else None
        out = []
        for lid, f in enumerate(fin):
            if f < 0:
                f = drs[lid]
                if amb >> lid & 1:
                    if par is None or par[lid] < 0:
                        return FALLBACK
                    f = par[lid]
            out.append(f)
        return tuple(out)

    def first(self, path: str, is_dir: bool) -> tuple[int, int] | Any | None:
        if self.single:
            d = self.decided(path, is_dir)
            if d is FALLBACK:
                return FALLBACK
            return (0, d[0]) if d[0] >= 0 and not self.negated[0][d[0]] else None
        # _text and _query inlined: this is every path decision's hot path
        if "//" in path or path[-1:] == "/" or path[:1] != "/":
            return FALLBACK  # not canonical (or //network): the reference engine walks it
        try:
            text = path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return FALLBACK
        sets = self._built[1 if is_dir else 0]
        if sets is None or sets is False:
            sets = self._sets(1 if is_dir else 0)
            if sets is None:
                return FALLBACK
        found: list[_Meta] | None = None
        for match, meta in sets:  # type: ignore[union-attr]
            got = match(text)
            if 0 not in got:
                return FALLBACK  # the sentinel did not match: RE2 failed
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
                        return FALLBACK
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


if TYPE_CHECKING:
    _SetGroup = tuple[tuple[Any, list["_Meta | None"]], ...]  # (Set.Match, what each index means)
_FINAL, _PARENT, _DIR = 0, 1, 2  # which level a hit is on: the path, its parent, any directory
_Meta = tuple[int, int, int]  # (list, pattern index, _FINAL | _PARENT | _DIR)
