"""The ``guard`` command: a thin typer layer over the library.

Each module in this package registers its commands on :data:`app`; modules
are discovered, so adding a command family means adding one module.
"""

from __future__ import annotations

import importlib
import pkgutil

from guard.cli._app import app, main

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["app", "main"]
