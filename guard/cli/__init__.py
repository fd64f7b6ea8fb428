"""The ``guard`` command: a thin typer layer over the library.

Importing this package is cheap: :func:`main` (:mod:`guard.cli._main`) loads typer and
the commands only for the command line it runs, TAB completion is answered from a table
before anything else (:mod:`guard.cli.completion`), and ``guard run``
starts its command without them (:mod:`guard.cli.run_plain`). Each command module
defines its commands on a typer application of its own (``commands``) and never
imports guard's; :mod:`guard.cli._app` imports them all and adds them to
:data:`app`, the application with every command on it. A new command family is a
new module added there. :mod:`guard.cli._base` and :mod:`guard.cli._typer` hold the
conventions, :mod:`guard.cli.options` and :mod:`guard.cli.show` what commands share.
"""

# Lazy imports: the entry point, the typer app only when asked for: TAB, run, check start fast.

from __future__ import annotations

import gc
import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (TAB speed)
if TYPE_CHECKING:
    from collections.abc import Sequence

    import typer

    app: typer.Typer


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (:func:`guard.cli._main.main`); a TAB (the completion
    scripts' environment) is answered first, before the rest of the command line loads."""
    if "_GUARD_COMPLETE" in os.environ:
        from guard.cli import completion

        completion.run()  # returns when typer's completion is to answer
    # What start-up makes (modules, a policy) lives until exit: no garbage for the cycle
    # collector to look for, ~2 ms of passes over it; guard.cli._main turns it back on
    gc.disable()
    from guard.cli._main import main as run

    run(argv)

__all__ = ["app", "main"]


def __getattr__(name: str) -> object:
    if name == "app":  # the whole application, built on first use
        from guard.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
