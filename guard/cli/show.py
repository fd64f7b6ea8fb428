"""Output shared by several commands: how a monitor violation is shown.

``guard watch`` prints violations on stdout, ``guard run`` on stderr (the
command owns stdout); both print them the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from guard.monitor import Violation
    from guard.paths import Roots


def violation_text(v: Violation, roots: Roots) -> str:
    """A violation in four lines: what happened where, why, the rule, what was done."""
    extra = f" ({v.detail})" if v.detail else ""
    return (
        f"VIOLATION {v.event}{extra} {roots.describe(v.path)} at {v.timestamp[11:19]}\n"
        f"  {v.reason}\n  rule: {v.rule}\n  action: {v.action_taken}"
    )


def print_violation(console: Console, v: Violation, roots: Roots, prefix: str = "") -> None:
    """:func:`violation_text` on ``console``; names that look like markup print as is."""
    first, _, rest = violation_text(v, roots).partition("\n")
    word, _, tail = first.partition(" ")
    console.print(
        f"{escape(prefix)}[bold red]{word}[/] {escape(tail)}\n{escape(rest)}", markup=True
    )
