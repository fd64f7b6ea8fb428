"""Roots, worktree discovery, the plan directory and its global fallback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem

from guard.paths import PathError, canonicalize, find_worktree, plan_dir, project_key


@pytest.mark.parametrize("marker", [".git", ".hg", ".jj", ".svn"])
def test_worktree_is_the_nearest_ancestor_with_a_vcs_marker(tmp_path: Path, marker: str) -> None:
    (tmp_path / "w" / marker).mkdir(parents=True)
    deep = tmp_path / "w" / "a" / "b"
    deep.mkdir(parents=True)
    assert find_worktree(deep) == tmp_path / "w"
    pd = plan_dir(deep)
    assert pd.path == tmp_path / "w" / ".openoxide" / "plans"
    assert marker in pd.reason


def test_git_file_marks_a_linked_worktree(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / ".git").write_text("gitdir: /elsewhere\n")
    assert find_worktree(tmp_path / "w") == tmp_path / "w"


def test_fallback_plan_dir_is_in_the_data_dir_with_a_readable_stable_key(tmp_path: Path) -> None:
    d = tmp_path / "My Project!"
    d.mkdir()
    pd = plan_dir(d)
    assert pd.worktree is None
    key = project_key(d)
    assert pd.path.name == key and key.startswith("My-Project-")
    assert pd.path.parent.name == "plans"
    assert plan_dir(d).path == pd.path  # stable
    other = tmp_path / "other" / "My Project!"
    other.mkdir(parents=True)
    assert project_key(other) != key  # same basename, other directory
    assert "no version control marker" in pd.reason


def test_canonicalize_keeps_link_and_target(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("x")
    os.symlink("t", tmp_path / "l")
    c = canonicalize("l", tmp_path)
    assert c.link == str(tmp_path / "l") and c.real == str(tmp_path / "t")
    assert c.candidates == (c.link, c.real)
    assert canonicalize("t", tmp_path).candidates == (str(tmp_path / "t"),)


@pytest.mark.parametrize("bad", ["", "a\x00", "a\tb", "\x1b"])
def test_canonicalize_refuses_empty_and_control_characters(tmp_path: Path, bad: str) -> None:
    with pytest.raises(PathError):
        canonicalize(bad, tmp_path)


def test_pyfakefs_case_only_difference_is_a_different_path(fs: FakeFilesystem) -> None:
    """Path logic only: on a case-sensitive filesystem PLANS is not plans."""
    fs.create_dir("/w/.git")
    fs.create_dir("/w/.openoxide/plans")
    c = canonicalize(".OpenOxide/PLANS/p.md", "/w")
    assert c.real == "/w/.OpenOxide/PLANS/p.md"
    assert find_worktree("/w/.openoxide/plans") == Path("/w")
