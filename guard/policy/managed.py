"""The managed layer: rules from ``/etc/openoxide/managed.d/*.toml`` that no user, project
or ``--policy`` layer can weaken (docs/fleet.md).

**Trust.** A managed file counts only when it and every directory above it, up to
``/``, are owned by root and writable by neither group nor others. The check holds
what it read: each directory is opened from its parent's descriptor without following
a symlink (a symlink anywhere on the way is refused), its owner and mode are read from
that descriptor, and each file is opened once (``O_NOFOLLOW``), checked by ``fstat`` on
the descriptor and read from it, so a file swapped between the check and the read is
never the one read. Anything else (a world-writable file, a user-owned directory, a
symlink, an unreadable file, a file that does not validate) is a :class:`ManagedError`:
every command and hook that loads a policy refuses (fails closed) until it is fixed.

**Where.** ``/etc/openoxide/managed.d`` always; when it does not exist there is no
managed layer. ``$GUARD_MANAGED_DIR`` names one more directory, read before it (so the
system directory's files have the last word), under the same trust check: the variable
can add root-owned rules, never hide the system directory's. An agent can set it for the
commands it runs, which only makes those commands stricter (or refuse); a hook is started
by the host with the host's environment.

**Meaning.** Each managed file (with its ``extends``, other managed files under the same
check) is one part; every part applies, so one file cannot weaken another. A part's
``[managed.all]``, ``[managed.plan]`` and ``[managed.build]`` tables hold ``deny`` and
``ask`` lists per effect kind (each a gitignore list, as in any policy), a floor
``default`` per kind, and ``tools`` entries (``ask`` or ``deny``). They are consulted
before the agent's own lists: protected > managed deny > deny > managed ask > ask >
allow > default, and a managed ``default`` (or tool entry) raises whatever the other
layers decide to at least its action. ``[managed] pin`` fixes settings: ``protected``
(every agent keeps protected paths), ``confine`` (plan agents run shell commands
confined; ``guard run --allow-unconfined`` is refused), ``audit`` (the ``[audit]`` table
is the managed layer's alone; without the pin a managed ``[audit]`` key still wins).
"""

# Lazy imports: pydantic and the schema only to validate: hooks use the cache (start-up speed).

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Mapping

from guard.effects import Action
from guard.match import Pattern, parse_pattern
from guard.network import parse_network_pattern
from guard.policy.loader import (
    BUILTIN_PREFIX,
    LoadedPolicy,
    Loc,
    PolicyError,
    _merge,
    _parse,
    digest_of,
    format_loc,
    locate_line,
)
from guard.policy.valid import Audit, Policy, audit_of
from guard.record import Record
from guard.sha import sha256

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

SYSTEM_DIR = "/etc/openoxide/managed.d"
ENV = "GUARD_MANAGED_DIR"
SCOPES = ("all", "plan", "build")
KINDS = ("read", "write", "delete", "exec", "network")
MAX_BYTES = 1 << 20
FIX = "make it root-owned and writable by root alone (chown root:root; chmod go-w)"
#: How long after a change a stamp is not trusted alone (nanoseconds): longer than the
#: coarsest timestamp a local file system keeps (FAT: 2 s), as in :mod:`guard.policy.freshness`.
RACY_NS = 3_000_000_000

#: (device, inode, mode, owner, group, size, mtime, ctime) of a path, None when absent
Stamp = tuple[int, int, int, int, int, int, int, int] | None


class ManagedError(PolicyError):
    """The managed layer cannot be trusted or read: every decision is refused."""


def _error(message: str) -> ManagedError:
    return ManagedError([f"managed policy: {message}"])


def _check(st: os.stat_result, shown: str) -> None:
    if st.st_uid != 0:
        raise _error(f"{shown} is owned by uid {st.st_uid}, not root; {FIX}")
    if st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002))
                           if st.st_mode & bit)
        raise _error(f"{shown} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o}); {FIX}")


def _why_not_opened(parent: int, name: str, shown: str, exc: OSError) -> ManagedError:
    try:
        st = os.lstat(name, dir_fd=parent)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        return _error(f"{shown} is a symbolic link; managed policy paths may not go through"
                      " one (name the real directory, or replace the link by it)")
    if exc.errno == errno.ENOTDIR or (st is not None and not stat.S_ISDIR(st.st_mode)):
        return _error(f"{shown} is not a directory")
    return _error(f"cannot open {shown}: {exc.strerror or exc}")


def open_dir(path: str, what: str) -> int:
    """A descriptor of directory ``path``, reached from ``/`` one component at a time
    without following symlinks, every component checked on its descriptor."""
    if not path.startswith("/"):
        raise _error(f"{what} {path!r} is not an absolute path; give /abs/path")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise _error(f"{what} {path!r} holds . or ..; give the plain absolute path")
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    shown = "/"
    try:
        _check(os.fstat(fd), shown)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = (os.O_RDONLY if last else os.O_PATH) | os.O_DIRECTORY | os.O_NOFOLLOW
            shown = "/" + "/".join(parts[: i + 1])
            try:
                nfd = os.open(part, flags | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                raise _error(f"{what} {shown} does not exist") from None
            except OSError as exc:
                raise _why_not_opened(fd, part, shown, exc) from None
            os.close(fd)
            fd = nfd
            _check(os.fstat(fd), shown)
        if not parts:
            os.close(fd)
            fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_file(dirfd: int, name: str, shown: str) -> str:
    """The text of ``name`` in ``dirfd``: opened once without following a symlink, checked
    on the descriptor (a regular file, root's, not group/other-writable), read from it."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dirfd)
    except FileNotFoundError:
        raise _error(f"{shown} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _error(f"{shown} is a symbolic link; a managed file must be a regular"
                         " file (copy the target into place)") from None
        raise _error(f"cannot open {shown}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _error(f"{shown} is not a regular file")
        _check(st, shown)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BYTES:
                raise _error(f"{shown} is larger than {MAX_BYTES} bytes")
            chunks.append(chunk)
    except OSError as exc:
        raise _error(f"cannot read {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        why = f"{shown}:1: not UTF-8 text ({exc.reason}); save it as UTF-8"
        raise ManagedError([why]) from None


def directories(env: Mapping[str, str] | None = None) -> list[tuple[str, bool]]:
    """(directory, must exist) in reading order: ``$GUARD_MANAGED_DIR``, then the system's."""
    env = os.environ if env is None else env
    extra = env.get(ENV, "").strip()
    out = [(extra, True)] if extra else []
    return [*out, (SYSTEM_DIR, False)]


def _top_files(env: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """(path, text) of every ``*.toml`` in the managed directories, in reading order."""
    found: list[tuple[str, str]] = []
    for directory, required in directories(env):
        if not required:
            try:
                os.lstat(directory)
            except FileNotFoundError:
                continue  # no managed layer there
            except OSError as exc:
                raise _error(f"cannot reach {directory}: {exc.strerror or exc}") from None
        what = f"${ENV}" if required else "managed directory"
        fd = open_dir(directory.rstrip("/") or "/", what)
        try:
            names = sorted(n for n in os.listdir(fd) if n.endswith(".toml")
                           and not n.startswith("."))
            for name in names:
                path = os.path.join(directory, name)
                found.append((path, read_file(fd, name, path)))
        finally:
            os.close(fd)
    return found


def _read_path(path: str) -> str:
    directory, name = os.path.split(path)
    fd = open_dir(directory or "/", "managed extends")
    try:
        return read_file(fd, name, path)
    finally:
        os.close(fd)


# -- one part: a managed file with its extends ----------------------------------------


class Part(Record, frozen=False):
    """One managed file (with its ``extends`` chain), validated."""

    __slots__ = ("audit", "audit_keys", "loaded", "patterns", "pins", "scopes")
    __match_args__ = ("loaded", "pins", "scopes", "audit", "audit_keys", "patterns")

    loaded: LoadedPolicy  # its files, texts and the provenance of every key
    pins: frozenset[str]
    scopes: dict[str, dict[str, Any]]  # pydantic's dump of [managed.all|plan|build]
    audit: Audit
    audit_keys: frozenset[str]  # the [audit] keys the part sets
    patterns: dict[tuple[str, str, str], list[Pattern]]

    def __init__(
        self,
        loaded: LoadedPolicy,
        pins: frozenset[str],
        scopes: dict[str, dict[str, Any]],
        audit: Audit,
        audit_keys: frozenset[str],
        patterns: dict[tuple[str, str, str], list[Pattern]] | None = None,
    ) -> None:
        self.loaded = loaded
        self.pins = pins
        self.scopes = scopes
        self.audit = audit
        self.audit_keys = audit_keys
        self.patterns = {} if patterns is None else patterns

    @property
    def name(self) -> str:
        return os.path.basename(self.loaded.name)

    def lists(self, scope: str, kind: str, list_name: str) -> list[Pattern]:
        key = (scope, kind, list_name)
        got = self.patterns.get(key)
        if got is None:
            got = []
            parse = parse_network_pattern if kind == "network" else parse_pattern
            for i, text in enumerate(self.scopes[scope][kind][list_name]):
                p = parse(text, self.loaded.source(("managed", scope, kind, list_name, i)))
                if p is not None:
                    got.append(p)
            self.patterns[key] = got
        return got

    def rule(self, loc: Loc) -> str:
        f, line = self.loaded.locate(loc)
        return f"{f}:{line}: {format_loc(loc)}"


def _load_part(path: str, text: str) -> Part:
    merged: dict[str, Any] = {}
    prov: dict[Loc, str] = {}
    texts: dict[str, str] = {}
    files: list[str] = []
    _load_chain(path, text, merged, prov, texts, files, [])
    merged.pop("extends", None)
    merged["version"] = 1
    loaded = LoadedPolicy(path, Policy.empty(), files, [], texts, prov, digest=digest_of(merged))
    from pydantic import ValidationError

    from guard.policy.schema import ManagedFile

    try:
        model = ManagedFile.model_validate(merged)
    except ValidationError as exc:
        raise ManagedError([_format(loaded, err) for err in exc.errors()]) from None
    dump = model.model_dump(mode="json")
    part = Part(
        loaded,
        frozenset(dump["managed"]["pin"]),
        {s: dump["managed"][s] for s in SCOPES},
        audit_of(dump["audit"]),
        frozenset(merged.get("audit", {})),
    )
    problems = []
    for scope in SCOPES:
        for kind in KINDS:
            for list_name in ("deny", "ask"):
                for i, pat in enumerate(part.scopes[scope][kind][list_name]):
                    try:
                        (parse_network_pattern if kind == "network" else parse_pattern)(pat)
                    except Exception as exc:
                        loc: Loc = ("managed", scope, kind, list_name, i)
                        f, line = loaded.locate(loc)
                        problems.append(f"{f}:{line}: {format_loc(loc)}: {exc}")
    if problems:
        raise ManagedError(problems)
    return part


def _load_chain(
    path: str,
    text: str,
    merged: dict[str, Any],
    prov: dict[Loc, str],
    texts: dict[str, str],
    files: list[str],
    stack: list[str],
) -> None:
    if path in stack:
        chain = " -> ".join([*stack, path])
        raise ManagedError([f"{path}:1: extends: cycle {chain}; remove one of the extends"
                            " entries"])
    raw = _parse(path, text)
    texts[path] = text
    if raw.get("version") != 1:
        line = locate_line(text, ("version",))
        raise ManagedError([f"{path}:{line}: version: expected 1, got {raw.get('version')!r};"
                            " add `version = 1` at the top"])
    if "agents" in raw:
        line = locate_line(text, ("agents",))
        raise ManagedError([f"{path}:{line}: agents: a managed file does not define agents;"
                            " restrict them with [managed.all], [managed.plan] or"
                            " [managed.build] tables"])
    extends = raw.get("extends", [])
    if isinstance(extends, str):
        extends = raw["extends"] = [extends]
    if not isinstance(extends, list) or not all(isinstance(e, str) for e in extends):
        line = locate_line(text, ("extends",))
        raise ManagedError([f"{path}:{line}: extends: expected a list of managed files"])
    for i, parent in enumerate(extends):
        line = locate_line(text, ("extends", i))
        if parent.startswith(BUILTIN_PREFIX):
            raise ManagedError([f"{path}:{line}: extends[{i}]: {parent!r} is a policy, not a"
                                " managed file; a managed file extends only other managed"
                                " files (root-owned, like it)"])
        full = os.path.normpath(os.path.join(os.path.dirname(path), parent))
        _load_chain(full, _read_path(full), merged, prov, texts, files, [*stack, path])
    _merge(merged, raw, prov, path, ())
    files.append(path)


def _format(loaded: LoadedPolicy, err: Any) -> str:
    loc: Loc = tuple(err["loc"])
    f, line = loaded.locate(loc if err["type"] != "missing" else loc[:-1])
    if err["type"] == "extra_forbidden":
        where = format_loc(loc[:-1])
        msg = f"unknown key {loc[-1]!r} in {where}; see docs/fleet.md for the managed format"
        if len(loc) == 4 and loc[0] == "managed" and loc[-1] == "allow":
            msg = ("the managed layer cannot allow (it only denies or asks); remove the list,"
                   " and allow in the user's or project's policy")
    elif err["type"] in ("enum", "literal_error"):
        msg = f"{err['msg'].lower()}, got {err.get('input')!r}"
    else:
        msg = f"{err['msg']} (got {err.get('input')!r})"
    return f"{f}:{line}: {format_loc(loc)}: {msg}"


# -- the layer -----------------------------------------------------------------------


class ManagedLayer(Record, frozen=False):
    """Every managed part, in reading order (the system directory's last)."""

    __slots__ = ("_stamped", "parts", "read", "tops")
    __match_args__ = ("parts", "read", "tops")  # _stamped: neither compared nor shown

    parts: list[Part]
    read: list[tuple[str, str]]  # (path, text) of every file read, top files first
    tops: int  # how many of them are files of the managed directories
    #: what :func:`unchanged` last found unchanged by reading: (the directories it read,
    #: the paths that vouch for it, their stamps taken before the read, when it began)
    _stamped: tuple[list[tuple[str, bool]], list[str], list[Stamp], int] | None

    def __init__(self, parts: list[Part], read: list[tuple[str, str]], tops: int) -> None:
        self.parts = parts
        self.read = read
        self.tops = tops
        self._stamped = None

    @property
    def pins(self) -> frozenset[str]:
        return frozenset().union(*(p.pins for p in self.parts))

    def pinned(self, loaded: LoadedPolicy) -> LoadedPolicy:
        """``loaded`` with this layer's pins in force: ``protected`` on for every agent,
        ``confine`` on for every plan agent."""
        pins = self.pins
        if not pins & {"protected", "confine"}:
            return loaded
        agents = {}
        for name, agent in loaded.model.agents.items():
            if "protected" in pins and not agent.protected:
                agent = agent.replace(protected=True)
            if "confine" in pins and agent.mode == "plan" and not agent.sandbox.confine:
                agent = agent.replace(sandbox=agent.sandbox.replace(confine=True))
            agents[name] = agent
        model = loaded.model.replace(agents=agents)
        return loaded.replace(model=model)

    @property
    def files(self) -> list[str]:
        return [f for p in self.parts for f in p.loaded.files]

    @property
    def digest(self) -> str:
        h = sha256(b"guard-managed 1")
        for p in self.parts:
            h.update(b"\0" + p.loaded.digest.encode())
        return h.hexdigest()

    def file_digests(self) -> list[tuple[str, str]]:
        return [(path, sha256(text.encode("utf-8")).hexdigest())
                for path, text in self.read]

    def audit(self, user: Audit) -> Audit:
        """The effective ``[audit]``: the managed keys win; pinned, the managed table alone."""
        out = Audit() if "audit" in self.pins else user
        for p in self.parts:
            for key in p.audit_keys:
                out = _replace(out, key, getattr(p.audit, key))
        return out

    def lists(self, mode: str, kind: str, list_name: str) -> list[tuple[str, list[Pattern]]]:
        """(label, patterns) of every managed list of ``list_name`` for an agent of ``mode``."""
        out = []
        for p in self.parts:
            for scope in ("all", mode):
                if scope not in SCOPES:
                    continue
                ps = p.lists(scope, kind, list_name)
                if ps:
                    out.append((f"managed.{scope}.{list_name}@{p.name}", ps))
        return out

    def default(self, mode: str, kind: str) -> tuple[Action, str] | None:
        """The strictest managed ``default`` of ``kind`` for an agent of ``mode``."""
        best: tuple[Action, str] | None = None
        for p in self.parts:
            for scope in ("all", mode):
                if scope not in SCOPES:
                    continue
                value = p.scopes[scope][kind]["default"]
                if value is None:
                    continue
                action = Action(value)
                if best is None or action.severity > best[0].severity:
                    best = (action, p.rule(("managed", scope, kind, "default")))
        return best

    def tool(self, mode: str, name: str) -> tuple[Action, str] | None:
        """The strictest managed tool entry for ``name`` (or ``*``)."""
        best: tuple[Action, str] | None = None
        for p in self.parts:
            for scope in ("all", mode):
                if scope not in SCOPES:
                    continue
                tools = p.scopes[scope]["tools"]
                key = name if name in tools else "*" if "*" in tools else None
                if key is None:
                    continue
                action = Action(tools[key])
                if best is None or action.severity > best[0].severity:
                    best = (action, p.rule(("managed", scope, "tools", key)))
        return best


def _replace(audit: Audit, key: str, value: Any) -> Audit:
    return audit.replace(**{key: value})


def load_managed(env: Mapping[str, str] | None = None) -> ManagedLayer | None:
    """The managed layer, or None when no managed directory holds a file.

    Raises :class:`ManagedError` (a :class:`PolicyError`) for anything it cannot trust
    or read: the caller refuses to decide.
    """
    tops = _top_files(env)
    if not tops:
        return None
    parts = [_load_part(path, text) for path, text in tops]
    read = list(tops)
    seen = {path for path, _ in tops}
    for part in parts:
        for f in part.loaded.files:
            if f not in seen:
                seen.add(f)
                read.append((f, part.loaded.texts[f]))
    return ManagedLayer(parts, read, len(tops))


def _lstamp(path: str) -> Stamp:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_size,
            st.st_mtime_ns, st.st_ctime_ns)


def _watched(layer: ManagedLayer, dirs: list[tuple[str, bool]]) -> list[str]:
    """Every path whose stamp vouches for ``layer``: each managed directory and each file
    read, with every directory above them up to ``/``."""
    out: dict[str, None] = {}
    for path in [d.rstrip("/") or "/" for d, _ in dirs] + [p for p, _ in layer.read]:
        chain = []
        while True:
            chain.append(path)
            parent = os.path.dirname(path)
            if parent == path or not parent:
                break
            path = parent
        for p in reversed(chain):
            out.setdefault(p, None)
    return list(out)


def _stamps(paths: list[str]) -> list[Stamp]:
    return [_lstamp(p) for p in paths]


def unchanged(layer: ManagedLayer | None, env: Mapping[str, str] | None = None) -> bool:
    """Every managed file reads as it did when ``layer`` was loaded, and no file came or
    went (any error counts as changed: the caller loads again and reports it).

    The first check reads every file (:func:`_read_unchanged`). Once that found the layer
    unchanged, the next checks ``lstat`` what vouches for it (each file read, each managed
    directory and every directory above them: device, inode, mode, owner, group, size,
    modification and change time) and read nothing while every stamp is as it was when
    the files were last read: a file edited, replaced, added or removed, a mode or owner
    changed, a directory swapped for a symlink, each changes a stamp. A stamp changed
    within :data:`RACY_NS` of that reading proves nothing (a rewrite of the same size
    within one tick of the file system's clock keeps it), so the files are read again
    until the change is older than that.
    """
    if layer is None:
        return _read_unchanged(layer, env)
    try:
        dirs = directories(env)
        known = layer._stamped
        if known is not None and known[0] == dirs:
            _, paths, before, verified = known
            now = _stamps(paths)
            if now == before:
                racy = verified - RACY_NS
                if not any(s is not None and (s[6] >= racy or s[7] >= racy) for s in now):
                    return True
        paths = _watched(layer, dirs)
        began = time.time_ns()
        before = _stamps(paths)
    except OSError:
        return False
    if not _read_unchanged(layer, env):
        return False
    layer._stamped = (dirs, paths, before, began)
    return True


def _read_unchanged(layer: ManagedLayer | None, env: Mapping[str, str] | None) -> bool:
    """:func:`unchanged` by reading every file (under the trust check) and comparing."""
    try:
        tops = _top_files(env)
        if layer is None:
            return not tops
        n = layer.tops
        if tops != layer.read[:n]:
            return False
        return all(_read_path(path) == text for path, text in layer.read[n:])
    except (OSError, PolicyError):
        return False
