"""Fixtures for the sandbox tests (helpers live in sandbox_support.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_support import Tree, make_tree


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return make_tree(tmp_path)
