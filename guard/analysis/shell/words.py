"""Shell words: a tree-sitter word node -> an :class:`Arg` after the static expansions."""

from __future__ import annotations

import contextvars
import re
from dataclasses import dataclass

from tree_sitter import Node

BRACE_EXPANSION = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")

#: The original bytes of the tree being walked, for node texts.
SOURCE: contextvars.ContextVar[bytes | None] = contextvars.ContextVar("SOURCE", default=None)



@dataclass(frozen=True, slots=True)
class Arg:
    """A word after the expansions we can do statically.

    ``text`` is None when the word is dynamic (variables, substitutions, brace
    expansion...). ``glob`` is set when it holds unquoted glob characters.
    """

    text: str | None
    glob: bool = False
    pipe: bool = False  # a process substitution: a pipe, not a file

    @property
    def literal(self) -> str | None:
        return None if self.glob else self.text

    def is_option(self) -> bool:
        return self.text is not None and self.text.startswith("-") and self.text != "-"


def _unescape_unquoted(text: str) -> tuple[str, bool]:
    if "\\" not in text:
        return text, ("*" in text or "?" in text or "[" in text)
    out: list[str] = []
    glob = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        if ch in "*?[":
            glob = True
        out.append(ch)
        i += 1
    return "".join(out), glob


def _unescape_double(text: str) -> str:
    return re.sub(r'\\([\\"$`\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), text)


#: plain words by their text: the same words recur across commands, and an Arg is
#: immutable, so one object serves them all (bounded, cleared when full)
_WORDS: dict[tuple[str, str], Arg] = {}
_WORDS_LIMIT = 1 << 13


#: the node types :func:`plain_word_arg` takes: leaves whose Arg is a function of their text
PLAIN_WORDS = frozenset({"word", "number", "raw_string"})


def plain_word_arg(node: Node, t: str) -> Arg:
    """:func:`word_arg` of a node whose type ``t`` is in :data:`PLAIN_WORDS`."""
    key = (t, text_of(node))
    arg = _WORDS.get(key)
    if arg is None:
        if len(_WORDS) >= _WORDS_LIMIT:
            _WORDS.clear()
        arg = _WORDS[key] = _plain_word_arg(t, key[1])
    return arg


def word_arg(node: Node) -> Arg:
    t = node.type
    if t in PLAIN_WORDS:
        return plain_word_arg(node, t)
    raw = text_of(node)
    if t in ("string", "translated_string"):
        parts: list[str] = []
        for child in node.children:
            ct = child.type
            if ct == "string_content":
                parts.append(_unescape_double(text_of(child)))
            elif ct == "$":  # a `$` that starts no expansion: bash keeps it ("foo$")
                parts.append("$")
            elif child.is_named:
                return Arg(None)
        return Arg("".join(parts))
    if t == "concatenation":
        texts: list[str] = []
        glob = False
        children = node.named_children
        if BRACE_EXPANSION.search(raw):
            return Arg(None)  # brace expansion split into words by the grammar
        if node.child_count != len(children) and stray_dollar(node) is None:
            children = node.children  # a literal `$` ('a'$): bash keeps it, so do we
        elif node.child_count != len(children):
            return Arg(None)  # $"..." or $'...' glued to a word: computed
        for child in children:
            if child.type == "$":
                texts.append("$")
                continue
            arg = word_arg(child)
            if arg.text is None:
                return Arg(None)
            texts.append(arg.text)
            glob = glob or arg.glob
        return Arg("".join(texts), glob)
    if t == "process_substitution":
        return Arg(None, pipe=True)
    return Arg(None)


def stray_dollar(node: Node) -> Node | None:
    """An anonymous ``$`` child of ``node`` that the parser left before a quote it touches
    (``$"x"``, ``a$"x"``: bash reads one translated word, the parser two), or None. A ``$``
    followed by anything else is the literal character for bash and for the parser."""
    children = node.children
    for i, child in enumerate(children):
        if child.type == "$" and not child.is_named and i + 1 < len(children):
            nxt = children[i + 1]
            if nxt.start_byte == child.end_byte and nxt.type in (
                    "string", "raw_string", "ansi_c_string", "translated_string", '"', "'"):
                return child
    return None


def _plain_word_arg(t: str, raw: str) -> Arg:
    """A word, number or raw string node as an Arg: a function of its text alone."""
    if t == "raw_string":
        return Arg(raw[1:-1])
    if BRACE_EXPANSION.search(raw):
        return Arg(None)  # brace expansion
    text, glob = _unescape_unquoted(raw)
    return Arg(text, glob)


def text_of(node: Node) -> str:
    source = SOURCE.get()
    data = source[node.start_byte : node.end_byte] if source is not None else node.text
    return data.decode("utf-8", "surrogateescape") if data is not None else ""



def clip(text: str, n: int = 60) -> str:
    """``text`` on one line, cut to ``n`` characters for a reason."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."
