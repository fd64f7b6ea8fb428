"""Which blobs git's object database holds: a blob held as a loose object is found by
reading its header (guard/monitor/gitstate.py ``loose_blobs``), the rest by ``git cat-file
--batch-check``; either way ``missing_blobs`` answers as git alone does.

The attacks: a loose object file replaced by garbage, by another type's object, by a FIFO
(reading its header must not hang) or removed must never count as a blob git holds."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

from guard.monitor import gitstate


def git(root: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, input=stdin, timeout=60).stdout


def by_git(root: Path, ids: set[str]) -> set[str]:
    out = git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)",
              stdin="\n".join(ids) + "\n")
    return ids - {line[:-5] for line in out.splitlines() if line.endswith(" blob")}


def test_missing_blobs_answers_as_git_for_loose_packed_and_tampered_objects(
    tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "tests@guard.invalid")
    git(root, "config", "user.name", "guard tests")
    for name in ("packed", "loose", "garbage", "fifo", "removed", "typed"):
        (root / f"{name}.txt").write_text(f"{name}\n")
    git(root, "add", "packed.txt")
    git(root, "commit", "-qm", "one")
    git(root, "gc", "-q")  # packed.txt's blob now lives in a pack only
    git(root, "add", "-A")
    git(root, "commit", "-qm", "two")
    ids = {n: git(root, "rev-parse", f"HEAD:{n}.txt").strip()
           for n in ("packed", "loose", "garbage", "fifo", "removed", "typed")}
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    objects = root / ".git" / "objects"

    def obj(i: str) -> Path:
        return objects / i[:2] / i[2:]

    assert not obj(ids["packed"]).exists() and obj(ids["loose"]).exists()
    obj(ids["garbage"]).chmod(0o644)
    obj(ids["garbage"]).write_bytes(b"not zlib at all")
    obj(ids["fifo"]).unlink()
    os.mkfifo(obj(ids["fifo"]))
    obj(ids["removed"]).unlink()
    obj(ids["typed"]).chmod(0o644)
    obj(ids["typed"]).write_bytes(zlib.compress(b"tree 0\0"))  # the header says tree
    absent = "0" * 39 + "1"
    want = {*ids.values(), tree, absent}

    assert gitstate.loose_blobs(root, want) == {ids["loose"]}  # the FIFO read no hang
    asked = want - {ids["fifo"]}  # git itself waits on a FIFO (until its timeout)
    expected = by_git(root, asked)
    assert ids["loose"] not in expected and ids["packed"] not in expected
    assert {ids["garbage"], ids["removed"], ids["typed"], tree, absent} <= expected
    assert gitstate.missing_blobs(root, asked) == expected
    assert gitstate.loose_blobs(root, want, limit=3) == set()  # more than the limit: git
    assert gitstate.missing_blobs(root, set()) == set()
