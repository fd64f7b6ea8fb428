"""One operation of ``guard review``'s red-team corpus (:mod:`guard.lint.corpus`): a real
tool call in one agent's dialect, and what it really does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SRC = "{wt}/src/main.py"
PLAN = "{plans}/review-plan.md"


@dataclass(frozen=True)
class Operation:
    id: str
    category: str  # write-tool | shell | symlink | traversal | protected | mode | network | control
    dialect: str
    tool: str
    input: dict[str, Any]
    declared: tuple[tuple[str, str], ...]  # (kind, target template)
    writes: bool = True  # does it change something other than the plan file?
    note: str = ""
    fixture: tuple[tuple[str, str], ...] = field(default=())  # (link, target) symlinks to make
    hardlinks: tuple[tuple[str, str], ...] = field(default=())  # (new name, existing file)


SRC = "{wt}/src/main.py"
PLAN = "{plans}/review-plan.md"
