"""The ``guard`` command: a thin typer layer over the library.

Importing this package is cheap: :func:`main` (in :mod:`guard.cli._main`) loads
typer and the commands only for the command line it runs, and ``guard run``
starts its command without them (:mod:`guard.cli.run_plain`). Each command module
defines its commands on a typer application of its own (``commands``) and never
imports guard's; :mod:`guard.cli._app` imports them all and adds them to
:data:`app`, the application with every command on it. A new command family is a
new module added there. :mod:`guard.cli._base` and :mod:`guard.cli._typer` hold the
conventions, :mod:`guard.cli.options` and :mod:`guard.cli.show` what commands share.
"""

# Lazy imports: the typer app only when `app` is asked for: run/check start fast.

from __future__ import annotations

from typing import TYPE_CHECKING

from guard.cli._main import main

if TYPE_CHECKING:
    import typer

    app: typer.Typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> object:
    if name == "app":  # the whole application, built on first use
        from guard.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
