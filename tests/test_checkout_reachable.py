"""The suite's own precondition: run as root, it drops to uid 65534 and runs guard from
this checkout, so that user must be able to reach it. A checkout it cannot reach stops
the run at once with the directory and the fix, not 30 unexplained failures."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from components import unsearchable_dir

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp that every user can search (pytest's own may be 0700)."""
    path = Path(tempfile.mkdtemp(prefix="guard-checkout-", dir="/tmp")).resolve()
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_unsearchable_dir_names_the_blocking_directory(open_dir: Path) -> None:
    inner = open_dir / "top" / "c" / "guard"
    inner.mkdir(parents=True, mode=0o755)
    assert unsearchable_dir(inner) is None
    (open_dir / "top").chmod(0o700)
    assert unsearchable_dir(inner) == open_dir / "top"
    (open_dir / "top").chmod(0o701)  # search without read is enough
    assert unsearchable_dir(inner) is None
    assert unsearchable_dir(open_dir / "absent" / "x") == open_dir / "absent"


def test_a_run_from_an_unsearchable_checkout_stops_with_the_fix(open_dir: Path) -> None:
    """A copy of the checkout under a 0700 directory (what ``mktemp -d`` makes): as root,
    pytest stops before any test with exit 4, naming the directory and the fix. As
    another user the suite does not drop privileges, and the same run collects."""
    hidden = open_dir / "hidden"
    hidden.mkdir()
    checkout = hidden / "c"
    ignore = shutil.ignore_patterns("__pycache__", ".venv", "data", "e2e")
    for part in ("guard", "tests"):
        shutil.copytree(ROOT / part, checkout / part, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", checkout)
    hidden.chmod(0o700)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co",
         "tests/test_checkout_reachable.py"],
        cwd=checkout, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(checkout)},
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    if os.geteuid() == 0:
        assert proc.returncode == 4, out
        assert f"is under {hidden} (mode 700)" in out, out
        assert f"chmod o+x {hidden}" in out, out
    else:
        assert proc.returncode == 0, out
