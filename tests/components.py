"""Real components the end-to-end tests need, and the rule that CI never passes by skipping.

A contributor's laptop may lack a host CLI or an npm package: the tests that
need it skip there, saying what is missing. In CI (``CI=true``) the same
situation fails the run, because a green run must mean the tests ran.

Use :func:`require_component` wherever a test needs a real component::

    from components import require_component

    binary, why = install_claude()
    return require_component("the Claude Code CLI", binary, why)

As a net under it, :func:`pytest_runtest_makereport` (wired in
``tests/conftest.py``) turns any skip of a test under an ``e2e`` directory
into a failure when ``CI=true``.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

CI_RULE = "CI=true: a real component that cannot be installed fails the run instead of skipping"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_component(name: str, path: str | os.PathLike[str] | None, why: str = "") -> Path:
    """``path`` when it exists; otherwise skip (locally) or fail (``CI=true``) the test."""
    if path is not None and os.path.exists(path):
        return Path(path)
    where = f" at {path}" if path is not None else ""
    message = f"{name} is not available{where}: {why or 'not installed'}"
    if in_ci():
        pytest.fail(f"{message} ({CI_RULE})", pytrace=False)
    pytest.skip(message)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[Any]:
    """Under ``CI=true``, a skipped end-to-end test is a failed one."""
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail"):
        return
    if "e2e" not in Path(str(item.path)).parts:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped end-to-end test in CI: {reason} ({CI_RULE})"

