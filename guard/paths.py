"""Roots, the plan directory, and path canonicalization.

Every path the evaluator sees has been through :func:`canonicalize`: ``~``
expanded, made absolute against the call's cwd, symlinks resolved (keeping
the link's own location too, so both can be checked), non-existent tails
resolved through their nearest existing ancestor.
"""

# Lazy imports: platformdirs only where its answer is not read from the environment (start-up).

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from guard.effects import GuardError
from guard.pathcache import CACHE
from guard.record import Record
from guard.record import set_field as _set
from guard.sha import sha256

VCS_MARKERS = (".git", ".hg", ".jj", ".svn")
APP_NAME = "openoxide"
PLANS_SUBDIR = Path(".openoxide") / "plans"
ROOT_NAMES = ("worktree", "plans", "data", "home", "tmp")

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PathError(GuardError):
    """A path that cannot be decided on safely (control characters, loops...)."""


def find_worktree(start: str | os.PathLike[str]) -> Path | None:
    """The nearest ancestor of ``start`` (itself included) holding a VCS marker."""
    here = Path(os.path.realpath(start))
    for candidate in (here, *here.parents):
        for marker in VCS_MARKERS:
            if os.path.lexists(candidate / marker):
                return candidate
    return None


def data_dir() -> Path:
    """guard's per-user data directory (policies of its own, audit logs, fallback plans)."""
    return Path(os.path.realpath(_user_data_dir()))


def _user_data_dir() -> str:
    """platformdirs' ``user_data_dir(APP_NAME, appauthor=False)``, read from the environment
    where every platformdirs 4 computes it the same way (Linux, an absolute ``$HOME``,
    ``$XDG_DATA_HOME`` absolute or unset), platformdirs itself elsewhere."""
    env = os.environ
    xdg = env.get("XDG_DATA_HOME", "")
    home = env.get("HOME", "")
    if (
        sys.platform == "linux"
        and not hasattr(sys, "getandroidapilevel")
        and env.get("ANDROID_DATA") is None
        and home.startswith("/")
        and (xdg == "" or xdg.startswith("/"))
    ):
        base = xdg or os.path.expanduser("~/.local/share")
        return os.path.join(base, APP_NAME)
    import platformdirs

    return platformdirs.user_data_dir(APP_NAME, appauthor=False)


def temp_dir() -> str:
    """``tempfile.gettempdir()``, without importing tempfile (shutil, random) where nothing
    has: the first of $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp and here in which a new
    file can be written, found once per process."""
    global _TEMP_DIR
    if "tempfile" in sys.modules:  # its answer (and a tempdir someone set there)
        found: str = sys.modules["tempfile"].gettempdir()
        return found
    if _TEMP_DIR is not None:
        return _TEMP_DIR
    candidates = [d for n in ("TMPDIR", "TEMP", "TMP") if (d := os.environ.get(n, ""))]
    candidates += ["/tmp", "/var/tmp", "/usr/tmp"]
    try:
        candidates.append(os.getcwd())
    except OSError:
        candidates.append(os.curdir)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for d in candidates:
        if d != os.curdir:
            d = os.path.abspath(d)
        for _ in range(100):
            name = os.path.join(d, "tmp" + os.urandom(6).hex())
            try:
                fd = os.open(name, flags, 0o600)
                try:
                    try:
                        os.write(fd, b"blat")
                    finally:
                        os.close(fd)
                finally:
                    os.unlink(name)
            except FileExistsError:
                continue
            except OSError:
                break  # no point trying more names here
            _TEMP_DIR = d
            return d
    raise FileNotFoundError(errno.ENOENT, f"no usable temporary directory in {candidates}")


_TEMP_DIR: str | None = None


def project_key(directory: str | os.PathLike[str]) -> str:
    """A readable key, stable per directory: ``<basename>-<10 hex of its real path>``."""
    real = os.path.realpath(directory)
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(real)).strip("-.") or "root"
    digest = sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{base[:40]}-{digest}"


@dataclass(frozen=True, slots=True)
class PlanDir:
    path: Path
    worktree: Path | None
    reason: str

    def to_json(self) -> dict[str, str | None]:
        return {
            "path": str(self.path),
            "worktree": str(self.worktree) if self.worktree else None,
            "reason": self.reason,
        }


def check_plan_dir(worktree: Path, plans: Path) -> None:
    """Refuse a worktree's plan directory that is not plainly ``<worktree>/.openoxide/plans``.

    The plan directory is the one place a plan-mode agent may write (the
    evaluator's allow rules and ``guard run``'s Landlock rules both grant it).
    A repository that ships ``.openoxide/plans -> ../src`` (or ``.openoxide``
    as a link) would make that place its source tree, so a symlink on the way,
    or a real path outside ``<worktree>/.openoxide/``, is a clear error.
    ``worktree`` must be a real path. Raises :class:`PathError`.
    """
    base = worktree / PLANS_SUBDIR.parent
    for p in (base, plans):
        if os.path.islink(p):
            raise PathError(
                f"the plan directory {plans} is reached through a symlink ({p} ->"
                f" {os.readlink(p)}); guard refuses it, since a link can point into the project"
                f" and make it writable in plan mode. Replace it with a real directory:"
                f" rm {p} && mkdir -p {plans}"
            )
        if os.path.lexists(p) and not os.path.isdir(p):
            raise PathError(f"{p} is not a directory; guard needs {plans} to be one (remove {p})")
    real = Path(os.path.realpath(plans))
    if real == base or base not in real.parents:
        raise PathError(
            f"the plan directory {plans} resolves to {real}, outside {base}/; guard refuses it"
        )


def plan_file_problem(
    canon: CanonicalPath, text: str, plans: Path, creates: str = ""
) -> str | None:
    """Why writing ``canon`` (spelled ``text``) inside ``plans`` is not writing a plan file.

    A plan file is a regular file directly in the plan directory: a name spelled
    as a directory (``d.md/``), or an existing directory, FIFO, socket or device
    named like a plan file is refused, and so is a write that ``creates``
    something other than a regular file (:attr:`guard.effects.Effect.creates`: a
    symlink, a FIFO...) in the plan directory or at its own path. None when the
    write is not inside ``plans`` or is a regular file (existing or not).
    """
    inside = str(plans).rstrip("/") + "/"
    real = canon.real
    if not real.startswith(inside) or real == inside:
        return _not_regular(text, creates) if creates and real == str(plans) else None
    if text.endswith("/") or text.endswith("/."):
        return f"{text!r} names a directory; a plan file is a regular file"
    if canon.mode and not stat.S_ISREG(canon.mode):
        return (
            f"{canon.real} is {_file_kind(canon.mode)}, not a regular file; refused as a plan file"
        )
    return _not_regular(text, creates) if creates else None


def _not_regular(text: str, creates: str) -> str:
    return f"{text!r} would be {creates}; a plan file is a regular file"


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def plan_dir(cwd: str | os.PathLike[str] | None = None, worktree: Path | None = None) -> PlanDir:
    """Where plan artifacts live for ``cwd`` (or an explicit worktree), and why.

    Raises :class:`PathError` for a worktree whose plan directory is a symlink or
    resolves outside ``<worktree>/.openoxide/`` (:func:`check_plan_dir`).
    """
    start = Path(os.path.realpath(cwd if cwd is not None else os.getcwd()))
    if worktree is not None:
        wt = Path(os.path.realpath(worktree))
        check_plan_dir(wt, wt / PLANS_SUBDIR)
        return PlanDir(wt / PLANS_SUBDIR, wt, f"worktree given explicitly: {wt}")
    found = find_worktree(start)
    if found is not None:
        marker = next(m for m in VCS_MARKERS if os.path.lexists(found / m))
        check_plan_dir(found, found / PLANS_SUBDIR)
        return PlanDir(
            found / PLANS_SUBDIR,
            found,
            f"{start} is inside a worktree ({marker} found in {found})",
        )
    key = project_key(start)
    return PlanDir(
        data_dir() / "plans" / key,
        None,
        f"no version control marker ({', '.join(VCS_MARKERS)}) in {start} or any parent:"
        f" global fallback under the user data directory, project key {key}",
    )


@dataclass(frozen=True, slots=True)
class Roots:
    """The named roots patterns anchor to. All paths are real (symlink-free)."""

    worktree: Path | None
    plans: Path
    data: Path
    home: Path
    tmp: Path
    plans_reason: str = ""

    @classmethod
    def discover(
        cls,
        cwd: str | os.PathLike[str] | None = None,
        worktree: str | os.PathLike[str] | None = None,
    ) -> Roots:
        pd = plan_dir(cwd, Path(worktree) if worktree is not None else None)
        return cls(
            worktree=pd.worktree,
            plans=Path(os.path.realpath(pd.path)),
            data=data_dir(),
            home=Path(os.path.realpath(os.path.expanduser("~"))),
            tmp=Path(os.path.realpath(temp_dir())),
            plans_reason=pd.reason,
        )

    def get(self, name: str) -> Path | None:
        if name not in ROOT_NAMES:
            raise KeyError(name)
        value: Path | None = getattr(self, name)
        return value

    def describe(self, path: str) -> str:
        """``{plans}/x.md``-style rendering of an absolute path, for messages."""
        for prefix, name in self._prefixes():
            if path.startswith(prefix):
                return name + "/" + path[len(prefix) :]
            if path == prefix[:-1]:
                return name
        return path

    def _prefixes(self) -> list[tuple[str, str]]:
        """(root + "/", "{name}"), the most specific root first."""
        cached: list[tuple[str, str]] | None = _PREFIX_CACHE.get(self)
        if cached is None:
            pairs = []
            for name in ("plans", "worktree", "data", "tmp", "home"):
                root = self.get(name)
                if root is not None:
                    pairs.append((str(root).rstrip("/") + "/", "{" + name + "}"))
            cached = _PREFIX_CACHE[self] = sorted(pairs, key=lambda p: -len(p[0]))
        return cached


_PREFIX_CACHE: dict[Roots, list[tuple[str, str]]] = {}


class CanonicalPath(Record):
    """A path after canonicalization (frozen).

    ``link`` is where the name lives (parents resolved, last component kept);
    ``real`` is what it finally refers to. They differ when the last
    component is a symlink; both must be allowed.
    """

    __slots__ = ("is_dir", "link", "mode", "nlink", "real")
    __match_args__ = ("link", "real", "is_dir", "nlink", "mode")

    link: str
    real: str
    is_dir: bool
    nlink: int
    #: st_mode of what ``real`` is (0: it does not exist)
    mode: int

    def __init__(self, link: str, real: str, is_dir: bool, nlink: int, mode: int = 0) -> None:
        _set(self, "link", link)
        _set(self, "real", real)
        _set(self, "is_dir", is_dir)
        _set(self, "nlink", nlink)
        _set(self, "mode", mode)

    @property
    def candidates(self) -> tuple[str, ...]:
        return (self.real,) if self.link == self.real else (self.link, self.real)


def check_text(path: str) -> None:
    if _CONTROL.search(path):
        bad = _CONTROL.search(path)
        assert bad is not None
        raise PathError(
            f"path {path!r} contains a control character ({bad.group()!r} at offset"
            f" {bad.start()}); such names are refused"
        )


#: per-process magic links: they resolve in the process that opens them, which for the
#: hook daemon (cwd /, another pid) is not the agent's process
_MAGIC = re.compile(r"/proc/(self|thread-self|\d+)|/dev/(fd|stdin|stdout|stderr)")
#: the descriptor names a redirection may use as they are
_PLAIN_DESCRIPTORS = re.compile(r"/dev/(fd/\d+|stdout|stderr|null|tty)")


def magic_link(full: str) -> str | None:
    """The per-process magic link an absolute ``full`` path goes through (following
    symlinks as the kernel does, ``..`` after them included), or None."""
    if _PLAIN_DESCRIPTORS.fullmatch(full):
        return None
    todo = [c for c in reversed(full.split("/")) if c]
    cur = "/"
    for _ in range(4096):
        if not todo:
            return None
        c = todo.pop()
        if c == ".":
            continue
        if c == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, c)
        if _MAGIC.fullmatch(nxt):
            return nxt
        try:
            target = os.readlink(nxt)
        except OSError:
            cur = nxt
            continue
        if target.startswith("/"):
            cur = "/"
        todo.extend(c for c in reversed(target.split("/")) if c)
    return None


_DIR_FLAGS = getattr(os, "O_PATH", 0) | os.O_DIRECTORY | os.O_CLOEXEC


def _kernel_dir(head: str, tail: str) -> tuple[str, os.stat_result | None] | None:
    """The kernel's resolution of the existing directory ``head``, and the ``lstat`` of
    ``tail`` inside it (None: missing or unreadable), or None.

    One ``open(O_PATH | O_DIRECTORY)`` (symlinks and ``..`` resolved by the kernel,
    as any later open by the agent would), one ``readlink`` of its
    ``/proc/self/fd`` entry and one ``fstatat`` of the name relative to that
    descriptor: four system calls instead of one ``lstat`` per component. None
    when that is not a plain answer (no ``/proc``, no ``O_PATH``, a missing or
    unreachable directory, a deleted one): the caller then resolves component by
    component as :func:`os.path.realpath` does.
    """
    if not _DIR_FLAGS & getattr(os, "O_PATH", 0):
        return None
    try:
        fd = os.open(head, _DIR_FLAGS)
    except (OSError, ValueError):
        return None
    st: os.stat_result | None = None
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
        # missing (or unreadable: the caller's stat says so, as before)
        with contextlib.suppress(OSError):
            st = os.stat(tail, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not real.startswith("/") or real.endswith(" (deleted)") or "//" in real:
        return None
    return real, st


def _kernel_missing(head: str) -> tuple[str, None] | None:
    """:func:`_kernel_dir` for a ``head`` that does not exist: the kernel resolves its
    nearest existing ancestor, and the missing rest is appended as it is spelled.

    Only when that rest is plain names (no ``.``, ``..``) and its first name is
    really absent (not a file, a dangling link or an unreadable entry); otherwise
    None, and the caller resolves component by component.
    """
    rest: list[str] = []
    anc = head
    while True:
        anc, name = os.path.split(anc)
        if name in ("", ".", ".."):
            return None
        rest.append(name)
        found = _kernel_dir(anc, name)
        if found is None:
            continue  # this ancestor is missing too (or not plain: found at the top)
        real_anc, st = found
        if st is not None:
            return None  # it exists after all (a file, a link...): not plainly missing
        rest.reverse()
        return (real_anc if real_anc != "/" else "") + "/" + "/".join(rest), None


def canonicalize(path: str, cwd: str | os.PathLike[str], *, write: bool = False) -> CanonicalPath:
    """Resolve ``path`` as the kernel would, from ``cwd``. Raises PathError.

    With ``write``, a path through a per-process magic link (``/proc/self/...``,
    ``/dev/fd/../...``) is refused: guard would resolve it in its own process.

    Answers that went through no symlink are kept in :data:`guard.pathcache.CACHE`,
    which drops them as soon as the kernel reports a change that could alter them
    (see that module for why a kept answer is always the disk's current one).
    """
    if not isinstance(path, str) or not path or path[0] == "~":
        return _resolve(path, cwd, write=write)
    base = cwd if isinstance(cwd, str) else os.fspath(cwd)
    key = (path, base)
    hit: CanonicalPath | None = CACHE.get(key)
    if hit is not None:
        return hit
    full = path if path[0] == "/" else base.rstrip("/") + "/" + path if base[:1] == "/" else ""
    gen = None
    if full[:1] == "/" and "/../" not in full and not full.endswith("/.."):
        norm = os.path.normpath(full)
        gen = CACHE.prepare(key, norm)
    answer = _resolve(path, base, write=write)
    if gen is not None and answer.link == answer.real == norm:
        CACHE.store(key, gen, answer)
    return answer


def warm_path_cache(directory: str) -> None:
    """Start the canonical-path cache now, watching the way to ``directory`` (the working
    directory of a long-lived process, whose calls ask about paths below it).

    The first watch of a directory that nothing watches yet can be slow when many of its
    entries are cached (the kernel marks each of them: tens of milliseconds for a busy
    ``/tmp``); taken here, at start-up, it lands on no call. A path that cannot be
    resolved is left to the calls.
    """
    CACHE.activate()
    for _ in range(2):  # kept, and its way watched, from its second resolution on
        try:
            canonicalize(directory, directory)
        except PathError:
            return


def _resolve(path: str, cwd: str | os.PathLike[str], *, write: bool) -> CanonicalPath:
    """:func:`canonicalize` without the cache."""
    if not isinstance(path, str):
        raise PathError(f"path must be a string, got {type(path).__name__}")
    if path == "":
        raise PathError("empty path")
    check_text(path)
    expanded = os.path.expanduser(path) if path.startswith("~") else path
    if expanded.startswith("~"):
        raise PathError(f"cannot expand {path!r}: no such user")
    full = os.path.join(os.fspath(cwd), expanded)
    if not os.path.isabs(full):
        full = os.path.join(os.getcwd(), full)
    head, tail = os.path.split(full.rstrip("/") or "/")
    st: os.stat_result | None = None
    try:
        here = _kernel_dir(head, ".") if tail == "." else None
        if here is not None:  # "dir/.": the directory itself
            real = link = here[0]
            st = here[1]
            linked = real != os.path.normpath(full)
        elif tail in ("", ".", ".."):
            real = link = os.path.realpath(full)
            linked = real != os.path.normpath(full)
        else:
            # the parent resolved once (by the kernel when it exists, or its nearest
            # existing ancestor); the name needs resolving only if it is a link
            resolved = _kernel_dir(head, tail) or _kernel_missing(head)
            if resolved is None:
                real_head = os.path.realpath(head)
                link = os.path.join(real_head, tail)
                linked = os.path.islink(link)
            else:
                real_head, st = resolved
                link = real_head + "/" + tail if real_head != "/" else "/" + tail
                linked = st is not None and stat.S_ISLNK(st.st_mode)
                if linked:
                    st = None  # the link's own status says nothing about its target
            real = os.path.realpath(link) if linked else link
            linked = linked or real_head != os.path.normpath(head)
    except (OSError, ValueError) as exc:
        raise PathError(f"cannot resolve {path!r}: {exc}") from exc
    # only a path through a symlink, or one spelled under /proc or /dev, can be magic
    if write and (linked or full.startswith(("/proc/", "/dev/"))) and (
            magic := magic_link(full)) is not None:
        raise PathError(f"{path!r} goes through {magic}, which names whichever process opens"
                        " it; guard cannot resolve it for the agent's process: refused")
    is_dir = False
    nlink = 0
    mode = 0
    try:
        if st is None:
            st = os.stat(real)
        mode = st.st_mode
        is_dir = stat.S_ISDIR(st.st_mode)
        nlink = st.st_nlink if stat.S_ISREG(st.st_mode) else 0
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathError(f"cannot resolve {path!r}: symlink loop") from exc
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise PathError(f"cannot resolve {path!r}: {exc.strerror}") from exc
    return CanonicalPath(link=link, real=real, is_dir=is_dir, nlink=nlink, mode=mode)


def no_worktree_note(cwd: str | os.PathLike[str] | None = None) -> str | None:
    """The one sentence ``check``, ``explain``, ``run`` and ``watch`` say outside version
    control (None inside a worktree): guard then uses no worktree, the same for all four."""
    here = Path(os.path.realpath(cwd if cwd is not None else os.getcwd()))
    if find_worktree(here) is not None:
        return None
    return (
        f"no worktree: {here} is under no version control (no .git, .hg, .jj or .svn above"
        " it), so guard uses none: paths here belong to no root (only anchored patterns and"
        " the agent's default decide them), `guard run` gives no worktree to write and its"
        " monitor watches the plan directory only; `git init` or --worktree DIR makes one"
    )
