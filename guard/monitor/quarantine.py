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
import shutil
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from guard.audit import project_of
from guard.effects import GuardError
from guard.paths import Roots

MANIFEST = "manifest.json"
MOVING = "moving"  # a manifest written before its move: see _recover


class QuarantineError(GuardError):
    """A quarantine item cannot be found, read or restored."""


def quarantine_root(roots: Roots) -> Path:
    """``<worktree>/.openoxide/quarantine``, or ``<data>/quarantine/<key>`` without a worktree."""
    if roots.worktree is not None:
        return roots.worktree / ".openoxide" / "quarantine"
    return roots.data / "quarantine" / project_of(roots)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def _describe(path: str) -> dict[str, Any]:
    st = os.lstat(path)
    m = st.st_mode
    kind = "dir" if stat.S_ISDIR(m) else "symlink" if stat.S_ISLNK(m) else "file"
    return {"kind": kind, "mode": oct(stat.S_IMODE(m)), "size": st.st_size if kind == "file" else 0}


def move(src: str, dest: str) -> None:
    """rename(2); across file systems a copy that keeps metadata, then the source goes."""
    try:
        os.rename(src, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, dest, symlinks=True, copy_function=shutil.copy2)
            shutil.rmtree(src)
        else:
            shutil.copy2(src, dest, follow_symlinks=False)
            os.unlink(src)


@dataclass(frozen=True, slots=True)
class Item:
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
    """The quarantine of one session under ``root``."""

    def __init__(self, root: Path, session: str) -> None:
        self.root = root
        self.session = session
        self.session_dir = root / session

    def new_slot(self) -> Path:
        """A fresh ``<session>/<timestamp>`` directory (suffixed when the clock repeats)."""
        if not self.session_dir.is_dir():
            self.session_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            ignore = self.root / ".gitignore"
            if not ignore.exists():
                # keep quarantined versions out of `git status` and `git add -A`
                ignore.write_text("*\n", encoding="utf-8")
        base = _stamp()
        for n in range(1000):
            slot = self.session_dir / (base if n == 0 else f"{base}-{n}")
            try:
                slot.mkdir(mode=0o700)
                return slot
            except FileExistsError:
                continue
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
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return slot, dest

    @staticmethod
    def write_manifest(slot: Path, manifest: dict[str, Any]) -> None:
        """Replace the slot's manifest whole (a full disk leaves the old one and no temp file)."""
        tmp = slot / (MANIFEST + ".tmp")
        try:
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, slot / MANIFEST)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def put(self, path: str, rel: str, meta: dict[str, Any]) -> Item:
        """Move ``path`` into a new slot and write its manifest."""
        slot, dest = self.plan(rel)
        return self.finish(slot, dest, path, rel, meta)

    def finish(
        self, slot: Path, dest: Path, path: str, rel: str, meta: dict[str, Any]
    ) -> Item:
        manifest: dict[str, Any] = {
            "session": self.session,
            "timestamp": slot.name,
            "original": path,
            "rel": rel,
            "stored": str(dest.relative_to(slot)),
            **meta,
            "restored_at": None,
        }
        # Crash safety: the manifest exists before the move, so a version that was
        # moved is never in quarantine without one (see _recover for the rest).
        self.write_manifest(slot, {**manifest, "state": MOVING})
        described = _describe(path)
        if described["kind"] == "file":
            from guard.monitor.baseline import hash_file

            described["sha256"] = hash_file(path)
        move(path, str(dest))
        manifest = {**manifest, **described, **meta, "restored_at": None}
        self.write_manifest(slot, manifest)
        return Item(f"{self.session}/{slot.name}", slot, manifest)


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
    fixed.update(_describe(str(stored)))
    if fixed["kind"] == "file":
        from guard.monitor.baseline import hash_file

        fixed["sha256"] = hash_file(str(stored))
    Quarantine.write_manifest(slot, fixed)
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
    dest = os.path.abspath(to) if to else item.original
    if not os.path.lexists(src):
        sha = item.manifest.get("sha256")
        if sha and os.path.isfile(dest) and not os.path.islink(dest):
            from guard.monitor.baseline import hash_file

            if hash_file(dest) == sha:  # an interrupted restore moved it back already
                _mark_restored(item, dest)
                return [f"{item.id} was already back at {dest}; its manifest now says so"]
        raise QuarantineError(f"{item.id}: the quarantined copy {src} is missing")
    done: list[str] = []
    if os.path.lexists(dest):
        if not force:
            raise QuarantineError(
                f"{dest} exists; pass --force to move it into quarantine first and put"
                f" {item.id} back, or --to PATH to restore elsewhere"
            )
        q = Quarantine(item.dir.parent.parent, item.dir.parent.name)
        moved = q.put(dest, str(item.manifest.get("rel", os.path.basename(dest))),
                      {"event": "in the way of a restore", "restore_of": item.id})
        done.append(f"moved {dest} (in the way) to quarantine item {moved.id}")
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
        done.append(f"created {parent}")
    move(str(src), dest)
    done.append(f"restored {item.id} to {dest}")
    _mark_restored(item, dest)
    return done


def _mark_restored(item: Item, dest: str) -> None:
    manifest = dict(item.manifest)
    manifest["restored_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    manifest["restored_to"] = dest
    Quarantine.write_manifest(item.dir, manifest)
