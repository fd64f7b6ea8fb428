"""Text an agent wrote, made safe to show: nothing in it is interpreted by the screen.

Agent-supplied text (a plan, a checklist step, a question, a session title, a file
name, a refusal's reason) goes to a terminal through guard's reports and the cockpit.
Two things in it must never act:

- **terminal control**: an escape sequence (OSC 52 writes the user's clipboard, CSI
  moves the cursor and recolours, OSC 8 hides a link), a carriage return that
  overwrites a line, a bell;
- **invisible text**: zero-width and bidirectional-control characters that make what
  is read differ from what is approved (``Trojan source``), Unicode tag characters.

:func:`visible` replaces each such character by a visible escape (``\\x1b``,
``\\u202e``); the result is then always drawn as plain text, never as Rich or
Textual markup (:func:`guard.ui.plain` and the reports wrap it in a ``Text``).
One function, so every surface shows the same thing. Pure stdlib: the quick
commands import it without rich.
"""

from __future__ import annotations

import re

#: Every character of Unicode categories Cc (control), Cf (format: zero-width,
#: bidi controls, tags, soft hyphen), Zl, Zp (line and paragraph separators) and Cs
#: (lone surrogates, from undecodable bytes). tests/planning/test_agent_text_shown_as_text.py
#: checks this class against :mod:`unicodedata`.
HIDDEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
#: The same, but keeping line feeds, tabs and CRLF line ends (multi-line text: a plan, a
#: note); a carriage return anywhere else (it overwrites the line on a terminal) is escaped.
HIDDEN_BUT_LINES = re.compile(
    "\r(?!\n)|" + HIDDEN.pattern.replace("\x00-\x1f", "\x00-\x08\x0b\x0c\x0e-\x1f")
)

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    named = _NAMED.get(c)
    if named:
        return named
    n = ord(c)
    if n < 0x100:
        return f"\\x{n:02x}"
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def visible(text: str, *, lines: bool = True) -> str:
    """``text`` with every control, format and separator character written as an escape.

    ``lines``: keep line feeds, tabs and CRLF line ends (a plan, a note); False writes them as
    ``\\n``, ``\\t``, ``\\r`` too, so one value stays on one line (a title, a file name).
    """
    pattern = HIDDEN_BUT_LINES if lines else HIDDEN
    return pattern.sub(_escape, text)


def has_hidden(text: str) -> bool:
    """Whether :func:`visible` (keeping lines) would change ``text``."""
    return HIDDEN_BUT_LINES.search(text) is not None
