"""Differential test of canonicalization: guard's resolver (the kernel resolves the
parent through ``open(O_PATH)`` + ``/proc/self/fd``) against the component-by-component
resolution it replaced (``os.path.realpath`` of the parent, ``islink`` of the name) and
against ``os.path.realpath`` of the whole path, on generated trees full of symlinks:
relative, absolute, chains, loops, dangling ones, links through ``..``, hard links.
"""

from __future__ import annotations

import errno
import os
import random
import stat
from pathlib import Path

import pytest

from guard.paths import CanonicalPath, PathError, canonicalize

SEED = int(os.environ.get("GUARD_DIFF_SEED", "17"))


def reference(path: str, cwd: str) -> CanonicalPath | str:
    """The resolver guard used before: every component resolved in user space."""
    full = os.path.join(cwd, path)
    head, tail = os.path.split(full.rstrip("/") or "/")
    if tail in ("", ".", ".."):
        real = link = os.path.realpath(full)
    else:
        real_head = os.path.realpath(head)
        link = os.path.join(real_head, tail)
        real = os.path.realpath(link) if os.path.islink(link) else link
    try:
        st = os.stat(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "loop"
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            return "error"
        return CanonicalPath(link=link, real=real, is_dir=False, nlink=0, mode=0)
    nlink = st.st_nlink if stat.S_ISREG(st.st_mode) else 0
    return CanonicalPath(link, real, stat.S_ISDIR(st.st_mode), nlink, st.st_mode)


def ours(path: str, cwd: str) -> CanonicalPath | str:
    try:
        return canonicalize(path, cwd)
    except PathError as exc:
        return "loop" if "symlink loop" in str(exc) else "error"


def build_tree(root: Path, rng: random.Random) -> list[str]:
    """A tree of directories, files and links of every kind; returns the names used."""
    dirs = ["a", "a/b", "a/b/c", "d", "d/e", "a/b/c/deep"]
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    files = ["f.txt", "a/g.md", "a/b/h.py", "d/e/i.md", "a/b/c/deep/j"]
    for f in files:
        (root / f).write_text("x")
    os.link(root / "a/g.md", root / "d/hard.md")  # two names, one file
    links = {
        "a/up": "..",  # through ..
        "a/b/upup": "../..",
        "a/b/sib": "../../d",
        "lrel": "a/b",
        "labs": str(root / "d/e"),
        "a/b/c/tofile": "../h.py",
        "chain1": "chain2",
        "chain2": "a/b/c",
        "loop1": "loop2",  # a loop
        "loop2": "loop1",
        "self": "self",
        "dangling": "nowhere/x",
        "d/e/danglingabs": str(root / "missing/y"),
        "d/dotdot": "e/../../a/b/../up",  # .. after a link
        "a/b/c/back": "../../../lrel/c",
        "linkfile": "f.txt",
        "d/toloop": "../loop1/z",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    names = [p for d in dirs for p in d.split("/")] + [p.rsplit("/", 1)[-1] for p in files]
    names += [n.rsplit("/", 1)[-1] for n in links]
    names += ["missing", "new.md", "hard.md"]
    rng.shuffle(names)
    return sorted(set(names))


def gen_path(rng: random.Random, names: list[str], root: Path) -> str:
    parts = [
        rng.choice(names) if rng.random() < 0.8 else rng.choice(["..", ".", ""])
        for _ in range(rng.randint(1, 6))
    ]
    path = "/".join(parts) or "."
    if rng.random() < 0.1:
        path += "/"
    if rng.random() < 0.3:
        path = f"{root}/{path}"
    return path


@pytest.mark.parametrize("seed", [SEED, SEED + 1, SEED + 2])
def test_resolver_agrees_with_realpath_and_the_old_resolver(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = Path(os.path.realpath(tmp_path))
    names = build_tree(root, rng)
    cwds = [root, root / "a", root / "a/b/c", root / "d/e"]
    kinds: set[str] = set()
    fixed = ["d/hard.md", "a/b/upup/d/hard.md", "lrel/c/tofile", "loop1/x", "d/dotdot/b/h.py",
             "dangling", "labs/danglingabs", "a/b/c/back/deep/j", "self/..", "linkfile"]
    for i in range(1000):
        cwd = str(root) if i < len(fixed) else str(rng.choice(cwds))
        path = fixed[i] if i < len(fixed) else gen_path(rng, names, root)
        want, got = reference(path, cwd), ours(path, cwd)
        assert got == want, f"{path!r} from {cwd}: guard {got}, old resolver {want}"
        if isinstance(got, CanonicalPath):
            full = os.path.join(cwd, path)
            try:  # realpath gives up on a loop in the parent; compare where it does not
                os.path.realpath(os.path.dirname(full.rstrip("/")), strict=True)
            except OSError:
                kinds.add("parent unresolvable")
            else:
                assert got.real == os.path.realpath(full), (path, cwd, got)
            kinds.add("link" if got.link != got.real else "plain")
            kinds.add("dir" if got.is_dir else "missing" if not got.mode else "file")
            if got.nlink > 1:
                kinds.add("hardlink")
        else:
            kinds.add(got)
    # the generated data reaches every class it is meant to exercise
    assert {"link", "plain", "dir", "file", "missing", "loop", "hardlink"} <= kinds, kinds


def test_a_symlink_swapped_between_calls_is_seen(tmp_path: Path) -> None:
    """Attack: ask about a path while it is a plain directory, then swap it for a link
    to elsewhere and ask again; nothing may be remembered across calls."""
    root = Path(os.path.realpath(tmp_path))
    (root / "plans").mkdir()
    (root / "src").mkdir()
    first = canonicalize("plans/x.md", root)
    assert first.real == str(root / "plans/x.md")
    os.rename(root / "plans", root / "old")
    os.symlink("src", root / "plans")
    second = canonicalize("plans/x.md", root)
    assert second.real == str(root / "src/x.md")
    assert not (root / "src/x.md").exists()
