"""Guard's own shell grammar: commands bash, dash and guard provably read the same way.

On a host whose hooks can only allow or deny (Codex CLI, Cursor), a plan-mode shell
command runs directly only when it is a sentence of this small positive grammar (and
guard's tables find its programs and options read-only); everything else must take
the confined form ``guard confine -- …``, where the kernel decides. The grammar::

    command   := blank* pipeline ( blank* OP blank* pipeline )* blank*
    OP        := '&&' | '||' | ';'
    pipeline  := simple ( blank* '|' blank* simple )*
    simple    := NAME ( blank+ ( word | redirect ) )*
    NAME      := bare word: [A-Za-z0-9_.+/-] characters, not starting with '-',
                 no '=', not a reserved word of bash or dash
    word      := piece+  (pieces joined without blanks)
    piece     := bare | "'" sq* "'" | '"' dq* '"'
    bare      := [A-Za-z0-9_@%+=:,./-] and the glob characters * and ?
    sq        := printable ASCII but "'" and backslash
    dq        := printable ASCII but '"', '$', '`', backslash and '!'
    redirect  := [012]? ( '>' | '>>' ) blank* '/dev/null' | '0'? '<' blank* '/dev/null'
               | [12]? '>&' [12]
    blank     := ' ' | TAB

No newline, no backslash, no ``$``, no backquote, no parenthesis, no brace, no ``#``,
no ``~``, no ``!`` outside single quotes, no ``[``, no assignment, no here-document,
no background ``&``, no character outside printable ASCII. A word holding an unquoted
``*`` or ``?`` must begin with a character of its own that is not ``-`` (``src/*.py``,
``--include=*.py``; not ``*.py``, ``-*``), so that no file name a glob may expand to
can become an option; and no path component with a glob may start with ``.`` (bash
5.2 skips ``.`` and ``..`` there, dash does not).

In this grammar every token means the same in bash (POSIX mode or not) and dash:
the words each program receives, where its standard streams go, and how ``|``,
``&&``, ``||`` and ``;`` join the commands. tests/tools/test_grammar.py proves it on
generated sentences, with bash and dash each running an argv-recording program.

:func:`parse` reads a command into a :class:`Sentence` or raises
:class:`NotInGrammar` naming the first thing outside the grammar; :func:`render`
gives the sentence back in one canonical spelling (what guard analyses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NotInGrammar", "Redirect", "Sentence", "Simple", "parse", "render"]

#: Characters of a bare (unquoted) piece.
BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-*?")
#: Characters of a program name (first word).
NAME = re.compile(r"[A-Za-z0-9_.+/][A-Za-z0-9_.+/-]*\Z")
GLOB = frozenset("*?")
#: Reserved words of bash and dash (and words either treats specially in command position).
RESERVED = frozenset({
    "!", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function",
    "if", "in", "select", "then", "time", "until", "while", "{", "}", "[[", "]]",
    # bash reads an assignment-like word after these as an assignment (no glob), dash not
    "declare", "export", "local", "readonly", "typeset",
})  # fmt: skip
BLANKS = " \t"
#: Where a redirection may point.
SINK = "/dev/null"


class NotInGrammar(ValueError):
    """The command is not a sentence of guard's grammar; the message says where and why."""


@dataclass(frozen=True, slots=True)
class Redirect:
    """``fd`` redirected: ``op`` is ``>``, ``>>``, ``<`` (to ``/dev/null``) or ``>&`` (to fd
    ``target``)."""

    fd: int
    op: str
    target: str

    def render(self) -> str:
        if self.op == ">&":
            return f"{self.fd}>&{self.target}"
        return f"{self.fd}{self.op}{self.target}"


@dataclass(frozen=True, slots=True)
class Simple:
    """One simple command: its words (quotes removed, as the program receives them), their
    spelling in the command, and its redirections in order."""

    argv: tuple[str, ...]
    spelled: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()


@dataclass(frozen=True, slots=True)
class Sentence:
    """A command of the grammar: pipelines joined by operators (``ops[i]`` stands between
    ``pipelines[i]`` and ``pipelines[i + 1]``)."""

    pipelines: tuple[tuple[Simple, ...], ...]
    ops: tuple[str, ...]

    def simples(self) -> list[Simple]:
        return [s for p in self.pipelines for s in p]


def _where(text: str, i: int) -> str:
    return f"at character {i + 1}"


def _bad_char(text: str, i: int) -> NotInGrammar:
    ch = text[i]
    what = {
        "\n": "a newline", "\\": "a backslash", "$": "a '$' (an expansion)",
        "`": "a backquote (command substitution)", "(": "a parenthesis", ")": "a parenthesis",
        "{": "a brace", "}": "a brace", "#": "a '#'", "~": "a '~' (tilde expansion)",
        "!": "a '!'", "[": "a '['", "]": "a ']'", "&": "a lone '&' (background)",
        "<": "a redirection other than to /dev/null", ">": "a redirection other than to /dev/null",
    }.get(ch)  # fmt: skip
    if what is None:
        what = f"the character {ch!r}" if ch.isprintable() and ch.isascii() else (
            f"the character U+{ord(ch):04X}")
    return NotInGrammar(f"{what} {_where(text, i)}")


class _Reader:
    def __init__(self, text: str, literal_quotes: bool = False) -> None:
        self.text = text
        self.i = 0
        self.literal_quotes = literal_quotes

    def blanks(self) -> bool:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] in BLANKS:
            self.i += 1
        return self.i > start

    def peek(self, n: int = 1) -> str:
        return self.text[self.i : self.i + n]

    def at_end(self) -> bool:
        return self.i >= len(self.text)

    def word(self) -> tuple[str, str, bool] | None:
        """(value, spelling, has an unquoted glob) of the word here, or None if none starts."""
        text, start = self.text, self.i
        value: list[str] = []
        glob_at: int | None = None
        while self.i < len(text):
            ch = text[self.i]
            if ch in BARE:
                if ch in GLOB and glob_at is None:
                    glob_at = len("".join(value))
                value.append(ch)
                self.i += 1
            elif ch == "'":
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise NotInGrammar(f"an unterminated single quote {_where(text, self.i)}")
                for j in range(self.i + 1, end):
                    c = text[j]
                    if self.literal_quotes:
                        if c == "\0" or "\ud800" <= c <= "\udfff":
                            raise _bad_char(text, j)
                    elif not (" " <= c <= "~") or c == "\\":
                        raise _bad_char(text, j)
                value.append(text[self.i + 1 : end])
                self.i = end + 1
            elif ch == '"':
                j = self.i + 1
                while j < len(text) and text[j] != '"':
                    c = text[j]
                    if not (" " <= c <= "~") or c in "$`\\!":
                        raise _bad_char(text, j)
                    j += 1
                if j >= len(text):
                    raise NotInGrammar(f"an unterminated double quote {_where(text, self.i)}")
                value.append(text[self.i + 1 : j])
                self.i = j + 1
            else:
                break
        if self.i == start:
            return None
        spelled = text[start : self.i]
        joined = "".join(value)
        if glob_at is not None:
            prefix = joined[:glob_at]
            if not prefix or spelled != joined:
                raise NotInGrammar(
                    f"the word {spelled!r} {_where(text, start)} starts with a glob; a glob"
                    " needs an unquoted word with a literal start of its own (src/*.py, ./*.py)"
                )
            if any(c.startswith(".") and GLOB & set(c) for c in joined.split("/")):
                raise NotInGrammar(
                    f"the word {spelled!r} {_where(text, start)} globs names starting with '.'"
                    " (bash and dash disagree on whether '.' and '..' match)"
                )
            if prefix.startswith("-") and not re.match(r"--[A-Za-z0-9][A-Za-z0-9-]*=", prefix):
                raise NotInGrammar(
                    f"the option {spelled!r} {_where(text, start)} holds a glob; only a"
                    " --name=VALUE option may (a file name could become another option)"
                )
        return joined, spelled, glob_at is not None

    def redirect(self, fd_word: str | None) -> Redirect | None:
        """A redirection starting here (after an fd digit word ``fd_word`` if given)."""
        text = self.text
        if self.peek(2) == ">&":
            self.i += 2
            target = self.peek()
            if target not in ("1", "2") or self.text[self.i + 1 : self.i + 2] not in (
                "", " ", "\t", ";", "|", "&"):
                raise NotInGrammar(f"'>&' must be followed by 1 or 2 {_where(text, self.i)}")
            self.i += 1
            fd = int(fd_word) if fd_word is not None else 1
            if fd not in (1, 2):
                raise NotInGrammar(f"only fd 1 or 2 may be duplicated {_where(text, self.i)}")
            return Redirect(fd, ">&", target)
        for op in (">>", ">", "<"):
            if self.peek(len(op)) == op:
                at = self.i
                self.i += len(op)
                if self.peek() in ("&", "|", ">", "<"):
                    raise _bad_char(text, self.i)
                self.blanks()
                start = self.i
                got = self.word()
                if got is None or got[1] != SINK:
                    raise NotInGrammar(
                        f"a redirection {_where(text, at)} to"
                        f" {text[start:self.i] or 'nothing'!r}: only /dev/null is in the grammar"
                    )
                default = 0 if op == "<" else 1
                fd = int(fd_word) if fd_word is not None else default
                if (op == "<") != (fd == 0):
                    raise NotInGrammar(f"fd {fd} redirected with {op!r} {_where(text, at)}")
                return Redirect(fd, op, SINK)
        return None

    def simple(self) -> Simple:
        text = self.text
        start = self.i
        got = self.word()
        if got is None:
            if self.at_end():
                raise NotInGrammar("a command is missing at the end")
            raise _bad_char(text, self.i)
        value, spelled, _glob = got
        if spelled != value or not NAME.match(value) or value in RESERVED or not value.strip("."):
            raise NotInGrammar(
                f"the program name {spelled!r} {_where(text, start)}: a program name is"
                " unquoted, without '=' (an assignment) or glob, and not a reserved word"
            )
        argv, spellings, redirects = [value], [spelled], []
        while True:
            had_blank = self.blanks()
            if self.at_end() or self.peek() in ("|", ";") or self.peek(2) == "&&":
                break
            ch = self.peek()
            if ch in "<>":
                if not had_blank:
                    raise NotInGrammar(
                        f"a redirection needs a blank before it {_where(text, self.i)}"
                    )
                r = self.redirect(None)
                assert r is not None
                redirects.append(r)
                continue
            if not had_blank:
                raise _bad_char(text, self.i)
            at = self.i
            got = self.word()
            if got is None:
                raise _bad_char(text, self.i)
            value, spelled, _glob = got
            if self.peek() in ("<", ">"):
                if spelled in ("0", "1", "2"):
                    r = self.redirect(spelled)
                    assert r is not None
                    redirects.append(r)
                    continue
                raise NotInGrammar(
                    f"the word {spelled!r} {_where(text, at)} runs into a redirection; only"
                    " 0, 1 or 2 may stand before one, and a blank before any other"
                )
            argv.append(value)
            spellings.append(spelled)
        return Simple(tuple(argv), tuple(spellings), tuple(redirects))


def parse(text: str, *, literal_quotes: bool = False) -> Sentence:
    """The sentence ``text`` is, or :class:`NotInGrammar` saying why it is none.

    ``literal_quotes``: a single-quoted piece may hold any character but the quote and
    NUL (a newline, a backslash, any code point): bash and dash take everything between
    single quotes literally. Used for the confined form, whose script is one such word.
    """
    if not isinstance(text, str) or not text.strip(BLANKS):
        raise NotInGrammar("the command is empty")
    if not literal_quotes:
        for i, ch in enumerate(text):
            if not (" " <= ch <= "~" or ch == "\t"):
                raise _bad_char(text, i)
    r = _Reader(text, literal_quotes)
    r.blanks()
    pipelines: list[tuple[Simple, ...]] = []
    ops: list[str] = []
    while True:
        pipe = [r.simple()]
        while r.peek() == "|" and r.peek(2) != "||":
            r.i += 1
            r.blanks()
            pipe.append(r.simple())
        pipelines.append(tuple(pipe))
        if r.at_end():
            break
        if r.peek(2) in ("&&", "||"):
            op = r.peek(2)
        elif r.peek() == ";" and r.peek(2) != ";;":
            op = ";"
        else:
            raise _bad_char(text, r.i)
        r.i += len(op)
        ops.append(op)
        r.blanks()
        if r.at_end():
            raise NotInGrammar(f"the command ends after {op!r}")
        if r.peek() in ("&", "|", ";"):
            raise _bad_char(text, r.i)
    return Sentence(tuple(pipelines), tuple(ops))


def render(sentence: Sentence) -> str:
    """The sentence in one canonical spelling: words as spelled, single blanks, operators
    between blanks, redirections after the words."""
    parts: list[str] = []
    for k, pipe in enumerate(sentence.pipelines):
        if k:
            parts.append(sentence.ops[k - 1])
        for j, simple in enumerate(pipe):
            if j:
                parts.append("|")
            parts.extend(simple.spelled)
            parts.extend(r.render() for r in simple.redirects)
    return " ".join(parts)
