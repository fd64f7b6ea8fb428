"""Durable, multi-process safe storage: atomic replace and an exclusive file lock."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from guard import locking


def fsync_dir(directory: Path) -> None:
    """Make a rename inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` so readers see the old or the new content, never a mix.

    A temporary file in the same directory is written, fsynced and renamed over
    ``path``; a symlink at ``path`` is replaced, never followed.
    """
    directory = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created if missing) for the block;
    :class:`guard.locking.LockTimeout` when it stays held past the deadline."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        locking.flock(fd, str(lock_path))
        yield
    finally:
        os.close(fd)


def append_line(path: Path, line: str) -> None:
    """Append one line to a JSONL file under an exclusive lock, in a single write."""
    append_lines(path, [line])


def append_lines(path: Path, lines: list[str], *, sync: bool = True) -> None:
    """Append ``lines`` to a JSONL file under an exclusive lock, in a single write.

    A failed write is taken back (all lines or none). ``sync=False`` leaves the
    fsync to the caller (a buffered writer that syncs batches in the background).
    """
    data = b"".join((line.rstrip("\n") + "\n").encode("utf-8") for line in lines)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        locking.flock(fd, str(path))
        size = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # a full disk: take back the partial lines
            raise
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_nofollow(path: Path) -> str | None:
    """The text of ``path``, refusing to follow a symlink there; None when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as handle:
        return handle.read()
