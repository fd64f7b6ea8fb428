"""sed scripts read with sed's own grammar (GNU sed 4.x), to tell whether one only prints.

A script is a sequence of commands, each ``[addr[,addr]][!]cmd[args]``, ended by ``;``,
a newline, ``}`` or a ``#`` comment. Where GNU sed and this reader could disagree, the
script is refused (``ValueError`` names where and why) rather than guessed at:

* ``e``, ``w``, ``W``, ``r``, ``R``, the ``e`` and ``w`` flags of ``s``: they run commands,
  write files or read files the policy did not see;
* ``s``/``y``/address delimiters are found the way sed finds them (a backslash escapes
  the next character, the delimiter included: ``s/\\//X/``); a delimiter that is a
  backslash, a newline, not printable ASCII or alphanumeric is refused;
* ``a``/``i``/``c`` text runs to the end of its line; text holding a backslash (the
  classic ``a\\`` form, continuation lines, ``a\\`` at the end of one ``-e`` that
  reads the next ``-e`` as text) is refused, as is an empty text;
* labels end at the first blank, ``;`` or newline (the shortest reading: whatever sed
  reads as a longer label is then parsed here as commands, never the other way round);
* any other command letter, a junk character after a command, an unknown flag, an
  unclosed block, and control characters other than TAB and LF are refused.
"""

from __future__ import annotations

import re

#: commands without arguments
_PLAIN = frozenset("=dDFgGhHnNpPxz")
#: commands with an optional number (exit code, line length)
_NUMBERED = frozenset("qQlL")
#: commands with a label
_JUMPS = frozenset("btT")
#: commands that write, run or read beyond what the policy decided
_REFUSED = {"e": "runs a command", "w": "writes a file", "W": "writes a file",
            "r": "reads a file", "R": "reads a file"}
_S_FLAGS = frozenset("gpiImM0123456789")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: one command guard reads at once: ``N[,M]`` or ``/re/`` addresses and p, d, q, = or
#: ``s/re/text/flags``, with no backslash, bracket or newline in a regex or text
_SIMPLE = re.compile(r"(?:(?:\d+|\$|/[^/\\\[\n]*/)(?:,(?:\d+|\$|/[^/\\\[\n]*/))?)?!?"
                     r"(?:[pdq=]|s/[^/\\\[\n]*/[^/\\\n]*/[gpI0-9]*)")


class _Reader:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, why: str) -> ValueError:
        return ValueError(f"{why} at character {self.i} of the sed script")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self) -> str:
        ch = self.peek()
        self.i += 1
        return ch

    def blanks(self) -> None:
        while self.peek() in (" ", "\t") and self.peek():
            self.i += 1

    def delimited(self, delim: str, what: str, regex: bool = False) -> None:
        """Skip to just after the next unescaped ``delim`` (a backslash escapes anything).

        In a regex (``regex``), GNU sed also skips a delimiter inside a bracket expression
        (``s/[/]/X/``): the end is found both ways, and a script where the two differ is
        refused (``s/[/]/g#/e`` runs a command in sed and reads as ``s/[/]/g`` plus a
        comment without brackets)."""
        end = self._scan(self.i, delim, what, brackets=False)
        if regex and self._scan(self.i, delim, what, brackets=True) != end:
            raise self.fail(f"a bracket expression in the {what} holds the delimiter {delim!r}")
        self.i = end

    def _scan(self, i: int, delim: str, what: str, brackets: bool) -> int:
        s = self.s
        n = len(s)
        while True:
            if i >= n:
                raise self.fail(f"unterminated {what}")
            ch = s[i]
            i += 1
            if ch == "\\":
                if i >= n:
                    raise self.fail(f"unterminated {what}")
                i += 1
            elif ch == "\n":
                raise self.fail(f"a newline inside {what}")
            elif ch == delim:
                return i
            elif ch == "[" and brackets:
                # POSIX: "]" first (after an optional "^") is a member; [:x:] [=x=] [.x.]
                if i < n and s[i] == "^":
                    i += 1
                if i < n and s[i] == "]":
                    i += 1
                while True:
                    if i >= n or s[i] == "\n":
                        raise self.fail(f"an unterminated bracket expression in the {what}")
                    if s[i] == "[" and i + 1 < n and s[i + 1] in ":=.":
                        close = s.find(s[i + 1] + "]", i + 2)
                        if close < 0:
                            raise self.fail(f"an unterminated [{s[i + 1]} in the {what}")
                        i = close + 2
                        continue
                    i += 1
                    if s[i - 1] == "]":
                        break

    def delimiter(self, what: str) -> str:
        d = self.take()
        if d == "" or d in "\\\n" or not (" " <= d <= "~") or d.isalnum() or d == " ":
            raise self.fail(f"{what} delimiter {d!r} is not one guard reads")
        return d

    def end_of_command(self) -> None:
        self.blanks()
        ch = self.peek()
        if ch in (";", "\n"):
            self.i += 1
        elif ch not in ("", "}", "#"):
            raise self.fail(f"unexpected {ch!r} after a command")

    def number(self) -> bool:
        start = self.i
        while self.peek().isdigit() and self.peek().isascii():
            self.i += 1
        return self.i > start

    def address(self) -> bool:
        ch = self.peek()
        if ch == "$":
            self.i += 1
        elif ch.isdigit() and ch.isascii():
            self.number()
            if self.peek() == "~":
                self.i += 1
                if not self.number():
                    raise self.fail("a step address without its step")
        elif ch == "/" or ch == "\\":
            self.i += 1
            d = "/" if ch == "/" else self.delimiter("address")
            self.delimited(d, "address regex", regex=True)
            while self.peek() in ("I", "M") and self.peek():
                self.i += 1
        else:
            return False
        return True

    def label(self) -> None:
        self.blanks()
        while self.peek() not in ("", ";", "\n", " ", "\t"):
            self.i += 1


def check_sed_script(script: str) -> None:
    """Raise ``ValueError`` unless ``script`` (the ``-e`` texts joined by newlines) only
    prints: no command or flag that runs, writes or reads, nothing read ambiguously."""
    if _SIMPLE.fullmatch(script):
        return  # the usual one-command scripts: nothing in them two readers could split
    bad = _CONTROL.search(script)
    if bad is not None:
        raise ValueError(f"control character {bad.group()!r} at character {bad.start()} of the"
                         " sed script")
    r = _Reader(script)
    depth = 0
    while True:
        while r.peek() in (" ", "\t", "\n", ";") and r.peek():
            r.i += 1
        if r.peek() == "":
            break
        if r.peek() == "#":
            while r.peek() not in ("", "\n"):
                r.i += 1
            continue
        addressed = r.address()
        if addressed:
            r.blanks()
            if r.peek() == ",":
                r.i += 1
                r.blanks()
                if r.peek() in ("+", "~"):
                    r.i += 1
                    if not r.number():
                        raise r.fail("an address offset without its number")
                elif not r.address():
                    raise r.fail("a range without its second address")
            r.blanks()
        if r.peek() == "!":
            r.i += 1
            r.blanks()
        cmd = r.take()
        if cmd in _REFUSED:
            raise r.fail(f"command {cmd!r} {_REFUSED[cmd]}")
        if cmd == "{":
            depth += 1
        elif cmd == "}":
            depth -= 1
            if depth < 0:
                raise r.fail("an unexpected }")
            r.end_of_command()
        elif cmd in _PLAIN:
            r.end_of_command()
        elif cmd in _NUMBERED:
            r.blanks()
            r.number()
            r.end_of_command()
        elif cmd in _JUMPS or cmd == ":":
            if cmd == ":" and addressed:
                raise r.fail("a label with an address")
            r.label()
            r.end_of_command()
        elif cmd == "v":
            r.label()
            r.end_of_command()
        elif cmd in ("a", "i", "c"):
            r.blanks()
            start = r.i
            while r.peek() not in ("", "\n"):
                r.i += 1
            text = script[start : r.i]
            if not text.strip() or "\\" in text:
                raise r.fail(f"{cmd} text guard cannot delimit as sed does (empty, or holding"
                             " a backslash)")
        elif cmd in ("s", "y"):
            d = r.delimiter(cmd)
            r.delimited(d, f"{cmd} pattern", regex=cmd == "s")
            r.delimited(d, f"{cmd} replacement")
            if cmd == "s":
                while r.peek() not in ("", ";", "\n", "}", "#", " ", "\t"):
                    flag = r.take()
                    if flag == "e":
                        raise r.fail("the s flag 'e' runs the pattern space as a command")
                    if flag == "w":
                        raise r.fail("the s flag 'w' writes a file")
                    if flag not in _S_FLAGS:
                        raise r.fail(f"unknown s flag {flag!r}")
            r.end_of_command()
        elif cmd == "":
            raise r.fail("an address without a command")
        else:
            raise r.fail(f"command {cmd!r} is not one guard reads")
    if depth:
        raise r.fail("an unclosed {")
