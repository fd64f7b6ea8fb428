"""The tests' way of running guard as uid 65534 from a checkout that user cannot reach.

Run as root, the suite attacks guard as uid 65534, running this checkout's interpreter
and package. ``mktemp -d`` makes 0700 directories and pyenv puts Python under a 0700
``/root``: :func:`nobody.reach` lets that user reach exactly what it needs there, in a
private mount namespace, and nothing else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from nobody import covers, needed, reach, unsearchable_dirs
from sandbox.unprivileged import NOBODY, require_unprivileged

SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp that every user can search (pytest's own may be 0700)."""
    path = Path(tempfile.mkdtemp(prefix="guard-reach-", dir="/tmp")).resolve()
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_covers_names_each_unsearchable_directory_and_the_way_through_it(
    open_dir: Path,
) -> None:
    inner = open_dir / "a" / "b" / "c" / "d"
    inner.mkdir(parents=True, mode=0o755)
    assert unsearchable_dirs(inner) == [] and covers([inner]) == {}
    (open_dir / "a").chmod(0o700)
    (open_dir / "a" / "b" / "c").chmod(0o700)
    assert unsearchable_dirs(inner) == [open_dir / "a", open_dir / "a" / "b" / "c"]
    other = open_dir / "a" / "e"
    assert covers([inner, other, inner]) == {
        open_dir / "a": ["b", "e"],
        open_dir / "a" / "b" / "c": ["d"],
    }
    assert list(covers([inner])) == [open_dir / "a", open_dir / "a" / "b" / "c"]  # outer first
    (open_dir / "a" / "b" / "c").chmod(0o701)  # search without read is enough
    assert unsearchable_dirs(inner) == [open_dir / "a"]


def test_a_checkout_in_a_0700_directory_runs_as_uid_65534_and_nothing_else_shows(
    open_dir: Path,
) -> None:
    """A checkout cloned into ``mktemp -d`` (0700): uid 65534 cannot start its program
    (the control: without the shim the user is refused). Through the shim it runs it, and
    still cannot read a file beside the checkout: listing the 0700 directory shows only
    the way to the checkout; outside
    the shim's namespace the directory is as it was."""
    require_unprivileged()
    hidden = open_dir / "hidden"
    checkout = hidden / "inner" / "c"
    checkout.mkdir(parents=True)
    (hidden / "inner").chmod(0o700)  # two 0700 levels on the way, as nested temp dirs
    program = checkout / "hello.py"
    program.write_text("print('reached')\n")
    program.chmod(0o644)
    (hidden / "secret.txt").write_text("root's\n")
    hidden.chmod(0o700)

    def run(prefix: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, *SETPRIV, *argv], capture_output=True, text=True,
                              timeout=120, check=False, cwd="/")  # fmt: skip

    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    refused = run(reach([Path(python), Path(os.path.realpath(python))]), python, str(program))
    assert refused.returncode != 0 and "Permission denied" in refused.stderr, refused
    shim = reach([*needed(), Path(python), checkout])
    got = run(shim, python, str(program))
    assert (got.returncode, got.stdout) == (0, "reached\n"), got
    assert run(shim, "cat", str(hidden / "secret.txt")).returncode != 0
    listing = run(shim, "ls", "-A", str(hidden))
    assert (listing.returncode, listing.stdout.split()) == (0, ["inner"]), listing
    assert (hidden.stat().st_mode & 0o777, (hidden / "inner").stat().st_mode & 0o777) == (
        0o700, 0o700,
    )  # fmt: skip
    assert sorted(os.listdir(hidden)) == ["inner", "secret.txt"]
