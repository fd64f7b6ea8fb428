"""``Sig.of`` and ``Sig.matches``: what every reconciliation compares, per path.

``matches`` must answer exactly as ``Sig.of(st, meta) == sig``, and ``Sig.of`` (which
builds a regular file's signature by a quicker route than other kinds') must record
every field the definition names: a path called unchanged is never looked at again.
The attacks: change one thing about a path that a signature records (content with the
mtime set back, mode, owner, a swapped inode, a file swapped for a symlink, FIFO or
directory, a directory's xattr digest) and hope the comparison misses it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from guard.monitor.entries import Sig

FIELDS = list(Sig._fields)


def _paths(tmp_path: Path) -> list[Path]:
    tmp_path.mkdir(exist_ok=True)
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
            out += [sig._replace(kind=k) for k in ("file", "dir", "link", "other")
                    if k != value]
        elif isinstance(value, str):
            out.append(sig._replace(**{name: value + "x"}))
        else:
            out += [sig._replace(**{name: value + 1}),
                    sig._replace(**{name: 0 if value else 7})]
    return out


def test_matches_answers_as_equality_for_every_kind_and_every_field(tmp_path: Path) -> None:
    for p in _paths(tmp_path):
        st = os.lstat(p)
        for meta in ("", "0123456789abcdef"):
            sig = Sig.of(st, meta)
            assert sig.matches(st, meta), p
            for other in [*_variants(sig), Sig.of(st, "" if meta else "ff")]:
                assert other.matches(st, meta) == (Sig.of(st, meta) == other), (p, other)


def test_of_records_every_field_of_every_kind(tmp_path: Path) -> None:
    """The attack: a field the quick route for regular files forgot (the setuid bit, the
    owner, the inode of a file swapped in) would make a change invisible."""
    f = tmp_path / "file"
    f.write_text("content\n")
    f.chmod(0o4750)  # setuid: part of the mode recorded
    for p in [*_paths(tmp_path / "more"), f]:
        st = os.lstat(p)
        m = st.st_mode
        kind = ("dir" if stat.S_ISDIR(m) else "file" if stat.S_ISREG(m)
                else "link" if stat.S_ISLNK(m) else "other")
        for meta in ("", "0123456789abcdef"):
            sig = Sig.of(st, meta)
            assert type(sig) is Sig
            if kind == "dir":
                want = Sig("dir", stat.S_IMODE(m), st.st_uid, st.st_gid, meta=meta)
            else:  # a non-directory has no meta digest: its xattrs move its ctime
                want = Sig(kind, stat.S_IMODE(m), st.st_uid, st.st_gid, st.st_size,
                           st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            assert sig == want, p
            assert tuple(getattr(sig, n) for n in FIELDS) == tuple(want), p
    assert Sig.of(os.lstat(f)).mode == 0o4750


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
