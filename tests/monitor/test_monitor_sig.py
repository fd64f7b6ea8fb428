"""``Sig.matches``: the final reconciliation's comparison, without building a signature.

It must answer exactly as ``Sig.of(st, meta) == sig``: a path it calls unchanged is
never looked at again. The attacks: change one thing about a path that a signature
records (content with the mtime set back, mode, owner, a swapped inode, a file
swapped for a symlink, FIFO or directory, a directory's xattr digest) and hope the
comparison misses it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from guard.monitor.entries import Sig

FIELDS = [f.name for f in dataclasses.fields(Sig)]


def _paths(tmp_path: Path) -> list[Path]:
    f = tmp_path / "file"
    f.write_text("content\n")
    x = tmp_path / "exe"
    x.write_text("#!/bin/sh\n")
    x.chmod(0o755)
    d = tmp_path / "dir"
    d.mkdir()
    link = tmp_path / "link"
    link.symlink_to("file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    empty = tmp_path / "empty"
    empty.touch()
    return [f, x, d, link, fifo, empty]


def _variants(sig: Sig) -> list[Sig]:
    """``sig`` with each field changed in turn (and the kind swapped for every other)."""
    out = []
    for name in FIELDS:
        value = getattr(sig, name)
        if name == "kind":
            out += [dataclasses.replace(sig, kind=k) for k in ("file", "dir", "link", "other")
                    if k != value]
        elif isinstance(value, str):
            out.append(dataclasses.replace(sig, **{name: value + "x"}))
        else:
            out += [dataclasses.replace(sig, **{name: value + 1}),
                    dataclasses.replace(sig, **{name: 0 if value else 7})]
    return out


def test_matches_answers_as_equality_for_every_kind_and_every_field(tmp_path: Path) -> None:
    for p in _paths(tmp_path):
        st = os.lstat(p)
        for meta in ("", "0123456789abcdef"):
            sig = Sig.of(st, meta)
            assert sig.matches(st, meta), p
            for other in [*_variants(sig), Sig.of(st, "" if meta else "ff")]:
                assert other.matches(st, meta) == (Sig.of(st, meta) == other), (p, other)


def test_real_changes_are_differences(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("content\n")
    before = Sig.of(os.lstat(f))
    st0 = os.lstat(f)
    f.write_text("CONTENT\n")  # same size
    os.utime(f, ns=(st0.st_atime_ns, st0.st_mtime_ns))  # mtime set back: ctime still moves
    st1 = os.lstat(f)
    assert before.matches(st1) == (Sig.of(st1) == before)  # ctime moved (unless too coarse)
    before = Sig.of(os.lstat(f))
    f.chmod(0o600)
    assert not before.matches(os.lstat(f))
    before = Sig.of(os.lstat(f))
    new = tmp_path / "new"
    new.write_text("CONTENT\n")
    os.utime(new, ns=(os.lstat(f).st_atime_ns, os.lstat(f).st_mtime_ns))
    new.chmod(0o600)
    os.replace(new, f)  # another inode under the same name
    assert not before.matches(os.lstat(f))
    before = Sig.of(os.lstat(f))
    f.unlink()
    f.symlink_to("elsewhere")
    assert not before.matches(os.lstat(f))
    d = tmp_path / "d"
    d.mkdir()
    dsig = Sig.of(os.lstat(d), "")
    assert dsig.matches(os.lstat(d), "")
    assert not dsig.matches(os.lstat(d), "an xattr digest")
    d.chmod(0o700)
    assert not dsig.matches(os.lstat(d), "")
