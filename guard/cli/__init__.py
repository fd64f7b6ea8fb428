"""The ``guard`` command: a thin typer layer over the library.

Importing this package is cheap: :func:`main` (in :mod:`guard.cli._base`) loads
typer and the commands only for the command line it runs, and ``guard run``
starts its command without them (:mod:`guard.cli.runner`). Each command module
registers its commands on the typer application when it is imported;
:mod:`guard.cli._commands` imports them all, and :data:`app` is that
application with every command on it. A new command family is a new module
imported there. :mod:`guard.cli.options` and :mod:`guard.cli.show` hold what
commands share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guard.cli._base import main

if TYPE_CHECKING:
    import typer

    app: typer.Typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> object:
    if name == "app":  # the whole application, built on first use
        from guard.cli._commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
