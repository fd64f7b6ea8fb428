"""Where each key and list item of a TOML or JSON policy text is written.

A small scanner over the text that tomllib / json already accepted: it follows
tables, arrays of tables, dotted keys, inline tables and arrays (of any value,
nested too) and records the 1-based line of every key path, e.g.
``("agents", "plan", "write", "deny", 2) -> 6``. Comments, strings (basic,
literal, multi-line) and brackets inside them are skipped correctly, which a
regular expression over the text cannot do.
"""

from __future__ import annotations

from functools import lru_cache

Loc = tuple[str | int, ...]

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\", "/": "/"}


class _Unreadable(Exception):
    """The scanner met something it does not follow; callers fall back."""


class _Scanner:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.lines: dict[Loc, int] = {}
        self.aot: dict[Loc, int] = {}  # array-of-tables path -> index of its last table

    # -- helpers -------------------------------------------------------------------------------

    def line(self, pos: int | None = None) -> int:
        return self.s.count("\n", 0, self.i if pos is None else pos) + 1

    def record(self, loc: Loc, pos: int) -> None:
        self.lines.setdefault(loc, self.line(pos))

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def skip_space(self, newlines: bool) -> None:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#" or (newlines and s.startswith("//", self.i)):
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            else:
                return

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise _Unreadable(f"expected {ch!r} at line {self.line()}")
        self.i += 1

    # -- keys and strings ----------------------------------------------------------------------

    def string(self) -> str:
        s = self.s
        for quote in ('"""', "'''"):
            if s.startswith(quote, self.i):
                end = self.i + 3
                while True:
                    end = s.find(quote, end)
                    if end < 0:
                        raise _Unreadable("unterminated multi-line string")
                    if quote == '"""' and _escaped(s, end):
                        end += 1
                        continue
                    break
                while s.startswith(quote[0], end + 3):  # up to two quotes may end the content
                    end += 1
                value = s[self.i + 3 : end]
                self.i = end + 3
                return value
        quote = s[self.i]
        self.i += 1
        out: list[str] = []
        while self.i < len(s):
            c = s[self.i]
            if c == quote:
                self.i += 1
                return "".join(out)
            if c == "\\" and quote == '"':
                nxt = s[self.i + 1 : self.i + 2]
                if nxt in _ESCAPES:
                    out.append(_ESCAPES[nxt])
                    self.i += 2
                    continue
                width = {"u": 4, "U": 8}.get(nxt)
                if width is None:
                    raise _Unreadable("unknown escape")
                out.append(chr(int(s[self.i + 2 : self.i + 2 + width], 16)))
                self.i += 2 + width
                continue
            if c == "\n":
                raise _Unreadable("newline in a string")
            out.append(c)
            self.i += 1
        raise _Unreadable("unterminated string")

    def key_part(self) -> str:
        if self.peek() in ('"', "'"):
            return self.string()
        start = self.i
        while self.i < len(self.s) and self.s[self.i] in _BARE:
            self.i += 1
        if self.i == start:
            raise _Unreadable(f"expected a key at line {self.line()}")
        return self.s[start : self.i]

    def dotted_key(self) -> list[tuple[str, int]]:
        parts = []
        while True:
            self.skip_space(False)
            pos = self.i
            parts.append((self.key_part(), pos))
            self.skip_space(False)
            if self.peek() != ".":
                return parts
            self.i += 1

    # -- values --------------------------------------------------------------------------------

    def value(self, loc: Loc) -> None:
        c = self.peek()
        if c == "[":
            self.array(loc)
        elif c == "{":
            self.inline_table(loc)
        elif c in ('"', "'"):
            self.string()
        else:
            start = self.i
            while self.i < len(self.s) and self.s[self.i] not in ",]}\n\r#":
                self.i += 1
            if self.i == start:
                raise _Unreadable(f"expected a value at line {self.line()}")

    def array(self, loc: Loc) -> None:
        self.expect("[")
        n = 0
        while True:
            self.skip_space(True)
            if self.peek() == "]":
                self.i += 1
                return
            self.record((*loc, n), self.i)
            self.value((*loc, n))
            n += 1
            self.skip_space(True)
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "]":
                raise _Unreadable(f"expected , or ] at line {self.line()}")

    def inline_table(self, loc: Loc) -> None:
        self.expect("{")
        while True:
            self.skip_space(True)
            if self.peek() == "}":
                self.i += 1
                return
            self.assignment(loc, json_colon=True)
            self.skip_space(True)
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "}":
                raise _Unreadable(f"expected , or }} at line {self.line()}")

    def assignment(self, table: Loc, json_colon: bool = False) -> Loc:
        keys = self.dotted_key()
        loc = table
        for k, pos in keys:
            loc = (*loc, k)
            self.record(loc, pos)
        self.skip_space(False)
        if self.peek() == "=" or (json_colon and self.peek() == ":"):
            self.i += 1
        else:
            raise _Unreadable(f"expected = at line {self.line()}")
        self.skip_space(json_colon)
        self.value(loc)
        return loc

    # -- documents -----------------------------------------------------------------------------

    def resolve(self, keys: list[tuple[str, int]]) -> Loc:
        loc: Loc = ()
        for k, pos in keys:
            loc = (*loc, k)
            self.record(loc, pos)
            if loc in self.aot:
                loc = (*loc, self.aot[loc])
        return loc

    def toml(self) -> dict[Loc, int]:
        table: Loc = ()
        s = self.s
        while True:
            self.skip_space(True)
            if self.i >= len(s):
                return self.lines
            if s.startswith("[[", self.i):
                start = self.i
                self.i += 2
                keys = self.dotted_key()
                self.expect("]")
                self.expect("]")
                path = (*self.resolve(keys[:-1]), keys[-1][0])
                self.record(path, start)
                self.aot[path] = self.aot.get(path, -1) + 1
                table = (*path, self.aot[path])
                self.record(table, start)
            elif s[self.i] == "[":
                start = self.i
                self.i += 1
                keys = self.dotted_key()
                self.expect("]")
                table = self.resolve(keys)
                self.lines[table] = self.line(start)  # the header, not an earlier dotted key
            else:
                self.assignment(table)
            self.skip_space(False)
            if self.i < len(s) and s[self.i] not in "\r\n":
                raise _Unreadable(f"unexpected text at line {self.line()}")

    def json(self) -> dict[Loc, int]:
        self.skip_space(True)
        self.value(())
        return self.lines


def _escaped(s: str, pos: int) -> bool:
    n = 0
    while pos - n - 1 >= 0 and s[pos - n - 1] == "\\":
        n += 1
    return n % 2 == 1


@lru_cache(maxsize=64)
def key_lines(text: str) -> dict[Loc, int] | None:
    """Every key path of ``text`` (TOML, or JSON when it starts with ``{``) -> its line."""
    scanner = _Scanner(text)
    try:
        return scanner.json() if text.lstrip()[:1] == "{" else scanner.toml()
    except (_Unreadable, ValueError, IndexError):
        return None


def line_of(text: str, loc: Loc) -> int | None:
    """The line of ``loc`` or of its longest written prefix; None when the scan failed."""
    lines = key_lines(text)
    if lines is None:
        return None
    for n in range(len(loc), 0, -1):
        found = lines.get(loc[:n])
        if found is not None:
            return found
    return 1
