"""Rule pages: docs/rules/<CODE>.md is generated from the catalog.

Regenerate with ``python -m guard.lint.docs docs/rules``; a test keeps them in sync.
"""

from __future__ import annotations

import sys
from pathlib import Path

from guard.lint import rules as _rules  # noqa: F401  (registers the catalog)
from guard.lint.model import RULES, Rule


def rule_page(r: Rule) -> str:
    parts = [
        f"# {r.code} `{r.name}`\n",
        f"Default level: **{r.level.value}**\n",
        f"## What it does\n\n{r.summary}\n",
        f"## Why it matters\n\n{r.why}\n",
        f"## Example\n\n```toml\n{r.bad}\n```\n",
        f"## How to fix\n\n{r.fix}\n",
    ]
    if r.good:
        parts.append(f"```toml\n{r.good}\n```\n")
    parts.append(
        "## Configure\n\n"
        f'In `pyproject.toml`: `[tool.guard.lint]` `ignore = ["{r.code}"]`, or'
        f' `[tool.guard.lint.levels]` `{r.code} = "warning"`; the same keys work in a'
        " policy's `[lint]` table.\n"
    )
    return "\n".join(parts)


def index_page() -> str:
    lines = [
        "# guard lint rules\n",
        "| code | name | level | what it finds |",
        "|---|---|---|---|",
    ]
    for r in RULES.values():
        lines.append(f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.level.value} | {r.summary} |")
    return "\n".join(lines) + "\n"


def write_pages(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for r in RULES.values():
        p = directory / f"{r.code}.md"
        p.write_text(rule_page(r), encoding="utf-8")
        written.append(p)
    idx = directory / "README.md"
    idx.write_text(index_page(), encoding="utf-8")
    written.append(idx)
    return written


if __name__ == "__main__":
    for path in write_pages(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules")):
        print(path)
