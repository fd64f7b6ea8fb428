"""The rich console every command prints with, without typer: :func:`console`.

It follows ``--color``/``NO_COLOR`` (:mod:`guard.cli._base`). Commands answered before
typer loads (``guard explain``: :mod:`guard.cli.explain_view`) print with it too, so both
paths print the same bytes; :mod:`guard.cli._typer` re-exports it.
"""

from __future__ import annotations

import sys

from rich.console import Console

from guard.cli._base import ColorMode, color_enabled, color_mode, isatty

__all__ = ["console"]


def console(*, stderr: bool = False, soft_wrap: bool = True) -> Console:
    """A rich console that follows ``--color``/``NO_COLOR``; never wraps when not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    on = color_enabled(stream)
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=soft_wrap or not isatty(stream),
        color_system="auto" if on else None,
        force_terminal=True if on and color_mode() is ColorMode.always else None,
        no_color=not on,
    )
