"""Styled terminal text without rich: the few styles guard's quick commands print.

``guard check`` and ``guard lint`` run on every file of a pre-commit hook or an
editor; importing rich would cost more than the decision itself. Text goes out
as given (no markup is interpreted, so a path holding ``[red]`` stays literal).
"""

from __future__ import annotations

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def paint(text: str, style: str, on: bool) -> str:
    """``text`` in ``style`` (words of :data:`_CODES`, e.g. ``"bold red"``) when ``on``."""
    if not on or not style or not text:
        return text
    codes = ";".join(_CODES[word] for word in style.split())
    return f"\x1b[{codes}m{text}\x1b[0m"
