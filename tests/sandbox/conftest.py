"""Fixtures for the sandbox tests (helpers live in sandbox_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import Tree, make_tree
from unprivileged import require_unprivileged
from walls_support import Project, run_project


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return make_tree(tmp_path)


@pytest.fixture
def root_proj() -> Iterator[Project]:
    """A project of root's, for the Landlock-only fallback root reaches through the helper."""
    yield from run_project("root")


@pytest.fixture
def nobody_proj() -> Iterator[Project]:
    """A project of uid 65534's (skipped, or failed in CI, where it cannot drop to it)."""
    require_unprivileged()
    yield from run_project("nobody")
