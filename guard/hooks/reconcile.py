"""What landed in a worktree while guard was not asked: a quick ``git status`` against
the state guard recorded when it first saw the host session.

:func:`take_start` records, once per host session, ``git --no-optional-locks status
--porcelain -z --untracked-files=all --no-renames`` with a digest of every path it
names (a file up to :data:`HASH_CAP` bytes by content, a larger one by size and
mtime); a small file's bytes are kept in guard's data directory so that it can be
put back. :func:`landed` runs the same status again and names every path whose
state differs: changed since the start, or clean at the start and changed now.
Plan files (``.openoxide/plans/``) are left out: plan mode may write them.

:func:`restore` undoes what landed with the monitor's own code: the version found
now goes to the quarantine (:class:`guard.monitor.Quarantine`, ``guard quarantine
restore`` brings it back), and the start's content is written back by
:meth:`guard.monitor.Baseline.restore` (from git's object database for a file that
was clean at the start, from the kept copy otherwise).
``--no-optional-locks``: the index is never rewritten by guard.
"""

# Lazy imports: the monitor in restore only: hook start-up speed (missed imports this).

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard.audit.logfile import now_iso
from guard.hooks.missed_store import file_key, missed_dir, write_json
from guard.paths import Roots

HASH_CAP = 1 << 20
MAX_PATHS = 2000
GIT_TIMEOUT = 8  # seconds: on the hook path, well inside the host's hook timeout
SKIP = (".openoxide/plans/",)
#: Starts known to be recorded (hookd answers many calls of one session).
_STARTED: set[Path] = set()


def _key_path(host: str, session: str | None, cwd: str | None, kind: str) -> Path:
    return missed_dir() / f"{kind}-{file_key(host, session, cwd)}.json"


def status(worktree: Path) -> dict[str, str]:
    """``git status`` of the worktree: path -> its two status letters."""
    proc = subprocess.run(
        ["git", "--no-optional-locks", "-C", str(worktree), "status", "--porcelain=v1", "-z",
         "--untracked-files=all", "--no-renames"],
        capture_output=True, stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"git status in {worktree} failed: {proc.stderr.decode(errors='replace').strip()}")
    out: dict[str, str] = {}
    for item in proc.stdout.split(b"\0"):
        if len(item) > 3:
            path = item[3:].decode("utf-8", "surrogateescape")
            if not path.startswith(SKIP):
                out[path] = item[:2].decode("ascii", "replace")
    return out


def _digest(path: Path) -> str:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return f"other:{stat.S_IFMT(st.st_mode)}"
    if st.st_size > HASH_CAP:
        return f"big:{st.st_size}:{st.st_mtime_ns}"
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        data = os.read(fd, HASH_CAP + 1)
    finally:
        os.close(fd)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _store(digest: str, path: Path) -> str | None:
    """Keep a small file's bytes under guard's data directory; the copy's path."""
    if not digest.startswith("sha256:"):
        return None
    dest = missed_dir() / "store" / digest.split(":", 1)[1]
    if dest.exists():
        return str(dest)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            data = os.read(fd, HASH_CAP + 1)
        finally:
            os.close(fd)
    except OSError:
        return None
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        return None  # it changed meanwhile
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, dest)
    return str(dest)


def take_start(worktree: Path | None, host: str, session: str | None, cwd: str | None) -> None:
    """Record the worktree's state for this host session, once (never raises)."""
    if worktree is None:
        return
    path = _key_path(host, session, cwd, "start")
    if path in _STARTED or path.exists():
        if len(_STARTED) > 4096:
            _STARTED.clear()
        _STARTED.add(path)
        return

    try:
        found = status(worktree)
        paths: dict[str, Any] = {}
        for rel, code in list(found.items())[:MAX_PATHS]:
            digest = _digest(worktree / rel)
            paths[rel] = {"status": code, "digest": digest, "copy": _store(digest, worktree / rel)}
        write_json(path, {"worktree": str(worktree), "at": now_iso(), "paths": paths,
                           "complete": len(found) <= MAX_PATHS})
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return  # without a start, landed() compares with the index


def landed(worktree: Path | None, host: str, session: str | None,
           cwd: str | None) -> dict[str, Any]:
    """What changed in the worktree since the session's start (never raises)."""
    if worktree is None:
        return {"error": "not in a git worktree: guard cannot tell what changed"}
    start: Mapping[str, Any] | None = None

    try:
        start = json.loads(_key_path(host, session, cwd, "start").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        start = None
    if isinstance(start, dict) and start.get("worktree") != str(worktree):
        start = None  # recorded for another worktree (a call from a nested repository)
    before: Mapping[str, Any] = start.get("paths", {}) if isinstance(start, dict) else {}
    base = (f"the session's start ({start.get('at')})" if isinstance(start, dict)
            else "git's index (guard has no record of the session's start)")
    try:
        now = status(worktree)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return {"base": base, "error": f"git status failed: {exc}"}
    changed: list[dict[str, Any]] = []
    for rel in sorted(set(now) | set(before)):
        old = before.get(rel)
        digest = _digest(worktree / rel)
        if isinstance(old, dict) and old.get("digest") == digest and now.get(rel) == old.get(
                "status"):
            continue
        what = "deleted" if digest == "absent" else (
            "added" if now.get(rel, "").startswith("?") and old is None else "modified")
        changed.append({"path": rel, "change": what})
    return {"base": base, "worktree": str(worktree), "paths": changed[:MAX_PATHS]}


def describe(report: Any) -> str:
    """One sentence for the model and the user."""
    if not isinstance(report, dict) or not report:
        return ""
    if report.get("error"):
        return f"guard could not tell what landed: {report['error']}"
    paths = report.get("paths") or []
    if not paths:
        return f"Nothing in the worktree differs from {report.get('base')}."
    names = ", ".join(f"{p['path']} ({p['change']})" for p in paths[:10])
    more = f" and {len(paths) - 10} more" if len(paths) > 10 else ""
    restored = report.get("restored")
    if isinstance(restored, list):
        return (f"Changed since {report.get('base')}: {names}{more}; guard undid it"
                f" ({'; '.join(str(r) for r in restored[:10])}): the versions that landed"
                " are in the quarantine (`guard quarantine list`)")
    return (f"Changed since {report.get('base')}: {names}{more}"
            " (`guard session resume --restore` puts them back)")


def start_of(host: str, session: str | None, cwd: str | None) -> dict[str, Any] | None:
    try:
        data = json.loads(_key_path(host, session, cwd, "start").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _index_entry(worktree: Path, rel: str) -> tuple[int, str] | None:
    """(mode, blob id) of ``rel`` in git's index, None when it is not tracked."""
    proc = subprocess.run(
        ["git", "--no-optional-locks", "-C", str(worktree), "ls-files", "-s", "-z", "--", rel],
        capture_output=True, stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT, check=False,
    )
    first = proc.stdout.split(b"\0")[0]
    if proc.returncode != 0 or not first:
        return None
    mode, blob = first.split(b" ")[:2]
    return (0o755 if mode.endswith(b"755") else 0o644), blob.decode("ascii")


def restore(
    report: Mapping[str, Any], start: Mapping[str, Any] | None, session_key: str
) -> list[str]:
    """Undo what ``report`` says landed (see the module's docstring). One line per path."""
    from guard.monitor.baseline import Baseline
    from guard.monitor.entries import Entry, Sig
    from guard.monitor.fsops import Anchor
    from guard.monitor.quarantine import Quarantine, quarantine_root

    given = report.get("worktree")
    if not isinstance(given, str):
        return [f"nothing restored: {report.get('error') or 'no worktree'}"]
    worktree = Path(given)
    if start is not None and start.get("worktree") != given:
        start = None  # recorded for another worktree: only git's index is trusted here
    before: Mapping[str, Any] = (start or {}).get("paths", {}) or {}
    roots = Roots.discover(str(worktree))
    anchor = Anchor([str(worktree)])
    quarantine = Quarantine(quarantine_root(roots), session_key, anchor)
    baseline = Baseline(store=worktree, worktree=worktree, anchor=anchor)
    lines: list[str] = []
    try:
        for item in report.get("paths") or []:
            rel = str(item.get("path"))
            path = str(worktree / rel)
            old = before.get(rel)
            try:
                if os.path.lexists(path):
                    moved = quarantine.put(path, rel, {"reason": "hook_missed: landed unguarded"})
                    lines.append(f"{rel}: quarantined ({moved.id})")
                entry: Entry | None = None
                owner, ns = os.stat(worktree), time.time_ns()
                if isinstance(old, dict):
                    if old.get("copy"):
                        entry = Entry(path, Sig("file", 0o644, owner.st_uid, owner.st_gid,
                                                mtime_ns=ns), atime_ns=ns, copy=str(old["copy"]))
                    elif old.get("digest") != "absent":
                        lines.append(f"{rel}: its content at the start was not kept; not put back")
                else:
                    found = _index_entry(worktree, rel)
                    if found is not None:
                        entry = Entry(path, Sig("file", found[0], owner.st_uid, owner.st_gid,
                                                mtime_ns=ns), atime_ns=ns, blob=found[1])
                if entry is not None:
                    baseline.entries[path] = entry
                    baseline.restore(path)
                    when = start.get("at") if start else "git's index"
                    lines.append(f"{rel}: put back as it was at the session's start ({when})")
            except Exception as exc:  # one path's trouble never stops the others
                lines.append(f"{rel}: not restored: {exc}")
    finally:
        anchor.close()
    return lines
