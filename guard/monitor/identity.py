"""Is the watched worktree still the tree the monitor holds? Its roots' (device, inode)
are compared with the ones taken at the start: a root renamed away, replaced or removed is
a violation of its own (rule monitor:worktree-identity).

With ``--restore`` it is undone. The tree the monitor holds by descriptor, when it still
exists, is put back at its path (``renameat2``: moved back, or exchanged in one step with
the directory that stood there, which then goes into quarantine). A tree that was removed
is recreated at its path (what stood there goes into quarantine) and every restore goes
to the path from then on: the roots' descriptors are rebound to the new directory, and a
reconciliation puts every path of the baseline back into it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from guard.audit import logfile
from guard.effects import Effect, EffectKind, GuardError
from guard.monitor.attribution import NO_ORIGIN
from guard.monitor.events import Violation, _is_under
from guard.monitor.fsops import identity, open_dir_at

if TYPE_CHECKING:
    from guard.monitor.view import MonitorView


def check_roots(m: MonitorView) -> list[Violation]:
    """Is every root path still the tree the monitor holds? A root renamed away,
    replaced (a copy put in its place) or removed is a violation of its own,
    reported once per state. Restores keep going into the tree held by descriptor;
    nothing is ever written into what now stands at the path."""
    with m.state.roots_lock:  # the settle thread and settle() both check: one undoes a swap
        return _check_roots(m)


def _check_roots(m: MonitorView) -> list[Violation]:
    found: list[Violation] = []
    for root, ident in m.state.root_ids.items():
        try:
            now: tuple[int, int] | None = identity(Path(root))
        except OSError:
            now = None
        if now == ident:
            m.state.root_reported.pop(root, None)
            continue
        held = m.anchor.fd_of(root)
        where = "unknown"
        if held is not None:
            with contextlib.suppress(OSError):
                where = os.readlink(f"/proc/self/fd/{held}")
            with contextlib.suppress(OSError):
                if os.fstat(held).st_nlink == 0:
                    where = "removed"
        if now is None:
            what = "removed" if where in ("removed", "unknown") or where.endswith(
                " (deleted)") else "moved"
        else:
            what = "replaced"
        state = f"{what}:{where}"
        if m.state.root_reported.get(root) == state:
            continue
        m.state.root_reported[root] = state
        detail = {
            "removed": "the watched tree was removed",
            "moved": f"the watched tree was renamed to {where}",
            "replaced": f"another directory now stands at the path; the watched tree is"
                        f" {'gone' if where in ('removed', 'unknown') else 'at ' + where}",
        }[what]
        action = "reported (watching without --restore)"
        if m.restore:
            try:
                action = _recover(m, root, ident, now, where)
                # back in place: the next swap or removal is a new state, never taken
                # for this one (reported once) and left alone
                m.state.root_reported.pop(root, None)
            except (OSError, GuardError) as exc:
                m.restore_failures += 1
                action = (f"restore failed: {exc}; nothing is written into what stands at the"
                          " path now")
        v = Violation(
            timestamp=logfile.now_iso(), session=m.session, agent=m.agent,
            event=f"root-{what}", path=root, rule="monitor:worktree-identity",
            reason="the watched worktree is not the tree the baseline was taken of",
            action_taken=action, effect="delete" if now is None else "write",
            detail=detail, **dict(NO_ORIGIN),
        )
        m.report(v)
        m.notify("error", f"{root}: {detail}; {action}")
        found.append(v)
    if found:
        m.flush()
    return found


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


def _renameat2(src: str, dst: str, flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), src, None, dst)


def carry_plans(m: MonitorView, root: str, copy: str) -> list[str]:
    """The plan files in the directory that stood at ``root`` (``copy`` now), written there
    by the agent as its policy allows, are written into the tree put back: a plan is
    never lost to the swap (the copy, with them, still goes into quarantine). Only
    regular files directly in the plan directory, within the size cap, whose path the
    policy lets the agent write; reached without following symlinks on either side."""
    if not _is_under(m.plans, root) or m.plans == root:
        return []
    done: list[str] = []
    try:
        src = os.open(copy, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        for part in os.path.relpath(m.plans, root).split("/"):
            nxt = open_dir_at(src, part)
            os.close(src)
            src = nxt
        for name in sorted(os.listdir(src)):
            dest = os.path.join(m.plans, name)
            if not m.guard.decide(m.agent, [Effect(EffectKind.WRITE, dest)]).allowed:
                continue
            data = _read_regular(src, name, m.size_cap)
            if data is None or _read_regular_path(m, dest, len(data[0]) + 1) == data[0]:
                continue
            dfd = m.anchor.dir(m.plans, create=True)
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                             | os.O_CLOEXEC, data[1], dir_fd=dfd)
                try:
                    os.write(fd, data[0])  # a plan is small (within the size cap)
                finally:
                    os.close(fd)
            finally:
                os.close(dfd)
            done.append(dest)
    except (OSError, GuardError) as exc:
        m.notify("error", f"the plan files written in {copy} could not all be put in place"
                          f" ({exc}); they are kept in quarantine with it")
    finally:
        os.close(src)
    return done


def _read_regular(dfd: int, name: str, cap: int) -> tuple[bytes, int] | None:
    """A regular file's bytes and permission bits (no set-id), or None (not one, too big)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        data = os.read(fd, cap + 1)
        return (data, stat.S_IMODE(st.st_mode) & 0o777) if len(data) <= cap else None
    finally:
        os.close(fd)


def _read_regular_path(m: MonitorView, path: str, cap: int) -> bytes | None:
    try:
        pfd, name = m.anchor.parent(path)
    except OSError:
        return None
    try:
        found = _read_regular(pfd, name, cap)
    finally:
        os.close(pfd)
    return None if found is None else found[0]


def _recover(m: MonitorView, root: str, ident: tuple[int, int], now: tuple[int, int] | None,
             where: str) -> str:
    """Put the watched tree back at ``root``; returns what was done (the violation's action)."""
    meta = {"agent": m.agent, "event": "root-replaced", "rule": "monitor:worktree-identity",
            "reason": "a directory put in place of the watched worktree", "effect": "write",
            "in_baseline": False}
    alive = where not in ("removed", "unknown") and not where.endswith(" (deleted)")
    if alive:
        if identity(Path(where)) != ident:
            raise GuardError(f"the watched tree is no longer at {where}")
        if now is None:
            _renameat2(where, root, _RENAME_NOREPLACE)
            return f"the watched tree was moved back from {where}"
        _renameat2(where, root, _RENAME_EXCHANGE)  # one step: no moment without a tree
        if identity(Path(root)) != ident:
            raise GuardError(f"{root} changed again while it was put back")
        plans = carry_plans(m, root, where)
        item = m.quarantine.put(where, "replaced-worktree/" + os.path.basename(root), meta)
        return (f"the watched tree was put back from {where}; the directory that stood in its"
                f" place moved to quarantine {item.id}"
                + (f"; the plan files written in it are in place: {', '.join(plans)}"
                   if plans else ""))
    aside = None
    if now is not None:  # what stands there now is the agent's: kept, never written into
        aside = f"{root}.guard-replaced-{os.urandom(4).hex()}"
        _renameat2(root, aside, _RENAME_NOREPLACE)
    entry = m.baseline.get(root) if m.baseline is not None else None
    os.mkdir(root, 0o700)
    parent = os.open(os.path.dirname(root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = open_dir_at(parent, os.path.basename(root))
    finally:
        os.close(parent)
    os.fchmod(fd, entry.sig.mode if entry is not None else 0o755)
    m.anchor.rebind(root, fd)
    with contextlib.suppress(OSError):
        os.close(m.quarantine.session_fd())  # sync's marker directory, in the new tree
    if m.baseline is not None and m.baseline.anchor is not None:
        m.baseline.anchor.rebind(root, os.dup(fd))
    st = os.fstat(fd)
    m.state.root_ids[root] = (st.st_dev, st.st_ino)
    m.state.root_reported.pop(root, None)
    m.expect_baseline(root)
    done = [f"the watched tree was removed: recreated at {root}, and every path of the"
            " baseline is restored into it (git's objects from their snapshot, other files"
            " from the copies the monitor holds)"]
    if aside is not None:
        item = m.quarantine.put(aside, "replaced-worktree/" + os.path.basename(root), meta)
        done.append(f"the directory that stood in its place moved to quarantine {item.id}")
    if m.backend is None or m.backend.backend != "fanotify":
        if m.barrier.root == root:
            m.barrier.unwatched()  # sync's marker would go where no watch sees it
        m.degrade("root-recreated", f"{root} was recreated: inotify does not watch it")
    m.wake("the watched tree was recreated")
    return "; ".join(done)
