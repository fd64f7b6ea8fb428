"""What is staged, read from the index's bytes (guard/monitor/gitindex.py ``listing``), is
byte for byte what ``git ls-files --stage -z`` prints for those bytes, for every kind of
index it answers for; for the rest it leaves the answer to git (None). ``staged`` digests
the same text either way, so a digest from one path equals one from the other.

The attacks: an index whose bytes are not what was checksummed, whose entries are out of
order, with an extension git must understand, or whose entries live elsewhere (a split
index) never gets a digest of this module's making: git answers for it."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from guard.monitor import gitindex
from guard.monitor.gitindex import listing, staged


def git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env=env, timeout=60).stdout


def by_git(root: Path, data: bytes, tmp: Path) -> bytes:
    """What git prints for ``data`` (a copy used as the index)."""
    copy = tmp / "index-copy"
    copy.write_bytes(data)
    return subprocess.run(["git", "-C", str(root), "ls-files", "--stage", "-z"], check=True,
                          capture_output=True, timeout=60,
                          env={**os.environ, "GIT_INDEX_FILE": str(copy)}).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "tests@guard.invalid")
    git(root, "config", "user.name", "guard tests")
    (root / "a.txt").write_text("a\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "d").mkdir()
    (root / "d" / "b.txt").write_text("b\n")
    (root / "d" / "naïve\nname.txt").write_text("odd name\n")
    (root / "link").symlink_to("a.txt")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def _conflict(root: Path) -> None:
    git(root, "checkout", "-qb", "other")
    (root / "a.txt").write_text("other\n")
    git(root, "commit", "-qam", "other")
    git(root, "checkout", "-q", "-")
    (root / "a.txt").write_text("mine\n")
    git(root, "commit", "-qam", "mine")
    subprocess.run(["git", "-C", str(root), "merge", "-q", "other"], capture_output=True,
                   timeout=60, check=False)  # a conflict: stages 1, 2 and 3 of a.txt


def _long_name(root: Path) -> None:
    deep = root / ("x" * 200) / ("y" * 200) / ("z" * 200) / ("w" * 200) / ("v" * 200)
    deep.mkdir(parents=True)
    (deep / ("u" * 200)).write_text("deep\n")  # a name over 0xFFF bytes in all
    git(root, "add", "-A")


def _staged_only(root: Path) -> None:
    (root / "new.txt").write_text("n\n")
    git(root, "add", "new.txt")


def _intent_to_add(root: Path) -> None:
    (root / "later.txt").write_text("l\n")
    git(root, "add", "-N", "later.txt")


def _version_4_long_name(root: Path) -> None:
    _long_name(root)
    git(root, "update-index", "--index-version", "4")


def _update_index(*args: str) -> Callable[[Path], None]:
    def run(root: Path) -> None:
        git(root, "update-index", *args)
    return run


STATES: dict[str, Callable[[Path], None]] = {
    "committed": lambda root: None,
    "staged-not-committed": _staged_only,
    "version-4": _update_index("--index-version", "4"),
    "version-3-skip-worktree": _update_index("--skip-worktree", "a.txt"),
    "assume-unchanged": _update_index("--assume-unchanged", "d/b.txt"),
    "intent-to-add": _intent_to_add,
    "gitlink": _update_index("--add", "--cacheinfo", f"160000,{'ab' * 20},sub"),
    "conflict": _conflict,
    "long-name": _long_name,
    "version-4-long-name": _version_4_long_name,
}


@pytest.mark.parametrize("state", list(STATES))
def test_the_listing_is_what_git_prints(repo: Path, tmp_path: Path, state: str) -> None:
    STATES[state](repo)
    data = (repo / ".git" / "index").read_bytes()
    printed = listing(data)
    assert printed is not None, state
    assert printed == by_git(repo, data, tmp_path)
    assert staged(data, str(repo), tmp_path) == hashlib.sha256(printed).hexdigest()


def _git_only(data: bytes, repo: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as mp:
        mp.setattr(gitindex, "listing", lambda data: None)
        return staged(data, str(repo), tmp)


def _resum(body: bytes) -> bytes:
    return body + hashlib.sha1(body).digest()


def test_an_index_git_refuses_or_reads_elsewhere_is_left_to_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = (repo / ".git" / "index").read_bytes()
    # a bit flipped in a name, the checksum left as it was (git reads on without checking
    # it, and lists another name): never listed here from bytes that are not what was
    # checksummed
    flipped = data[:74] + bytes([data[74] ^ 1]) + data[75:]
    # two entries swapped, checksummed again: out of order (the listing never orders)
    first = 12
    second = first + ((62 + data.index(b"\0", first + 62) - first - 62 + 8) & ~7)
    third = second + ((62 + data.index(b"\0", second + 62) - second - 62 + 8) & ~7)
    swapped = _resum(data[:first] + data[second:third] + data[first:second] + data[third:-20])
    # an extension git must understand (lower-case tag) that it does not know
    tag = struct.pack(">4sL", b"zzzz", 0)
    unknown = _resum(data[:-20] + tag)
    for bad in (flipped, swapped, unknown):
        assert listing(bad) is None
        got = staged(bad, str(repo), tmp_path)
        assert got == _git_only(bad, repo, tmp_path, monkeypatch)
        assert got.startswith("unreadable: ") == (bad is unknown), got
    git(repo, "update-index", "--split-index")
    split = (repo / ".git" / "index").read_bytes()
    assert listing(split) is None  # its entries live in a shared index file
    assert staged(split, str(repo), tmp_path) == _git_only(split, repo, tmp_path, monkeypatch)
    assert not staged(split, str(repo), tmp_path).startswith("unreadable")
