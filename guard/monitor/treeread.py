"""Reading the watched trees by descriptor: the walk, and a file's hashes.

Holds :func:`walk` / :func:`walk_dir` (every path under the roots with its
``lstat``, descended with ``O_NOFOLLOW`` so a directory swapped for a symlink is
never followed), :func:`differences` (the same walk, each path's signature compared
as it is read: what a reconciliation asks), :func:`hash_file` (a file's SHA-256),
:func:`git_blob_id` and :func:`blob_id` (the id git gives a file's or some bytes' content), and
:func:`open_file` / :func:`read_copy`, which open a regular file by descriptor and
refuse anything else.

It keeps no state and writes nothing. What the baseline records per path is in
:mod:`guard.monitor.entries`; taking, storing and restoring it is in
:mod:`guard.monitor.baseline` and :mod:`guard.monitor.phases`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from guard.monitor import hashes
from guard.monitor.entries import BaselineError, Sig, SourceChanged
from guard.monitor.fsops import Anchor, Unsafe, dir_meta, hash_fd, open_dir_at, open_regular

CHUNK = 1 << 20
_S_IFMT = 0o170000
_S_IFREG = stat.S_IFREG
_new = tuple.__new__


def blob_id(data: bytes, hex_len: int = 40) -> str:
    """The id git gives ``data`` as a blob (SHA-1, or SHA-256 in a sha256 repository)."""
    head = b"blob %d\0" % len(data)
    h = hashes.sha256(head, size=len(data)) if hex_len == 64 else hashes.sha1(head,
                                                                               size=len(data))
    h.update(data)
    return h.hexdigest()


def read_copy(path: str) -> bytes | None:
    """A baseline copy, read without following a symlink (never a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise SourceChanged(f"its baseline copy {path} cannot be opened: {exc.strerror}"
                            ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SourceChanged(f"its baseline copy {path} is not a file any more")
        chunks = []
        while chunk := os.read(fd, CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def git_blob_id(path: str, anchor: Anchor | None = None) -> str:
    """The id git would give the file's content as a blob (read by descriptor, never a FIFO)."""
    with open_file(path, anchor) as (fd, st):
        h = hashes.sha1(b"blob %d\0" % st.st_size, size=st.st_size)
        while chunk := os.read(fd, CHUNK):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def open_file(path: str, anchor: Anchor | None) -> Iterator[tuple[int, os.stat_result]]:
    if anchor is not None:
        pfd, name = anchor.parent(path)
    else:
        pfd, name = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY), \
            os.path.basename(path)
    try:
        with open_regular(pfd, name) as item:
            yield item
    finally:
        os.close(pfd)


#: (path, lstat, directory meta digest, parent fd or None for a root, name in the parent)
WalkItem = tuple[str, os.stat_result, str, "int | None", str]


def walk(
    roots: list[Path], ignore: Callable[[str], bool], anchor: Anchor | None = None,
    *, shut_ok: bool = False,
) -> Iterator[WalkItem]:
    """Every path under ``roots`` (roots included) with its lstat, minus ignored subtrees.

    Directories are descended by descriptor (``openat`` with O_NOFOLLOW), so a
    directory swapped for a symlink while the walk runs is never followed; at most
    one descriptor per level is open. The parent fd in each item is valid only
    until the generator resumes. ``shut_ok``: an entry of a directory that is listed
    but shut (no search permission: its mode was changed) is passed over, not an
    error; the directory itself is yielded, so its mode change is seen.
    """
    for r in roots:
        held = anchor.fd_of(str(r)) if anchor is not None else None
        try:
            # the tree held since watching began, not whatever is at the path now
            rfd = (os.dup(held) if held is not None
                   else os.open(str(r), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except (FileNotFoundError, NotADirectoryError):
            continue
        try:
            yield str(r), os.fstat(rfd), dir_meta(rfd), None, ""
            yield from walk_dir(str(r), rfd, ignore, shut_ok=shut_ok)
        finally:
            os.close(rfd)


def walk_dir(top: str, top_fd: int, ignore: Callable[[str], bool], *, shut_ok: bool = False
             ) -> Iterator[WalkItem]:
    stack: list[tuple[str, int, Iterator[os.DirEntry[str]]]] = []

    def push(path: str, fd: int) -> None:
        try:
            with os.scandir(fd) as it:
                entries = list(it)
        except PermissionError as exc:
            os.close(fd)
            raise BaselineError(f"cannot list {path}: {exc.strerror}") from exc
        stack.append((path, fd, iter(entries)))

    push(top, os.dup(top_fd))
    try:
        while stack:
            path, fd, it = stack[-1]
            e = next(it, None)
            if e is None:
                stack.pop()
                os.close(fd)
                continue
            p = path + "/" + e.name
            if ignore(p):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except PermissionError:
                if shut_ok:
                    continue
                raise
            if not stat.S_ISDIR(st.st_mode):
                yield p, st, "", fd, e.name
                continue
            try:
                sub = open_dir_at(fd, e.name)
            except (FileNotFoundError, Unsafe):
                continue  # gone or swapped for something else: its own event says so
            except PermissionError as exc:
                raise BaselineError(f"cannot list {p}: {exc.strerror}") from exc
            try:
                yield p, os.fstat(sub), dir_meta(sub), fd, e.name
            except BaseException:
                os.close(sub)
                raise
            push(p, sub)
    finally:
        for _, fd, _ in stack:
            os.close(fd)


def differences(
    roots: list[Path], ignore: Callable[[str], bool], anchor: Anchor | None,
    last: dict[str, Sig | None], *, shut_ok: bool = False,
) -> tuple[list[tuple[str, Sig]], int]:
    """What :func:`walk` reads, compared path by path with ``last`` (path -> signature).

    Returns every walked path whose signature (:meth:`Sig.of` of its lstat, and of
    a directory's meta) differs from its entry in ``last``, or that has none, with
    its signature, in the walk's order (a directory before what is in it); and how
    many paths were walked. Every walked path is popped from ``last``: what is left
    there was not seen. The same walk as :func:`walk` (by descriptor, O_NOFOLLOW,
    ``shut_ok``), without an item per path: the final reconciliation runs it on every
    path after the command exits, and the command's user waits for it.
    """
    out: list[tuple[str, Sig]] = []
    pop, sig_of, add = last.pop, Sig.of, out.append
    walked = 0
    for r in roots:
        top = str(r)
        held = anchor.fd_of(top) if anchor is not None else None
        try:
            rfd = (os.dup(held) if held is not None
                   else os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except (FileNotFoundError, NotADirectoryError):
            continue
        try:
            walked += 1
            cur = sig_of(os.fstat(rfd), dir_meta(rfd))
            if cur != pop(top, None):
                add((top, cur))
            stack = [(top, rfd, _listing(top, rfd))]
        except BaseException:
            os.close(rfd)
            raise
        try:
            while stack:
                top, fd, it = stack[-1]
                under = top + "/"
                for e in it:
                    p = under + e.name
                    if ignore(p):
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    except PermissionError:
                        if shut_ok:
                            continue
                        raise
                    walked += 1
                    m = st.st_mode
                    if m & _S_IFMT == _S_IFREG:  # Sig.of's own route for a file, inlined
                        cur = _new(Sig, ("file", m & 0o7777, st.st_uid, st.st_gid, st.st_size,
                                         st.st_mtime_ns, st.st_ctime_ns, st.st_ino, ""))
                        if cur != pop(p, None):
                            add((p, cur))
                        continue
                    if not stat.S_ISDIR(m):
                        cur = sig_of(st)
                        if cur != pop(p, None):
                            add((p, cur))
                        continue
                    try:
                        sub = open_dir_at(fd, e.name)
                    except (FileNotFoundError, Unsafe):
                        continue  # gone or swapped for something else: its own event says so
                    except PermissionError as exc:
                        raise BaselineError(f"cannot list {p}: {exc.strerror}") from exc
                    try:
                        cur = sig_of(os.fstat(sub), dir_meta(sub))
                        if cur != pop(p, None):
                            add((p, cur))
                        listing = _listing(p, sub)
                    except BaseException:
                        os.close(sub)
                        raise
                    stack.append((p, sub, listing))
                    break  # what is in it first, then the rest of this directory
                else:
                    stack.pop()
                    os.close(fd)
        finally:
            for _, fd, _ in stack:
                os.close(fd)
    return out, walked


def _listing(path: str, fd: int) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as it:
            return iter(list(it))
    except PermissionError as exc:
        raise BaselineError(f"cannot list {path}: {exc.strerror}") from exc


def hash_file(path: str, anchor: Anchor | None = None) -> str:
    """SHA-256 of a regular file, read by descriptor (a FIFO or device is refused)."""
    with open_file(path, anchor) as (fd, _):
        return hash_fd(fd)[0]
