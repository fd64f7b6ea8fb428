"""Quarantine: where violating versions go instead of being deleted.

Layout: ``<worktree>/.openoxide/quarantine/<session>/<timestamp>/<path>`` plus
``<timestamp>/manifest.json`` (without a worktree the quarantine lives under
guard's data directory, ``<data>/quarantine/<project key>/``). Items are
moved with ``rename(2)``, so bytes, mode, times and the inode itself are kept;
a restore moves them back the same way. Nothing in here is ever deleted by
guard.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

from guard.audit.logfile import iso_of, now_iso, project_of
from guard.effects import GuardError
from guard.monitor.fsops import (
    Anchor,
    copy_fd_to,
    describe_stable,
    inode_flags,
    kind_of,
    open_dir_at,
    open_regular,
    set_inode_flags,
    write_new_file,
)
from guard.monitor.treeread import hash_file
from guard.paths import Roots

MANIFEST = "manifest.json"
_SHUT = 0x10 | 0x20  # FS_IMMUTABLE_FL | FS_APPEND_FL
MOVING = "moving"  # a manifest written before its move: see _recover


class QuarantineError(GuardError):
    """A quarantine item cannot be found, read or restored."""


def quarantine_root(roots: Roots) -> Path:
    """``<worktree>/.openoxide/quarantine``, or ``<data>/quarantine/<key>`` without a worktree."""
    if roots.worktree is not None:
        return roots.worktree / ".openoxide" / "quarantine"
    return roots.data / "quarantine" / project_of(roots)


def _stamp() -> str:
    """Now, as ``%Y%m%dT%H%M%S.%fZ`` (UTC): a quarantine slot's name."""
    return iso_of(time.time_ns()).replace("-", "").replace(":", "")


def move_at(src_dfd: int, src_name: str, dst_dfd: int, dst_name: str) -> None:
    """renameat(2): the very object named in the source directory, never a symlink's target.

    Across file systems a regular file or symlink is copied (mode and times kept,
    read by descriptor) and the source unlinked; anything else is refused.
    """
    try:
        os.rename(src_name, dst_name, src_dir_fd=src_dfd, dst_dir_fd=dst_dfd)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    st = os.stat(src_name, dir_fd=src_dfd, follow_symlinks=False)
    if stat.S_ISREG(st.st_mode):
        with open_regular(src_dfd, src_name) as (fd, _):
            copy_fd_to(fd, dst_dfd, dst_name, stat.S_IMODE(st.st_mode))
    elif stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src_name, dir_fd=src_dfd), dst_name, dir_fd=dst_dfd)
    else:
        raise QuarantineError(
            f"{src_name}: a {kind_of(st.st_mode)} cannot be moved across file systems;"
            " left in place"
        )
    os.unlink(src_name, dir_fd=src_dfd)


def _open_parent(path: str, anchor: Anchor | None, *, create: bool = False) -> tuple[int, str]:
    """The parent's descriptor (without following, when anchored) and the last name."""
    if anchor is not None and anchor.covers(path):
        return anchor.parent(path, create=create)  # a symlink on the way: Unsafe, refused
    parent = os.path.dirname(path) or "."
    if create:
        os.makedirs(parent, exist_ok=True)
    return os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), os.path.basename(path)


def move(src: str, dest: str, anchor: Anchor | None = None) -> None:
    """Move ``src`` to ``dest`` by their parents' descriptors (see :func:`move_at`)."""
    sfd, sname = _open_parent(src, anchor)
    try:
        dfd, dname = _open_parent(dest, anchor, create=True)
        try:
            move_at(sfd, sname, dfd, dname)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


class Item(NamedTuple):
    """One quarantined version: ``<root>/<id>`` holds it and its manifest."""

    id: str  # <session>/<timestamp>
    dir: Path
    manifest: dict[str, Any]

    @property
    def stored(self) -> Path:
        return self.dir / str(self.manifest["stored"])

    @property
    def original(self) -> str:
        return str(self.manifest["original"])

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "dir": str(self.dir), **self.manifest}


class Quarantine:
    """The quarantine of one session under ``root``.

    With an ``anchor`` (the monitor's), every directory inside the watched trees
    is reached without following symlinks, so a quarantine directory swapped for
    a symlink by the agent is refused rather than written through.
    """

    def __init__(self, root: Path, session: str, anchor: Anchor | None = None) -> None:
        self.root = root
        self.session = session
        self.session_dir = root / session
        self.anchor = anchor
        #: what :meth:`check` found and put back (the monitor reports them)
        self.notes: list[str] = []

    def dir_fd(self, path: Path) -> int:
        """A descriptor of ``path`` (created), reached without following inside the trees."""
        p = str(path)
        if self.anchor is not None and self.anchor.covers(p):
            return self.anchor.dir(p, create=True)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def session_fd(self) -> int:
        """The session directory's descriptor (created, with the quarantine's .gitignore)."""
        rfd = self.dir_fd(self.root)
        try:
            # keep quarantined versions out of `git status` and `git add -A`
            with contextlib.suppress(FileExistsError):
                fd = os.open(".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o644, dir_fd=rfd)
                try:
                    os.write(fd, b"*\n")
                finally:
                    os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.session, 0o700, dir_fd=rfd)
            return open_dir_at(rfd, self.session)
        finally:
            os.close(rfd)

    def check(self, fd: int, path: Path) -> list[str]:
        """Before each use: the directory is ours (owner), only we may write it (mode),
        and no immutable or append-only flag shuts it. What guard can put back (the
        mode; the flags as root) it puts back and returns as tampering notes; what it
        cannot is a :class:`QuarantineError` naming the fix."""
        notes: list[str] = []
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise QuarantineError(
                f"quarantine directory {path} belongs to uid {st.st_uid}, not to guard"
                f" (uid {os.geteuid()}): move it aside so guard can create its own")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o700 != 0o700 or mode & 0o022:
            try:
                os.fchmod(fd, (mode | 0o700) & ~0o022)
            except OSError as exc:
                raise QuarantineError(
                    f"quarantine directory {path} has mode {mode:o} and guard cannot"
                    f" change it ({exc.strerror}): chmod u+rwx,go-w {path}") from None
            notes.append(f"{path} had mode {mode:o} (guard needs it writable and no one"
                         " else may write it): put back")
        flags = inode_flags(fd)
        if flags is not None and flags & _SHUT:
            try:
                set_inode_flags(fd, flags & ~_SHUT)
            except OSError as exc:
                raise QuarantineError(
                    f"quarantine directory {path} is immutable or append-only and guard"
                    f" cannot clear it ({exc.strerror}): chattr -i -a {path}") from None
            notes.append(f"{path} was made immutable or append-only: cleared")
        return notes

    def new_slot(self) -> Path:
        """A fresh ``<session>/<timestamp>`` directory (suffixed when the clock repeats)."""
        rfd = self.dir_fd(self.root)
        try:
            self.notes.extend(self.check(rfd, self.root))
        finally:
            os.close(rfd)
        sfd = self.session_fd()
        try:
            self.notes.extend(self.check(sfd, self.session_dir))
            base = _stamp()
            for n in range(1000):
                name = base if n == 0 else f"{base}-{n}"
                try:
                    os.mkdir(name, 0o700, dir_fd=sfd)
                    return self.session_dir / name
                except FileExistsError:
                    continue
        finally:
            os.close(sfd)
        raise QuarantineError(f"cannot create a quarantine slot under {self.session_dir}")

    @staticmethod
    def stored_name(rel: str) -> str:
        """Where ``rel`` goes inside its slot: itself, unless it would hide the manifest."""
        first, sep, rest = rel.partition("/")
        if first == MANIFEST:
            first = MANIFEST + ".quarantined"
        return first + sep + rest

    def plan(self, rel: str) -> tuple[Path, Path]:
        """(slot, destination) for quarantining the path ``rel``; the parents exist."""
        slot = self.new_slot()
        dest = slot / self.stored_name(rel)
        fd = self.dir_fd(dest.parent)
        os.close(fd)
        return slot, dest

    @staticmethod
    def write_manifest(
        slot: Path, manifest: dict[str, Any], anchor: Anchor | None = None
    ) -> None:
        """Replace the slot's manifest whole (a full disk leaves the old one and no temp file)."""
        _write_manifest(slot, manifest, anchor)

    def put(self, path: str, rel: str, meta: dict[str, Any]) -> Item:
        """Move ``path`` into a new slot and write its manifest."""
        slot, dest = self.plan(rel)
        return self.finish(slot, dest, path, rel, meta)

    def finish(
        self, slot: Path, dest: Path, path: str, rel: str, meta: dict[str, Any]
    ) -> Item:
        """Move ``path`` to ``dest`` (by descriptors), then describe what is stored.

        The manifest is written first (``state: moving``), so a version that was
        moved is never in quarantine without one (:func:`_recover` finishes an
        interrupted one). Size and SHA-256 are computed from the stored copy after
        the move, between two fstats that agree, so they describe exactly the bytes
        kept (``stable: false`` if a writer still holding the file kept changing it).
        """
        manifest: dict[str, Any] = {
            "session": self.session,
            "timestamp": slot.name,
            "original": path,
            "rel": rel,
            "stored": str(dest.relative_to(slot)),
            **meta,
            "restored_at": None,
        }
        _write_manifest(slot, {**manifest, "state": MOVING}, self.anchor)
        sfd, sname = _open_parent(path, self.anchor)
        try:
            dfd = self.dir_fd(dest.parent)
            try:
                move_at(sfd, sname, dfd, dest.name)
                described = describe_stable(dfd, dest.name)
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)
        manifest = {**manifest, **described, **meta, "restored_at": None}
        _write_manifest(slot, manifest, self.anchor)
        return Item(f"{self.session}/{slot.name}", slot, manifest)


def _write_manifest(slot: Path, manifest: dict[str, Any], anchor: Anchor | None = None) -> None:
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    if anchor is not None and anchor.covers(str(slot)):
        dfd = anchor.dir(str(slot))
    else:
        dfd = os.open(str(slot), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        tmp = MANIFEST + ".tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        try:
            fd = write_new_file(dfd, tmp, data, 0o600)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, MANIFEST, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)  # a full disk leaves the old manifest, no temp file
            raise
    finally:
        os.close(dfd)


def kept_stores(roots: Roots) -> list[Path]:
    """The monitor's baseline stores still on disk for this project: a monitor that is
    running, or one that stopped while something was not put back (its copies of it)."""
    base = roots.data / "monitor" / project_of(roots)
    try:
        return sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def list_items(root: Path, session: str | None = None) -> list[Item]:
    """Every item under ``root`` (or one session), oldest first."""
    if not root.is_dir():
        return []
    items: list[Item] = []
    sessions = [root / session] if session else sorted(p for p in root.iterdir() if p.is_dir())
    for sdir in sessions:
        if not sdir.is_dir():
            continue
        for slot in sorted(p for p in sdir.iterdir() if p.is_dir()):
            mpath = slot / MANIFEST
            if not mpath.is_file():
                continue
            manifest = _recover(slot, _load_manifest(mpath))
            if manifest is not None:
                items.append(Item(f"{sdir.name}/{slot.name}", slot, manifest))
    items.sort(key=lambda i: (i.manifest.get("timestamp", ""), i.id))
    return items


def _recover(slot: Path, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """Finish a quarantine that was interrupted (guard killed) between manifest and move.

    Moved: the manifest is completed from the stored copy, exactly what is kept.
    Not moved: the version is still in place and the slot holds nothing (None).
    """
    if manifest.get("state") != MOVING:
        return manifest
    stored = slot / str(manifest["stored"])
    if not os.path.lexists(stored):
        return None
    fixed = {k: v for k, v in manifest.items() if k != "state"}
    pfd = os.open(str(stored.parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fixed.update(describe_stable(pfd, stored.name))
    finally:
        os.close(pfd)
    _write_manifest(slot, fixed)
    return fixed


def _load_manifest(mpath: Path) -> dict[str, Any]:
    try:
        value = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise QuarantineError(
            f"{mpath}: unreadable manifest ({exc}); the item's files are still in {mpath.parent}"
        ) from exc
    if not isinstance(value, dict) or "original" not in value or "stored" not in value:
        raise QuarantineError(f"{mpath}: not a quarantine manifest (no 'original'/'stored' keys)")
    return value


def get_item(root: Path, item_id: str) -> Item:
    """The item ``<session>/<timestamp>``; a unique prefix of the timestamp also works."""
    items = list_items(root)
    exact = [i for i in items if i.id == item_id]
    if exact:
        return exact[0]
    matches = [i for i in items if i.id.startswith(item_id) or i.dir.name == item_id]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise QuarantineError(
            f"no quarantine item {item_id!r} under {root}; `guard quarantine list` shows the ids"
        )
    raise QuarantineError(
        f"{item_id!r} matches {len(matches)} items under {root}; give the full"
        f" <session>/<timestamp> id (e.g. {matches[0].id})"
    )


def restore_item(item: Item, *, to: str | None = None, force: bool = False) -> list[str]:
    """Move a quarantined version back to its original path (or ``to``).

    When something is at the destination, refuse unless ``force``; with
    ``force`` the thing in the way is quarantined first (a new item next to
    this one) so nothing is lost. Returns lines saying what was done.
    """
    if item.manifest.get("restored_at"):
        raise QuarantineError(
            f"{item.id} was already restored at {item.manifest['restored_at']}"
            f" to {item.manifest.get('restored_to', item.original)}"
        )
    src = item.stored
    qroot = item.dir.parent.parent
    bases = [str(qroot)]
    if qroot.name == "quarantine" and qroot.parent.name == ".openoxide":
        bases.append(str(qroot.parent.parent))  # the worktree: reached without following
    anchor = Anchor(bases)
    try:
        return _restore_item(item, src, anchor, to=to, force=force)
    finally:
        anchor.close()


def _restore_item(
    item: Item, src: Path, anchor: Anchor, *, to: str | None, force: bool
) -> list[str]:
    dest = os.path.abspath(to) if to else item.original
    if anchor.lstat(str(src)) is None:
        sha = item.manifest.get("sha256")
        if sha and os.path.isfile(dest) and not os.path.islink(dest):
            on = anchor if anchor.covers(dest) else None
            if hash_file(dest, on) == sha:  # an interrupted restore moved it back already
                _mark_restored(item, dest, anchor)
                return [f"{item.id} was already back at {dest}; its manifest now says so"]
        raise QuarantineError(f"{item.id}: the quarantined copy {src} is missing")
    done: list[str] = []
    in_the_way = anchor.lstat(dest) if anchor.covers(dest) else _lstat(dest)
    if in_the_way is not None:
        if not force:
            raise QuarantineError(
                f"{dest} exists; pass --force to move it into quarantine first and put"
                f" {item.id} back, or --to PATH to restore elsewhere"
            )
        q = Quarantine(item.dir.parent.parent, item.dir.parent.name, anchor)
        moved = q.put(dest, str(item.manifest.get("rel", os.path.basename(dest))),
                      {"event": "in the way of a restore", "restore_of": item.id})
        done.append(f"moved {dest} (in the way) to quarantine item {moved.id}")
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        done.append(f"created {parent}")
    move(str(src), dest, anchor)
    done.append(f"restored {item.id} to {dest}")
    _mark_restored(item, dest, anchor)
    return done


def _mark_restored(item: Item, dest: str, anchor: Anchor | None = None) -> None:
    manifest = dict(item.manifest)
    manifest["restored_at"] = now_iso()
    manifest["restored_to"] = dest
    _write_manifest(item.dir, manifest, anchor)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
