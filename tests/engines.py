"""The matching engines under test (the ``engine`` fixture of conftest.py runs a test
against each of them)."""

from __future__ import annotations

from components import require_component

import guard.match.re2_engine


def require_engine(engine: str) -> str:
    """``engine`` when it can run here: google-re2 is a dev dependency, so a missing one
    skips locally and fails in CI (a green run must mean both engines were compared)."""
    if engine == "re2":
        mod = guard.match.re2_engine._re2()
        require_component(
            "google-re2 (the compiled matching engine)",
            getattr(mod, "__file__", None),
            "pip install -e '.[dev]'",
        )
    return engine
