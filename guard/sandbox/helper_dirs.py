"""Directories a confined command writes: checked or made before it starts, removed after.

Holds what the helper (:mod:`guard.sandbox.helper`) does to directories before it
restricts anything: the plan directory made through real directories only
(:func:`plan_directory`) and checked to hold nothing but regular files of its own
(:func:`check_plan_directory`), the private temporary directory, given
(:func:`private_tmpdir`) or fresh (:func:`fresh_tmpdir`), and its removal whatever the
command left in it (:func:`remove_tree`, never following a symlink). It does not
hold the restriction itself (:mod:`guard.sandbox.landlock`, :mod:`guard.sandbox.namespaces`).

Stdlib only, nothing slow to import: it runs before every confined command.
"""

from __future__ import annotations

import errno
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from guard.sandbox.helper_args import Args

#: Prefix of the private temporary directories ``--private-tmp`` makes.
TMP_PREFIX = "guard-confined-"


def private_tmpdir(path: str) -> str:
    """Create ``path`` (mode 0700) if missing; refuse it unless it is a real directory of
    ours that nobody else may write (a planted symlink would widen the writable roots)."""
    parent = os.path.dirname(path)
    for p in (parent, path):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            p = p  # checked below like a new one (contextlib would cost start-up time)
        st = os.lstat(p)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(
                errno.EPERM,
                f"{p} is not a private directory of uid {os.geteuid()} (a symlink, another"
                " owner, or writable by others); remove it",
            )
    return path


def fresh_tmpdir(base: str | None = None, prefix: str = TMP_PREFIX) -> str:
    """A new, empty directory (mode 0700) named ``prefix`` and a random tail under ``base``
    (default: ``$TMPDIR`` when it is an absolute directory, else ``/tmp``): nothing can
    have been planted in it (a hard link to a project file, a FIFO), and it is never
    reused."""
    if base is None:
        base = os.environ.get("TMPDIR") or "/tmp"
        if not os.path.isabs(base) or not os.path.isdir(base):
            base = "/tmp"
    for _ in range(16):
        path = os.path.join(base, prefix + os.urandom(9).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.realpath(path)
    raise OSError(errno.EEXIST, f"cannot make a fresh private directory in {base}")


def remove_tree(path: str) -> bool:
    """Remove ``path`` and everything in it, whatever its depth, never following a symlink:
    one directory descriptor open at a time (no recursion, no path longer than a name),
    each directory entered with O_NOFOLLOW and left through ``..`` checked to be the one
    it came from; modes the command set are undone first. True when it is gone."""
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:
        fd = _open_dir(path, None)
        try:
            _empty(fd)
        finally:
            os.close(fd)
        os.rmdir(path)
    except OSError:
        return False
    return True


def _open_dir(name: str, dir_fd: int | None) -> int:
    """Open the directory ``name`` for listing, never through a symlink, after giving it
    mode 0700 (the command may have taken its owner's rights away)."""
    flags = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_DIRECTORY
    pin = os.open(name, os.O_PATH | flags, dir_fd=dir_fd)
    try:
        os.chmod(f"/proc/self/fd/{pin}", 0o700)
        return os.open(".", os.O_RDONLY | flags, dir_fd=pin)
    finally:
        os.close(pin)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _subdirectories(fd: int) -> list[str]:
    """Unlink every entry of the directory ``fd`` but its subdirectories; their names."""
    with os.scandir(fd) as listing:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
    for name, is_dir in entries:
        if not is_dir:
            os.unlink(name, dir_fd=fd)
    return [name for name, is_dir in entries if is_dir]


def _empty(top: int) -> None:
    """Empty the directory open as ``top`` (which stays open): depth first, holding one
    descriptor beside ``top``; a parent is reopened through ``..`` and must be the very
    directory it was (device and inode), else OSError: nothing is followed elsewhere."""
    fd = top
    # per level above the current one: the parent's identity, the name taken from it,
    # and the subdirectories of it still to do
    trail: list[tuple[tuple[int, int], str, list[str]]] = []
    todo = _subdirectories(fd)
    try:
        while True:
            if todo:
                name = todo.pop()
                child = _open_dir(name, fd)
                trail.append((_identity(fd), name, todo))
                if fd != top:
                    os.close(fd)
                fd = child
                todo = _subdirectories(fd)
                continue
            if not trail:
                return
            parent_id, name, todo = trail.pop()
            if trail:
                flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_DIRECTORY
                parent = os.open("..", flags, dir_fd=fd)
                if _identity(parent) != parent_id:
                    os.close(parent)
                    raise OSError(errno.ELOOP, "a directory moved while it was being removed")
            else:
                parent = top
            os.close(fd)
            fd = parent
            os.rmdir(name, dir_fd=fd)
            if not todo:
                todo = _subdirectories(fd)  # anything that appeared meanwhile
    finally:
        if fd != top:
            os.close(fd)


def plan_directory(path: str) -> str:
    """Create the plan directory ``path`` (canonical, absolute) and its missing parents
    before the restriction, so that the kernel can grant it: plan mode may create exactly
    that directory (``mkdir -p .openoxide/plans`` is allowed), and a rule needs an existing
    path. Nothing is created through a symlink: the deepest existing ancestor must be its
    own real path, and each created component must be a real directory."""
    path = os.path.abspath(path)
    missing: list[str] = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(os.path.basename(probe))
        probe = os.path.dirname(probe)
    if os.path.realpath(probe) != probe or not stat.S_ISDIR(os.lstat(probe).st_mode):
        raise OSError(
            errno.EPERM,
            f"{probe} is not a real directory (a symlink or a file); the plan directory {path}"
            " must be reached through real directories only",
        )
    for name in reversed(missing):
        probe = os.path.join(probe, name)
        try:
            os.mkdir(probe, 0o755)
        except FileExistsError:
            probe = probe  # checked below like a new one (contextlib costs start-up time)
        if not stat.S_ISDIR(os.lstat(probe).st_mode):
            raise OSError(errno.EPERM, f"{probe} is not a real directory; refusing {path}")
    return path


class PlanDirectoryHold:
    """The plan directory's own mode and times, held by descriptor from before the command
    starts: the command may write plan files in it (so the directory's mount is writable,
    and chmod and utime are no Landlock rights), and :meth:`restore` undoes what it did to
    the directory itself once it ended: its mode back, and times that went back (or into
    the future) set to now, so that the change still shows. With the walls up guard's
    supervisor refuses both while the command runs (:mod:`guard.sandbox.attrs`); this is
    the backstop where it does not answer: build mode, a command another guard supervises."""

    __slots__ = ("fd", "mode", "path", "times")

    def __init__(self, path: str) -> None:
        self.path = path
        self.times: tuple[int, int] = (0, 0)
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(self.fd)
        self.mode = stat.S_IMODE(st.st_mode)
        self.times = (st.st_atime_ns, st.st_mtime_ns)

    def restore(self) -> list[str]:
        """Undo what changed; what was undone, for the user (empty when nothing was)."""
        undone = []
        try:
            st = os.fstat(self.fd)
            if stat.S_IMODE(st.st_mode) != self.mode:
                os.chmod(self.fd, self.mode)
                undone.append(f"mode {oct(stat.S_IMODE(st.st_mode))} -> {oct(self.mode)}")
            now = time.time_ns()
            after = (st.st_atime_ns, st.st_mtime_ns)
            if any(a < b or a > now for a, b in zip(after, self.times, strict=True)):
                os.utime(self.fd, ns=(now, now))
                undone.append("times set back or ahead -> now")
        except OSError as exc:
            undone.append(f"could not restore it: {exc.strerror}")
        finally:
            try:  # noqa: SIM105 (contextlib would cost start-up time)
                os.close(self.fd)
            except OSError:
                pass
        return undone


_KINDS = {
    stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symlink", stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
}  # fmt: skip


def _unescape_mountinfo(field: str) -> str:
    """A mountinfo path field with its octal escapes (``\\040`` for a space) undone."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def host_read_only_mount(path: str) -> bool:
    """Whether the directory ``path`` is a mount point of its own, mounted read-only: what a
    host's sandbox puts inside a writable root it grants (Codex mounts the root's ``.git``
    read-only inside each one, the plan directory included). Nothing can be written,
    renamed or removed through it, so it cannot lead a confined command out of the plan
    directory. False whenever that cannot be read."""
    try:
        if not os.statvfs(path).f_flag & os.ST_RDONLY:
            return False
        real = os.path.realpath(path)
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split(" ")
                if len(fields) > 5 and _unescape_mountinfo(fields[4]) == real:
                    options = fields[5].split(",")
                    return "ro" in options
    except OSError:
        return False
    return False


def check_plan_directory(path: str) -> None:
    """Refuse (OSError naming the file) anything in the plan directory that could lead a
    confined command out of it: any entry but a regular file (a symlink, a FIFO a process
    outside reads, a socket, a device, a directory; a host sandbox's own read-only mount
    aside, :func:`host_read_only_mount`), and a regular file with a hard link
    outside the plan directory (planted while building: writing it would write the other
    name, ``src/app.py``). Links between two names inside it are fine."""
    links: dict[tuple[int, int], list[str]] = {}
    nlink: dict[tuple[int, int], int] = {}
    with os.scandir(path) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and host_read_only_mount(entry.path):
                continue  # a host sandbox's own read-only mount (Codex's .git): no way out
            if not stat.S_ISREG(st.st_mode):
                kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
                raise OSError(
                    errno.EPERM,
                    f"{entry.path} is {kind}; only regular plan files may be in the plan"
                    " directory while a command runs confined (a link, FIFO or device there"
                    " could lead out of it). Remove it",
                )
            key = (st.st_dev, st.st_ino)
            links.setdefault(key, []).append(entry.path)
            nlink[key] = st.st_nlink
    for key, names in links.items():
        if nlink[key] > len(names):
            raise OSError(
                errno.EPERM,
                f"{names[0]} has {nlink[key]} hard links, {nlink[key] - len(names)} of them"
                " outside the plan directory: a confined command writing it would change the"
                " other file too. Replace it with a copy of its own"
                f" (cp {names[0]} {names[0]}.copy && mv {names[0]}.copy"
                f" {names[0]}) or remove it",
            )


def makes_directories(args: Args) -> bool:
    """Whether the helper would create a directory on the host before the command starts
    (a missing plan directory, a private TMPDIR): then it waits for the go before anything.
    Otherwise it makes its namespaces and restricts itself at once, and waits for the go
    just before it starts the command (the helper's ``_go``): the set-up overlaps its caller's."""
    if args.private_tmp and not args.namespaces:
        return True
    if args.tmpdir is not None and not os.path.isdir(args.tmpdir):
        return True
    return not all(os.path.isdir(p) for p in args.plans)
