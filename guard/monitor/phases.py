"""The baseline in two phases, so that a command need not wait for all of it.

**Phase 1** (:func:`prepare`; the command waits for it) takes what git does not
hold and what nobody could get back otherwise, after the watch is in place:

* one read of git's index and one ``git --no-optional-locks status`` (see
  :mod:`guard.monitor.gitstate`): git's own stat check, at git's speed;
* a copy of every file whose content git does not vouch for: untracked and not
  ignored, tracked but modified, assume-unchanged or skip-worktree, everything
  in a nested repository, and git's own metadata (``.git/`` without
  ``objects/`` and the index, which has its own copy).

A tracked file git status does not name is clean: its content is the index's
blob, already in the object database. It needs no copy, now or later.

**Phase 2** (:func:`complete`; runs while the command already works) walks the
trees for every path's ``lstat`` signature (the reconciliation scan compares
against it) and checks every blob the baseline relies on is in git's object
database. A path with an inotify event since phase 1 ended (or, when events were lost
since then, a tracked file the walk did not find or found changed from its blob, and a
file git status did not name) may have changed before the walk reached it, so its
baseline is taken from phase 1, never from the walk: its copy, git's blob (with the
stat data git cached for it), or "absent" (git status named neither it nor a nested
repository holding it).
Such paths are in :attr:`Baseline.exact`: a change to them is a violation like
any other, and ``--restore`` undoes it exactly. Ignored trees (``.venv``,
``node_modules``, anything git ignores) are listed but never read or copied:
they cannot be restored.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from guard.effects import GuardError
from guard.monitor import gitstate
from guard.monitor.baseline import Baseline
from guard.monitor.entries import DEFAULT_SIZE_CAP, Entry, Progress, Sig
from guard.monitor.fsops import Anchor, dir_meta
from guard.monitor.gitstate import IndexEntry
from guard.monitor.heldstore import HeldStore
from guard.monitor.treeread import git_blob_id, walk, walk_dir

IGNORED = "ignored by git: never copied, so it cannot be restored"
_2_32 = 1 << 32


def index_mtime_ns(worktree: Path | None) -> int:
    if worktree is None:
        return 0
    try:
        return os.stat(worktree / ".git" / "index").st_mtime_ns
    except OSError:
        return 0


def prepare(
    cls: type[Baseline],
    roots: list[Path],
    *,
    store: Path,
    worktree: Path | None,
    ignore: Callable[[str], bool],
    size_cap: int = DEFAULT_SIZE_CAP,
    progress: Progress | None = None,
    index_data: bytes | None = None,
) -> Baseline:
    """Phase 1. ``status`` stays None when git cannot vouch for anything (no
    repository, no git, an error): then :func:`complete` must run before the command."""
    start = time.perf_counter()
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    (store / "objects").mkdir(exist_ok=True)
    bl = cls(store=store, worktree=worktree, anchor=Anchor([str(r) for r in roots]),
             roots=list(roots), size_cap=size_cap, ignore=ignore, progress=progress,
             started=start, held=HeldStore(str(store)))
    bl.index_mtime = index_mtime_ns(worktree)
    untrusted: set[str] = set()
    git = worktree / ".git" if worktree is not None else None
    if worktree is not None and git is not None and git.exists():
        try:
            # git status runs while the index is read and the attributes are asked here
            proc = gitstate.status_start(worktree)
            config = None
            try:
                config = gitstate.config_start(worktree)  # for converted_paths, beside it
                no_index = False
                if index_data is None and git.is_dir():
                    try:
                        index_data = (git / "index").read_bytes()
                    except FileNotFoundError:
                        no_index = True  # nothing staged yet: git status names every file
                    except OSError:
                        pass
                quick = None
                if index_data is not None and gitstate.can_parse(worktree):
                    quick = gitstate.untrusted_names(index_data)
                if no_index:
                    bl.index = {}
                elif quick is None:
                    bl.index = gitstate.read_index_entries(worktree, index_data)
                    untrusted = {p for p, ie in bl.index.items() if not ie.trusted}
                else:  # the whole index is parsed in phase 2
                    bl.index_data = index_data
                    untrusted = {str(worktree) + "/" + n for n in quick}
                # filtered files (clean/smudge, eol): their bytes are not their blob's
                bl.filtered = gitstate.converted_paths(worktree, index_data, no_index, config)
            finally:
                if config is not None and config.returncode is None:  # not read: an error
                    config.kill()
                    config.communicate()
                bl.status = gitstate.status_end(worktree, proc)
            untrusted |= bl.filtered
        except (gitstate.GitStateError, OSError):
            bl.index, bl.status, bl.index_data = {}, None, None
    st = bl.status
    if st is not None:
        assert worktree is not None and git is not None
        for path in sorted(st.dirty | st.untracked | untrusted):
            if not ignore(path):
                _capture(bl, path)
        subtrees = sorted(st.untracked_dirs) + ([str(git)] if git.is_dir() else [])
        for top in subtrees:
            if not ignore(top):
                _capture_tree(bl, top)
    bl.stats.blocking = time.perf_counter() - start
    return bl


def _capture(bl: Baseline, path: str) -> None:
    """Record ``path`` as it is now (a file is read and copied); absent is recorded too."""
    bl.exact.add(path)
    try:
        pfd, name = bl.anchor.parent(path) if bl.anchor is not None else (-1, "")
    except OSError:
        return  # gone, or outside the watched trees
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            bl.entries[path] = bl.record(path, st, "", pfd, name, bl.index.get(path), bl.size_cap)
    except FileNotFoundError:
        pass
    finally:
        os.close(pfd)


def _capture_tree(bl: Baseline, top: str) -> None:
    """Record a directory and everything below it (a nested repository, ``.git``)."""
    assert bl.anchor is not None and bl.ignore is not None
    try:
        pfd, name = bl.anchor.parent(top)
    except OSError:
        return
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=pfd)
        try:
            bl.entries[top] = bl.record(top, os.fstat(fd), dir_meta(fd), pfd, name, None,
                                        bl.size_cap)
            bl.exact.add(top)
            for path, st, meta, cfd, cname in walk_dir(top, fd, bl.ignore):
                bl.entries[path] = bl.record(path, st, meta, cfd, cname, None, bl.size_cap)
                bl.exact.add(path)
        finally:
            os.close(fd)
    except OSError:
        pass
    finally:
        os.close(pfd)


def complete(bl: Baseline, events: Callable[[], set[str]],
             lost: Callable[[], bool] | None = None) -> None:
    """Phase 2. ``events()`` returns every path with an inotify event so far (after
    waiting until every event generated before the call was handled); ``lost()``, asked
    after it, says whether events were lost since phase 1 (a queue overflow, or a
    fanotify event its directory walk could not name yet). Then no path is trusted to
    have had no event: a tracked file the walk did not find may have been deleted
    before the walk got there, and its baseline is git's blob, as for an event."""
    st = bl.status
    assert bl.ignore is not None
    if bl.index_data is not None and bl.worktree is not None:
        bl.index = gitstate.read_index_entries(bl.worktree, bl.index_data)
        bl.index_data = None
    idx = bl.index
    dirty = st.dirty if st is not None else set()
    ignored = st.ignored if st is not None else set()
    ignored_dirs: set[str] = set()
    gitlinks = _prefixes([p for p, ie in idx.items() if ie.mode >> 12 == 0o16])
    wt = str(bl.worktree) + "/" if bl.worktree is not None else "\0"
    s = bl.stats
    mismatch: dict[str, IndexEntry] = {}
    unlisted: set[str] = set()
    n = clean_n = clean_bytes = 0
    exact, pre_early, entries = bl.exact, bl.pre_early, bl.entries
    index_mtime = bl.index_mtime
    git_vouches = st is not None
    progress = bl.progress
    if progress is not None:
        progress("scanning", 0, 0)
    for path, lst, meta, pfd, name in walk(bl.roots, bl.ignore, bl.anchor):
        n += 1
        if progress is not None and n % 500 == 0:
            progress("scanning", n, 0)
        if path in exact:
            continue  # taken in phase 1 (or absent then)
        mode = lst.st_mode
        if ignored and (path in ignored or path.rpartition("/")[0] in ignored_dirs):
            if stat.S_ISDIR(mode):
                ignored_dirs.add(path)  # the directory itself is recorded as usual
            else:
                s.ignored += 1
                entries[path] = Entry(path, Sig.of(lst), atime_ns=lst.st_atime_ns,
                                      unrestorable=IGNORED)
                continue
        ie = idx.get(path)
        if (git_vouches and ie is not None and ie.trusted and stat.S_ISREG(mode)
                and ie.mode >> 12 == 0o10 and path not in dirty and path not in pre_early):
            # clean per git status: the content is the blob, read nothing
            sig = Sig.of(lst)
            entries[path] = Entry(path, sig, lst.st_atime_ns, None, ie.blob)
            clean_n += 1
            clean_bytes += sig.size
            # git's stat data is the file's (bl.clean, inlined: every tracked file)
            if not ((sig.mtime_ns, sig.ctime_ns, sig.ino, sig.uid, sig.gid, sig.size % _2_32)
                    == (ie.mtime_ns, ie.ctime_ns, ie.ino, ie.uid, ie.gid, ie.size)
                    and ie.mtime_ns < index_mtime):
                mismatch[path] = ie
            continue
        entries[path] = bl.record(path, lst, meta, pfd, name, ie, bl.size_cap)
        if (st is not None and ie is None and not stat.S_ISDIR(mode) and path.startswith(wt)
                and path not in pre_early and not (gitlinks and _under(path, gitlinks))):
            unlisted.add(path)
    s.files += clean_n
    s.bytes += clean_bytes
    s.from_git += clean_n
    if bl.progress is not None:
        bl.progress("hashing", n, n)
    early = events()
    if st is not None and lost is not None and lost():
        early = early | {p for p, ie in idx.items()
                         if p not in bl.entries and ie.trusted and ie.mode >> 12 == 0o10
                         and p not in dirty and not bl.ignore(p)}
        # nor that one it did find was not changed or created before it got there
        early |= unlisted | _changed_unseen(bl, mismatch)
        # an event may be missing: a later one does not prove the walk read the path first
        bl.walk_early = None
    else:
        bl.walk_early = early
    if st is not None:
        _settle_early(bl, early, mismatch, unlisted)
        _check_blobs(bl, early)
    s.seconds = time.perf_counter() - bl.started


def take(
    roots: list[Path],
    *,
    store: Path,
    worktree: Path | None,
    ignore: Callable[[str], bool],
    size_cap: int = DEFAULT_SIZE_CAP,
    progress: Progress | None = None,
) -> Baseline:
    """Both phases at once, nothing changing meanwhile."""
    bl = prepare(Baseline, roots, store=store, worktree=worktree, ignore=ignore,
                 size_cap=size_cap, progress=progress)
    complete(bl, set)
    return bl


def _settle_early(
    bl: Baseline, early: set[str], mismatch: dict[str, IndexEntry], unlisted: set[str]
) -> None:
    """Paths with an event since phase 1: their baseline is their state in phase 1."""
    assert bl.status is not None
    umask = gitstate.umask()
    for path in early:
        if path in bl.pre_early or path in bl.exact:
            continue
        ie = bl.index.get(path)
        if path in unlisted:
            # git status named neither it nor a nested repository holding it: it did
            # not exist when the command started (the copy just taken is the agent's)
            bl.entries.pop(path, None)
            bl.exact.add(path)
        elif ie is None or not ie.trusted or path in bl.status.dirty or ie.mode >> 12 != 0o10:
            continue
        elif path in mismatch or path not in bl.entries:
            # changed (or deleted) before the walk reached it: git's blob and stat data
            bl.entries[path] = _from_index(path, ie, umask)
            bl.exact.add(path)
            _ancestors(bl, path, umask)
        elif bl.entries[path].blob == ie.blob and bl.entries[path].sha256 is None:
            bl.exact.add(path)  # the walk saw git's own stat data: before the change


def _changed_unseen(bl: Baseline, mismatch: dict[str, IndexEntry]) -> set[str]:
    """Events were lost: the clean tracked files the walk found with stat data other than
    git's that were changed before it read them. git status found their bytes to be their
    blob; one whose bytes are not (hashed now) or whose executable bit differs from git's
    was changed since, its event among the lost. A file that cannot be read counts as
    changed (its baseline is then git's, which can always be restored)."""
    out: set[str] = set()
    for path, ie in mismatch.items():
        e = bl.entries.get(path)
        if e is None or path in bl.exact or path in bl.pre_early:
            continue
        if bool(e.sig.mode & 0o100) != bool(ie.mode & 0o100):
            out.add(path)
            continue
        try:
            if git_blob_id(path, bl.anchor) != ie.blob:
                out.add(path)
        except (OSError, GuardError):
            out.add(path)
    return out


def _from_index(path: str, ie: IndexEntry, umask: int) -> Entry:
    """A clean tracked file that changed before the walk reached it: the blob, and the
    stat data git cached (its permission bits as git checks a file out)."""
    perm = (0o777 if ie.mode & 0o111 else 0o666) & ~umask
    sig = Sig("file", perm, ie.uid, ie.gid, ie.size, ie.mtime_ns, ie.ctime_ns, ie.ino)
    return Entry(path, sig, atime_ns=ie.mtime_ns, blob=ie.blob)


def _ancestors(bl: Baseline, path: str, umask: int) -> None:
    """Directories that held a file when the command started (deleted since)."""
    roots = {str(r) for r in bl.roots}
    p = os.path.dirname(path)
    while p not in roots and p not in bl.entries and len(p) > 1:
        bl.entries[p] = Entry(p, Sig("dir", 0o777 & ~umask, os.getuid(), os.getgid()))
        bl.exact.add(p)
        p = os.path.dirname(p)


def _check_blobs(bl: Baseline, early: set[str]) -> None:
    """Every blob the baseline relies on must be in git's object database; a file whose
    blob is missing is read and copied now, or (changed meanwhile) is not restorable."""
    assert bl.worktree is not None
    want = {e.blob for e in bl.entries.values() if e.blob is not None and e.sha256 is None}
    try:
        missing = gitstate.missing_blobs(bl.worktree, want)
    except (gitstate.GitStateError, OSError) as exc:
        missing = want
        bl.changed.setdefault(str(bl.worktree), f"git cat-file failed: {exc}")
    if not missing:
        return
    for e in list(bl.entries.values()):
        if e.blob not in missing or e.sha256 is not None:
            continue
        bl.stats.from_git -= 1
        if e.path in early:
            e.blob = None
            e.unrestorable = "its git blob is missing from the object database"
            bl.exact.discard(e.path)
            continue
        e.blob = None
        bl.reread.add(e.path)
        with contextlib.suppress(OSError):
            _capture(bl, e.path)
        bl.exact.discard(e.path)


def _prefixes(paths: object) -> tuple[str, ...]:
    return tuple(sorted({str(p) for p in paths}))  # type: ignore[attr-defined]


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)
