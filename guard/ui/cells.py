"""How the cockpit writes agent text into its cells: one line, made visible, cut so that
what matters stays (the file name at the end of a path), and the diff of a changed plan."""

from __future__ import annotations

import difflib

from rich.text import Text

from guard.plaintext import visible

#: Characters of two plans above which the cockpit does not diff them (difflib is slow).
MAX_DIFF = 512 * 1024


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def keep_name(text: str, width: int) -> str:
    """``text`` cut in its middle, so the tool in front and the file name at the end stay."""
    if len(text) <= width:
        return text
    head = min(12, width // 3)
    return text[:head] + "…" + text[len(text) - (width - head - 1) :]


def one_line(text: str | None) -> str:
    """Agent text for one line of the screen: every control character made visible."""
    return visible(text or "", lines=False)


def plan_diff(before: str, after: str, limit: int = 400) -> Text:
    """What changed in the plan, as a unified diff (agent text made visible, no markup)."""
    if len(before) + len(after) > MAX_DIFF:
        return Text("(too large to diff here: o shows the plan as it is now in $PAGER)")
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "shown",
                                      "now", lineterm="", n=1))  # fmt: skip
    t = Text()
    for n, line in enumerate(lines[:limit]):
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        t.append(("\n" if n else "") + visible(line, lines=False), style=style)
    if len(lines) > limit:
        t.append(f"\n... {len(lines) - limit} more lines of diff", style="dim")
    return t or Text("(no line changed: only bytes that do not show, e.g. line ends)")


def at_time(at: str) -> str:
    """HH:MM:SS of an ISO timestamp."""
    return at[11:19] if len(at) >= 19 else at
