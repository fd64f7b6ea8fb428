"""What git already vouches for: the index's cached stat data and ``git status``.

The baseline never hashes a file git's own data vouches for. Two sources:

* the index (``.git/index``), read directly (versions 2, 3 and 4, SHA-1
  repositories) or, for anything else (a split or sparse index, SHA-256, a
  linked worktree), through one ``git ls-files --stage --debug`` call. Each
  stage-0 entry gives the blob id and the stat data git cached for the file;
* ``git --no-optional-locks status --porcelain -z --untracked-files=all
  --ignored=matching --no-renames``: the tracked files whose content differs
  from the index, every untracked file that is not ignored, and the ignored
  paths (a whole ignored directory is one line; git does not descend into it).
  ``--no-optional-locks``: the index is never rewritten.

A tracked file git status does not name is clean: its content is the index's
blob, already in the object database (checked by a loose object's header, or with
``git cat-file --batch-check``), so it is restorable from git at any time and needs no
copy.
"""

# Lazy imports: zlib, to read a loose object's header in the baseline's second phase.

from __future__ import annotations

import os
import re
import stat
import struct
import subprocess
from pathlib import Path
from typing import NamedTuple

from guard.effects import GuardError

#: seconds any git command the monitor runs may take (a FIFO planted in .git must not hang it)
GIT_TIMEOUT = 60

_HEAD = struct.Struct(">4sLL")
_ENTRY = struct.Struct(">10L20sH")
_ASSUME_VALID = 0x8000
_EXTENDED = 0x4000
_SKIP_WORKTREE = 0x4000  # in the extended flags
_CE_SKIP_WORKTREE = 1 << 30  # the same, in git's in-memory flags (ls-files --debug)


class GitStateError(GuardError):
    """git's view of the worktree cannot be read."""


class IndexEntry(NamedTuple):
    """A stage-0 entry of git's index with the stat data git cached for it.

    ``trusted`` is False for entries git status does not check against the
    working tree (assume-unchanged, skip-worktree): their content is not vouched for.
    (A tuple: an index holds hundreds of thousands of them.)
    """

    blob: str
    ctime_ns: int
    mtime_ns: int
    ino: int
    uid: int
    gid: int
    size: int
    mode: int = 0o100644
    trusted: bool = True


def parse_index(data: bytes, prefix: str = "") -> dict[str, IndexEntry] | None:
    """``prefix`` + worktree-relative name -> entry for stage-0 files, symlinks and
    gitlinks; None when this index is not one read here (the caller asks git instead)."""
    if len(data) < 12:
        return None
    sig, version, count = _HEAD.unpack_from(data, 0)
    if sig != b"DIRC" or version not in (2, 3, 4):
        return None
    out: dict[str, IndexEntry] = {}
    pos = 12
    prev = b""
    unpack = _ENTRY.unpack_from
    find = data.index
    new = IndexEntry
    try:
        for _ in range(count):
            start = pos
            cs, cn, ms, mn, _dev, ino, mode, uid, gid, size, oid, flags = unpack(data, pos)
            pos += 62
            ext = 0
            if flags & _EXTENDED:
                if version < 3:
                    return None
                (ext,) = struct.unpack_from(">H", data, pos)
                pos += 2
            if version == 4:
                strip, pos = _varint(data, pos)
                end = find(b"\0", pos)
                name = prev[: len(prev) - strip] + data[pos:end]
                pos = end + 1
            else:
                end = find(b"\0", pos)
                name = data[pos:end]
                pos = start + ((end - start + 8) & ~7)
            prev = name
            kind = mode >> 12
            if (flags >> 12) & 3 or kind not in (0o10, 0o12, 0o16):
                if kind == 0o04:
                    return None  # a sparse index's directory entry
                continue  # conflict stages
            out[prefix + name.decode("utf-8", "surrogateescape")] = new(
                oid.hex(), cs * 1_000_000_000 + cn, ms * 1_000_000_000 + mn, ino, uid, gid,
                size, mode, not (flags & _ASSUME_VALID or ext & _SKIP_WORKTREE),
            )
    except (struct.error, ValueError, IndexError):
        return None
    # extensions: a split index keeps its entries elsewhere ("link")
    while pos + 8 <= len(data) - 20:
        tag, size = struct.unpack_from(">4sL", data, pos)
        if tag in (b"link", b"sdir"):
            return None
        pos += 8 + size
    return out


_FLAGS = struct.Struct(">H").unpack_from


def untrusted_names(data: bytes) -> set[str] | None:
    """Names of entries git status does not check (assume-unchanged, skip-worktree), by a
    quick pass over a version 2 or 3 index; None when a full :func:`parse_index` is needed."""
    if len(data) < 12:
        return None
    sig, version, count = _HEAD.unpack_from(data, 0)
    if sig != b"DIRC" or version not in (2, 3):
        return None
    out: set[str] = set()
    pos = 12
    find = data.index
    try:
        for _ in range(count):
            (flags,) = _FLAGS(data, pos + 60)
            name = pos + 62 + (2 if flags & _EXTENDED else 0)
            end = find(b"\0", name)
            if flags & (_ASSUME_VALID | _EXTENDED):
                ext = _FLAGS(data, pos + 62)[0] if flags & _EXTENDED else 0
                if flags & _ASSUME_VALID or ext & _SKIP_WORKTREE:
                    out.add(data[name:end].decode("utf-8", "surrogateescape"))
            pos += (end - pos + 8) & ~7
    except (struct.error, ValueError):
        return None
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    c = data[pos]
    pos += 1
    val = c & 0x7F
    while c & 0x80:
        val += 1
        c = data[pos]
        pos += 1
        val = (val << 7) + (c & 0x7F)
    return val, pos


def can_parse(worktree: Path) -> bool:
    """Whether this worktree's index is read here (not through git ls-files)."""
    git = worktree / ".git"
    return git.is_dir() and not _sha256(git)


def read_index_entries(worktree: Path, data: bytes | None) -> dict[str, IndexEntry]:
    """Absolute path -> stage-0 entry: from ``data`` (the index bytes) when they can be
    read here, otherwise from one ``git ls-files --stage --debug`` call."""
    git = worktree / ".git"
    if not git.exists():
        return {}
    parsed = None
    if data is not None and can_parse(worktree):
        parsed = parse_index(data, str(worktree) + "/")
    return parsed if parsed is not None else _ls_files(worktree)


def _sha256(git_dir: Path) -> bool:
    try:
        return "sha256" in (git_dir / "config").read_text(errors="replace").lower()
    except OSError:
        return True  # unknown: ask git


def _run_git(worktree: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        return subprocess.run(
            ["git", "-C", str(worktree), *args],
            capture_output=True, check=True, timeout=GIT_TIMEOUT,
            input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        ).stdout
    except subprocess.TimeoutExpired as exc:
        raise GitStateError(f"git {args[0]} took over {GIT_TIMEOUT} s in {worktree}") from exc
    except subprocess.CalledProcessError as exc:
        msg = exc.stderr.decode(errors="replace").strip()
        raise GitStateError(f"git {args[0]} failed in {worktree}: {msg}") from exc


def _ls_files(worktree: Path) -> dict[str, IndexEntry]:
    try:
        out = _run_git(worktree, "ls-files", "--stage", "--debug", "-z")
    except FileNotFoundError:
        return {}  # no git binary: everything is hashed and copied instead
    entries: dict[str, IndexEntry] = {}
    root = str(worktree) + "/"
    consumed = 0
    for m in re.finditer(_INDEX_RECORD, out):
        if m.start() != consumed:
            break
        consumed = m.end()
        mode, blob, stage, name, cs, cn, ms, mn, ino, uid, gid, size, flags = m.groups()
        if stage != b"0":
            continue
        entries[root + os.fsdecode(name)] = IndexEntry(
            blob.decode(), int(cs) * 1_000_000_000 + int(cn),
            int(ms) * 1_000_000_000 + int(mn), int(ino), int(uid), int(gid), int(size),
            int(mode, 8), not int(flags, 16) & (_ASSUME_VALID | _CE_SKIP_WORKTREE),
        )
    if consumed != len(out):
        raise GitStateError(
            f"unexpected `git ls-files --debug` output in {worktree} at byte {consumed};"
            f" git {_git_version()} may format it differently"
        )
    return entries


#: one record of ``git ls-files --stage --debug -z``; compiled (and cached by :mod:`re`) on
#: first use: most monitors read the index themselves and never ask git for it
_INDEX_RECORD = (
    rb"(\d+) ([0-9a-f]+) (\d)\t([^\0]*)\0"
    rb"  ctime: (\d+):(\d+)\n"
    rb"  mtime: (\d+):(\d+)\n"
    rb"  dev: \d+\tino: (\d+)\n"
    rb"  uid: (\d+)\tgid: (\d+)\n"
    rb"  size: (\d+)\tflags: ([0-9a-f]+)\n"
)


def _git_version() -> str:
    try:
        return subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


class Status:
    """``git status`` of a worktree, as absolute paths."""

    __slots__ = ("dirty", "ignored", "untracked", "untracked_dirs")

    def __init__(self) -> None:
        self.dirty: set[str] = set()  # tracked, content not the index's
        self.untracked: set[str] = set()  # files and symlinks, not ignored
        self.untracked_dirs: set[str] = set()  # nested repositories
        self.ignored: set[str] = set()  # files, and directories as a whole


_STATUS = ("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all",
           "--ignored=matching", "--no-renames")


def _git_start(worktree: Path, args: tuple[str, ...]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["git", "-C", str(worktree), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _git_end(worktree: Path, proc: subprocess.Popen[bytes], what: str) -> tuple[bytes, bytes]:
    """What a git process started by :func:`_git_start` printed (stdout, stderr), waited
    for at most :data:`GIT_TIMEOUT` seconds (then killed: a GitStateError)."""
    try:
        return proc.communicate(timeout=GIT_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise GitStateError(f"{what} took over {GIT_TIMEOUT} s in {worktree}") from exc


def status_start(worktree: Path) -> subprocess.Popen[bytes]:
    """Start one read-only ``git status`` (the index is not refreshed or rewritten), so that
    something else can be done meanwhile; :func:`status_end` waits for it."""
    return _git_start(worktree, _STATUS)


def status_end(worktree: Path, proc: subprocess.Popen[bytes]) -> Status:
    out, err = _git_end(worktree, proc, "git status")
    if proc.returncode != 0:
        raise GitStateError(f"git status failed in {worktree}: {err.decode(errors='replace')}")
    return parse_status(worktree, out)


def parse_status(worktree: Path, out: bytes) -> Status:
    st = Status()
    root = str(worktree) + "/"
    for rec in out.split(b"\0"):
        if len(rec) < 4:
            continue
        code, name = rec[:2], os.fsdecode(rec[3:])
        path = root + name.rstrip("/")
        if code == b"??":
            (st.untracked_dirs if name.endswith("/") else st.untracked).add(path)
        elif code == b"!!":
            st.ignored.add(path)
        else:
            st.dirty.add(path)
    return st


def missing_blobs(worktree: Path, blobs: set[str]) -> set[str]:
    """The blob ids among ``blobs`` that git's object database does not hold (a blob held
    as a loose object is found here, the rest by ``git cat-file --batch-check``)."""
    blobs = blobs - loose_blobs(worktree, blobs)
    if not blobs:
        return set()
    out = _run_git(worktree, "cat-file", "--batch-check=%(objectname) %(objecttype)",
                   stdin=("\n".join(blobs) + "\n").encode())
    # "<id> blob" for each one held as a blob; "<id> missing" (or another type) otherwise
    have = {line[:-5] for line in out.decode(errors="replace").splitlines()
            if line.endswith(" blob")}
    return blobs - have


#: bytes of a loose object read to find its header (``blob <size>\\0``), compressed
_LOOSE_HEAD = 64


def loose_blobs(worktree: Path, blobs: set[str], limit: int = 64) -> set[str]:
    """The SHA-1 ids among ``blobs`` (none when there are more than ``limit``: git is
    quicker then) that the worktree's own object database holds as loose objects whose
    header says ``blob``: what ``git cat-file --batch-check`` reads of them (the header,
    not the content). Packed objects, other repositories' (alternates) and a linked
    worktree's are left to git."""
    if len(blobs) > limit:
        return set()
    import zlib

    objects = worktree / ".git" / "objects"
    found: set[str] = set()
    for blob in blobs:
        if len(blob) != 40:
            continue
        try:
            fd = os.open(objects / blob[:2] / blob[2:], os.O_RDONLY | os.O_NOFOLLOW
                         | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            head = os.read(fd, _LOOSE_HEAD) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        except OSError:
            continue
        finally:
            os.close(fd)
        try:
            text = zlib.decompressobj().decompress(head, 32)
        except zlib.error:
            continue
        kind, _, rest = text.partition(b" ")
        size, nul, _ = rest.partition(b"\0")
        if kind == b"blob" and nul and size.isdigit():
            found.add(blob)
    return found


def umask() -> int:
    """The process umask (read from /proc, so nothing is changed even for a moment)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


#: attributes that make a checked-out file differ from its blob (clean/smudge, eol, ...)
_CONVERTING = ("filter", "text", "eol", "crlf", "ident", "working-tree-encoding")


#: what :func:`converted_paths` asks git's configuration (``git config``)
_CONFIG = ("config", "-z", "--get-regexp", r"^core\.(autocrlf|attributesfile)$")


def config_start(worktree: Path) -> subprocess.Popen[bytes] | None:
    """Start the ``git config`` read :func:`converted_paths` needs, so that it runs beside
    ``git status`` (its result is read there); None when there is no git."""
    try:
        return _git_start(worktree, _CONFIG)
    except FileNotFoundError:
        return None


def _config_end(worktree: Path, proc: subprocess.Popen[bytes]) -> bytes:
    out, _ = _git_end(worktree, proc, "git config")
    return out if proc.returncode == 0 else b""  # nothing set: git config exits 1


def converted_paths(worktree: Path, index_data: bytes | None = None,
                    no_index: bool = False, config: subprocess.Popen[bytes] | None = None
                    ) -> set[str]:
    """Tracked files whose working-tree bytes may differ from their blob although git
    calls them clean: a clean/smudge ``filter`` (nbstripout, git-lfs), eol conversion
    (``text``/``eol`` attributes, ``core.autocrlf``), ``ident`` or an encoding.

    Restoring such a file from its blob would write the filtered bytes, so the baseline
    reads and copies them instead. Saying too much only costs a read: a file whose bytes
    are its blob is still restored from git. Without any attribute source and without
    ``core.autocrlf`` (the common case) this costs one short git command, two when
    ``index_data`` (the index's bytes, read already) cannot say that no ``.gitattributes``
    is tracked (``no_index``: there is no index, so nothing is tracked). ``config``: the
    ``git config`` read :func:`config_start` started (else it runs here)."""
    if config is not None:
        conf = _config_end(worktree, config)
    else:
        try:
            conf = _run_git(worktree, *_CONFIG)
        except FileNotFoundError:
            return set()
        except GitStateError:
            conf = b""  # nothing set: git config exits 1
    settings: dict[str, bytes] = {}
    for item in conf.split(b"\0"):
        key, _, value = item.partition(b"\n")
        if key:
            settings[key.decode(errors="replace").lower()] = value.strip()
    every = settings.get("core.autocrlf", b"").lower() in (b"true", b"input", b"yes", b"on",
                                                            b"1")
    tracked = False if no_index else _tracked_attributes(index_data)
    if not every and not _attribute_sources(worktree, settings.get("core.attributesfile"),
                                            tracked):
        return set()
    try:
        out = _run_git(worktree, "ls-files", "-z")
    except GitStateError:
        return set()
    names = [n for n in out.split(b"\0") if n]
    root = str(worktree) + "/"
    if every:
        return {root + os.fsdecode(n) for n in names}
    try:
        out = _run_git(worktree, "check-attr", "-z", "--stdin", *_CONVERTING,
                       stdin=b"\0".join(names) + b"\0")
    except GitStateError:
        return {root + os.fsdecode(n) for n in names}  # cannot tell: read them all
    fields = out.split(b"\0")
    converted: set[str] = set()
    for i in range(0, len(fields) - 2, 3):
        name, value = fields[i], fields[i + 2]
        if value not in (b"unspecified", b"unset"):
            converted.add(root + os.fsdecode(name))
    return converted


def _tracked_attributes(index_data: bytes | None) -> bool | None:
    """False when the index's bytes show that no ``.gitattributes`` is tracked: a version
    2 or 3 index (names written whole) in which the name occurs nowhere, nor the sparse
    index's extension; None when only git can tell."""
    if index_data is None or len(index_data) < 12:
        return None
    sig, version, _count = _HEAD.unpack_from(index_data, 0)
    if sig != b"DIRC" or version not in (2, 3):
        return None
    if b".gitattributes" in index_data or b"sdir" in index_data:
        return None
    return False


def _attribute_sources(worktree: Path, user: bytes | None, tracked: bool | None = None
                       ) -> bool:
    """Whether any gitattributes file can apply: a tracked ``.gitattributes`` anywhere
    (``tracked``: known already, else asked of git), the repository's
    ``info/attributes``, the user's or the system's."""
    if (worktree / ".gitattributes").exists() or (
            worktree / ".git" / "info" / "attributes").exists():
        return True
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    candidates = [os.path.expanduser(os.fsdecode(user))] if user else []
    candidates += [os.path.join(xdg, "git", "attributes"), "/etc/gitattributes"]
    if any(os.path.exists(c) for c in candidates):
        return True
    if tracked is not None:
        return tracked
    try:
        nested = _run_git(worktree, "ls-files", "-z", "--", ":(glob)**/.gitattributes")
    except GitStateError:
        return True
    return bool(nested.strip(b"\0"))


def cat_blob(worktree: Path, blob: str, scratch: Path, held: int | None = None
             ) -> bytes | None:
    """The bytes of ``blob`` from the worktree's object database, or None.

    Asked of the worktree's repository first; when git cannot read that (its ``HEAD``
    or refs are gone while the monitor puts ``.git`` back), of a bare repository of
    guard's own under ``scratch`` whose object directory is the worktree's. The
    caller checks the bytes against the blob id: nothing here is trusted. ``held``: the
    worktree's descriptor, passed to git, so that a tree renamed away is still read."""
    where = f"/proc/self/fd/{held}" if held is not None else str(worktree)
    objects = Path(where) / ".git" / "objects"
    if held is not None and not os.path.isdir(f"/proc/self/fd/{held}/.git/objects"):
        objects = worktree / ".git" / "objects"
    try:
        out = subprocess.run(["git", "-C", where, "cat-file", "blob", blob],
                             capture_output=True, check=False, stdin=subprocess.DEVNULL,
                             timeout=GIT_TIMEOUT, pass_fds=(held,) if held is not None else ())
        if out.returncode == 0:
            return out.stdout
    except (OSError, subprocess.SubprocessError):
        pass
    return cat_blob_in(objects, blob, scratch) if objects.is_dir() else None


def cat_blob_in(objects: Path, blob: str, scratch: Path) -> bytes | None:
    """The bytes of ``blob`` read by git from the object directory ``objects`` (a
    repository's, or the monitor's snapshot of one), through a bare repository of
    guard's own under ``scratch``; None when git cannot. Not verified here."""
    fmt = "sha256" if len(blob) == 64 else "sha1"
    bare = scratch / f"objects-reader-{fmt}"
    if not (bare / "HEAD").is_file():
        try:
            _run_git(scratch, "init", "-q", "--bare", f"--object-format={fmt}", str(bare))
        except (GitStateError, OSError):
            return None
    try:
        out = subprocess.run(["git", "--git-dir", str(bare), "cat-file", "blob", blob],
                             capture_output=True, check=False, stdin=subprocess.DEVNULL,
                             env={**os.environ, "GIT_OBJECT_DIRECTORY": str(objects)},
                             timeout=GIT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None
