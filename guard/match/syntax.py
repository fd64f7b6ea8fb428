"""Gitignore pattern syntax: parsing one line, and translating its glob to a regex.

A policy's pattern lists are gitignore files (see :mod:`guard.match`). This module
turns one line into a :class:`Pattern`: its root (``{root}/`` prefixes, ``//`` for
absolute paths), whether it is negated, anchored or for directories only, and its
glob translated by the one tokenizer of globs (:func:`glob_tokens`) into a Python
regex over UTF-8 bytes, one character per byte as git's wildmatch sees them. Both
engines (:mod:`guard.match.reference`, :mod:`guard.match.re2_engine`) start from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from guard.record import Record
from guard.record import set_field as _set

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

ROOT_RE = re.compile(r"^\{([a-z]+)\}(?:/|$)")
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


class Source(Record):
    """Where a pattern was written: file, line, dotted key and list index (frozen)."""

    __slots__ = ("file", "index", "key", "line")
    __match_args__ = ("file", "line", "key", "index")

    file: str
    line: int
    key: str
    index: int

    def __init__(self, file: str, line: int, key: str, index: int) -> None:
        _set(self, "file", file)
        _set(self, "line", line)
        _set(self, "key", key)
        _set(self, "index", index)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.key}[{self.index}]"


#: how every glob's regex is compiled (:func:`parse_pattern`)
REGEX_FLAGS = re.DOTALL


class Pattern(Record):
    """One parsed gitignore line (frozen).

    ``regex`` is compiled on first use: loading a policy parses every pattern, and a
    process that decides nothing (``guard run`` before its command) compiles none.
    """

    __slots__ = ("_regex", "_source_rx", "anchored", "body", "dir_only", "negated", "problem",
                 "root", "source", "text")  # fmt: skip
    __match_args__ = ("text", "negated", "dir_only", "root", "anchored", "body", "regex",
                      "source", "problem")  # fmt: skip

    text: str
    negated: bool
    dir_only: bool
    root: str  # a root name, or "/" for //absolute patterns
    anchored: bool  # matched against the path below the root, else the last component
    body: str
    source: Source | None
    problem: str | None  # why it can never match, for lint and explain
    _regex: re.Pattern[str] | None
    _source_rx: str | None  # the regex not compiled yet (REGEX_FLAGS)

    def __init__(
        self,
        text: str,
        negated: bool,
        dir_only: bool,
        root: str,
        anchored: bool,
        body: str,
        regex: re.Pattern[str] | None,  # None: the pattern can never match
        source: Source | None = None,
        problem: str | None = None,
    ) -> None:
        _set(self, "text", text)
        _set(self, "negated", negated)
        _set(self, "dir_only", dir_only)
        _set(self, "root", root)
        _set(self, "anchored", anchored)
        _set(self, "body", body)
        _set(self, "_regex", regex)
        _set(self, "_source_rx", None)
        _set(self, "source", source)
        _set(self, "problem", problem)

    @classmethod
    def lazy(
        cls,
        text: str,
        negated: bool,
        dir_only: bool,
        root: str,
        anchored: bool,
        body: str,
        regex_source: str,
        source: Source | None = None,
        problem: str | None = None,
    ) -> Pattern:
        """The pattern whose regex is ``re.compile(regex_source, REGEX_FLAGS)``, compiled
        when first used."""
        p = cls(text, negated, dir_only, root, anchored, body, None, source, problem)
        _set(p, "_source_rx", regex_source)
        return p

    @property
    def regex(self) -> re.Pattern[str] | None:
        """The compiled glob (None: the pattern can never match)."""
        rx = self._regex
        if rx is None and self._source_rx is not None:
            rx = re.compile(self._source_rx, REGEX_FLAGS)
            _set(self, "_regex", rx)  # the same object whichever thread wins
        return rx

    @property
    def regex_source(self) -> str | None:
        """``regex.pattern`` without compiling it (None: the pattern can never match)."""
        if self._source_rx is not None:
            return self._source_rx
        return self._regex.pattern if self._regex is not None else None

    def with_text(self, text: str) -> Pattern:
        """This pattern, ``text`` written instead (what it matches is the same)."""
        p = Pattern(text, self.negated, self.dir_only, self.root, self.anchored, self.body,
                    self._regex, self.source, self.problem)  # fmt: skip
        _set(p, "_source_rx", self._source_rx)
        return p

    def _fields(self) -> tuple[Any, ...]:
        # the regex by what it is made of (as re.Pattern compares), compiled or not yet
        made: tuple[str, int] | None = None
        if self._source_rx is not None:
            made = (self._source_rx, REGEX_FLAGS | re.UNICODE)
        elif self._regex is not None:
            made = (self._regex.pattern, self._regex.flags)
        return (self.text, self.negated, self.dir_only, self.root, self.anchored, self.body,
                made, self.source, self.problem)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Pattern)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def matches_level(self, rel: str, is_dir: bool) -> bool:
        regex = self.regex
        if regex is None or (self.dir_only and not is_dir):
            return False
        subject = rel if self.anchored else rel.rsplit("/", 1)[-1]
        return regex.fullmatch(as_bytes(subject)) is not None


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
    if regex_src is None:
        return Pattern(text, negated, dir_only, root, anchored, line, None, source, problem)
    return Pattern.lazy(text, negated, dir_only, root, anchored, line, regex_src, source, problem)


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


TOKEN_REGEX = {STAR: "[^/]*", DSTAR_END: ".*", DSTAR_DIR: "(?:.*/)?", ANY: "[^/]"}


def glob_to_regex(glob: str) -> tuple[str | None, str | None]:
    """Translate a wildmatch glob (WM_PATHNAME) into a regex for fullmatch.

    Returns ``(None, reason)`` for a glob git can never match (see :func:`glob_tokens`).
    """
    tokens, problem = glob_tokens(glob)
    if tokens is None:
        return None, problem
    parts = [
        re.escape(value) if kind == LIT else value if kind == CLASS else TOKEN_REGEX[kind]
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


PerList = tuple[int, ...]  # what an engine answers: the best pattern index per list, -1 for none


def base_of(p: Pattern, roots: Mapping[str, str | None]) -> str | None:
    """The absolute directory ``p`` is anchored to ("" for ``//`` patterns), without its
    trailing slash; None when its root is not there (e.g. no worktree)."""
    if p.root == "/":
        return ""
    base = roots.get(p.root)
    return base.rstrip("/") if base is not None else None
