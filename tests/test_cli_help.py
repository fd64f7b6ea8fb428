"""``--help`` keeps the paragraphs and lists as written (guard/cli/_helptext.py): prose flows
to the terminal's width, examples and list items stay line by line, at 80 columns for
every command."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from guard.cli import app
from guard.cli._helptext import first_paragraph, paragraphs


def test_prose_is_joined_and_blocks_are_kept() -> None:
    text = """First line of the summary
    goes on here.

    A paragraph wrapped
    in the source, at any width.

    Examples:

      guard mode          # the mode here
      guard mode plan     # set it

    - one item
    - another item
      carried on

    \b
    kept
    as written
    """
    text = inspect.cleandoc(text)  # as typer keeps a docstring
    assert paragraphs(text) == [
        "First line of the summary goes on here.",
        "A paragraph wrapped in the source, at any width.",
        "Examples:",
        "  guard mode          # the mode here\n  guard mode plan     # set it",
        "- one item\n- another item\n  carried on",
        "kept\nas written",
    ]
    assert first_paragraph(text) == "First line of the summary goes on here."
    assert paragraphs("Try:\n\n  guard demo   # one line") == ["Try:", "  guard demo   # one line"]


def _paths(cmd: Any, path: list[str]) -> Iterator[list[str]]:
    yield path
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        if not sub.hidden:
            yield from _paths(sub, [*path, name])


PATHS = list(_paths(get_command(app), []))
WIDTH = 80


def _ragged(out: str) -> list[str]:
    """Lines of the help's prose that break although the next word would have fitted, and
    lines of a block (examples, a list) that the width broke in two."""
    # the description, before the first panel, and the epilog (examples), after the last
    text = [*out.split("╭")[0].splitlines(), "", *out.rpartition("╯")[2].splitlines()]
    bad = []
    for line, after in itertools.pairwise(text):
        if not line.strip() or not after.strip() or line.startswith(" Usage:"):
            continue
        if line.startswith("   ") and not after.startswith("   "):
            bad.append(f"a line of a block runs over: {line.rstrip()!r} / {after.strip()!r}")
            continue
        if line.startswith("  ") or after.startswith("  ") or after.lstrip()[:2] in ("- ", "* "):
            continue  # a block: examples, a list, indented lines are kept as written
        if len(line.rstrip()) + 1 + len(after.split()[0]) <= WIDTH - 2:
            bad.append(f"{line.rstrip()!r} / {after.strip()!r}")
    return bad


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "guard" for p in PATHS])
def test_every_help_flows_its_prose_at_80_columns(path: list[str]) -> None:
    r = CliRunner().invoke(app, [*path, "--help"], terminal_width=WIDTH,
                           env={"COLUMNS": str(WIDTH), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    assert all(len(line) <= WIDTH for line in r.output.splitlines()), r.output
    assert not _ragged(r.output), "\n".join(_ragged(r.output))
