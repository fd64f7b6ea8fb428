"""Help text as written: paragraphs of prose flow to the terminal's width, and lists,
examples and indented lines stay line by line.

typer's rich help keeps each line of a help string's later paragraphs as a line, so text
wrapped in the source comes out ragged at any other width. :func:`paragraphs` reads a help
string as its author meant it: paragraphs split by blank lines; a paragraph of prose is
joined into one line (the terminal wraps it); a paragraph with an indented line or list
items (``- ``, ``* ``, ``1. ``), or one that starts with click's ``\\b``, is kept line by
line, indentation included. :func:`help_text` makes the renderables typer's help prints
for a command's own help; :mod:`guard.cli._typer` puts it in typer's place and
:mod:`guard.cli.root_help` prints ``guard --help`` with it.
"""

# Lazy imports: rich only when help is rendered.

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.highlighter import RegexHighlighter
    from rich.text import Text

_ITEM = re.compile(r"(\s|[-*•] |\d+[.)] )")


def paragraphs(text: str) -> list[str]:
    """``text`` (a help string, dedented as typer keeps it) as the paragraphs help shows:
    prose as one line each, blocks (lists, examples, ``\\b`` paragraphs) line by line."""
    text = text.partition("\f")[0].strip("\n")
    out: list[str] = []
    for para in re.split(r"\n[ \t]*\n", text):
        lines = [line.rstrip() for line in para.split("\n")]
        if lines[0].startswith("\b"):
            lines = lines[1:] if not lines[0][1:].strip() else [lines[0][1:], *lines[1:]]
            out.append("\n".join(lines))
        elif len(lines) == 1 or any(_ITEM.match(line) for line in lines):
            out.append("\n".join(lines))
        else:
            out.append(" ".join(line.strip() for line in lines))
    return [p for p in out if p.strip()]


def first_paragraph(text: str) -> str:
    """What a command list shows of a command's help: its first paragraph."""
    found = paragraphs(text)
    return found[0].strip() if found else ""


def highlighter() -> RegexHighlighter:
    """The highlighter of typer's help (options, switches, <types>, ``Usage:``)."""
    from rich.highlighter import RegexHighlighter

    class Options(RegexHighlighter):
        highlights = [  # noqa: RUF012  (typer's help highlights these alike)
            r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
            r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
            r"(?P<types>\<[^\>]+\>)",
            r"(?P<usage>Usage: )",
        ]

    return Options()


def help_text(text: str, *, deprecated: bool = False) -> list[Text]:
    """A command's help as typer's help prints it (the first paragraph, then the others
    dimmed), with the paragraphs of :func:`paragraphs`."""
    from rich.text import Text

    light = highlighter()
    shown: list[Text] = [Text("(deprecated) ", style="red")] if deprecated else []
    first, *rest = paragraphs(text) or [""]
    shown.append(light(Text.from_markup(first.strip())))
    if rest:
        shown += [Text(""), light(Text.from_markup("\n\n".join(rest), style="dim"))]
    return shown
