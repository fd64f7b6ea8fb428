"""Writes through per-process magic links are refused (guard would resolve them in its own
process: the hook daemon has another pid and cwd /)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from guard.paths import PathError, canonicalize, magic_link


@pytest.mark.parametrize("path", [
    "/dev/fd/../cwd/src/app.py", "/proc/self/cwd/src/app.py", "/proc/thread-self/cwd/x",
    "/proc/1/cwd/x", "/dev/stdout/../x", "/dev/fd/1/../../cwd/x", "/dev/stdin",
])
def test_paths_through_magic_links_are_named(path: str) -> None:
    assert magic_link(path) is not None


@pytest.mark.parametrize("path", ["/dev/fd/1", "/dev/stdout", "/dev/stderr", "/dev/null",
                                  "/dev/tty", "/etc/hostname", "/proc/cpuinfo"])
def test_plain_descriptors_and_ordinary_paths_are_not(path: str) -> None:
    assert magic_link(path) is None


def test_a_symlink_into_proc_self_is_followed(tmp_path: Path) -> None:
    """Attack: a link in the worktree hides /proc/self/cwd from a lexical check."""
    os.symlink("/proc/self/cwd", tmp_path / "l")
    assert magic_link(str(tmp_path / "l" / "src" / "app.py")) == "/proc/self"
    with pytest.raises(PathError, match="goes through /proc/self"):
        canonicalize("l/src/app.py", tmp_path, write=True)
    canonicalize("l/src/app.py", tmp_path)  # a read is resolved as before


def test_write_through_proc_self_is_refused_read_is_not(tmp_path: Path) -> None:
    with pytest.raises(PathError, match="guard cannot resolve it"):
        canonicalize("/proc/self/cwd/.openoxide/plans/a.md", tmp_path, write=True)
    assert canonicalize("/dev/null", tmp_path, write=True).real == "/dev/null"
