"""guard's hook client: asks the warm hook daemon, else decides in-process.

Hosts run it through :file:`_client.py` (``python -I .../guard/hooks/_client.py
HOST [options]``), which loads this module from its byte-code cache. It imports
neither guard nor pydantic, and of the standard library only what the
interpreter has loaded anyway plus C modules (``_socket``, ``_json``, the
SHA-256 module): a hook call then costs one bare interpreter start plus a round
trip over a Unix socket to ``hookd``, which keeps the policy core loaded. When no
daemon runs, the client starts one and asks it once it is up (at most
:data:`STARTUP_WAIT` seconds); when no trustworthy daemon answers, the call is
decided in-process. Every failure exits 2, which hosts treat as a block.

One daemon per installation and deciding environment. The installation is the
guard package this file belongs to (its resolved path), its version, the
interpreter's prefix and a fingerprint of its code and shipped policies (path,
inode, size, mtime and ctime of every ``.py``/``.toml``/``.json`` file in the
package); the environment is every variable that changes a decision made in the
deciding process (:func:`decision_env`). The socket, lock and pid file are named
by a hash of that identity, and every request carries the identity in full: the
daemon refuses a client of another installation or environment, and the client
accepts only an answer that names its own installation. A daemon and the
in-process fallback import guard from this file's own package, whatever else the
interpreter could import.

Trust: the run directory must be a directory owned by this user that nobody
else can write, the socket a socket owned by this user; the daemon checks the
peer's uid, and refuses a peer inside guard's confinement
(:func:`guard.hooks.hookd.peer_refusal`): such a client decides in-process.
``GUARD_HOOK_DAEMON=0`` turns the daemon off.
"""

# Lazy imports: json, socket, fcntl, subprocess, time when needed, and the (already loaded)
# import machinery that reads guard/hosts/hook_env.py: hook start-up speed.

import os
import stat
import sys

# No ``from __future__ import annotations`` and no ``typing`` at run time: each costs
# a module load per hook call. Annotations that name typing's types are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:  # the C module behind hashlib's sha256, without hashlib's start-up
    from _sha256 import sha256  # type: ignore[import-not-found, unused-ignore]  # 3.11
except ImportError:  # pragma: no cover - depends on the interpreter
    try:
        from _sha2 import sha256  # type: ignore[import-not-found, no-redef, unused-ignore]
    except ImportError:
        from hashlib import sha256  # type: ignore[assignment, unused-ignore]

PROTOCOL = 2
#: Seconds from the client's start to its answer, whoever decides (hookd or the
#: in-process fallback): well inside the 30 s timeout ``guard install`` gives every host.
#: Past it the answer is a block naming what did not answer. A decision itself waits
#: on guard's locks for at most ``guard.locking.HOOK_BUDGET`` (12 s) of it.
DEADLINE = 20.0
STARTUP_WAIT = 5.0  # seconds to wait for a daemon that is coming up
#: Variables each call brings with it: hookd decides the call with the client's values.
ENV_KEYS = ("GUARD_AGENT", "GUARD_POLICY", "GUARD_MISSED_RESTORE")
#: The client's and the daemon's own switches: they change no decision.
CLIENT_KEYS = ("GUARD_HOOK_TRACE", "GUARD_HOOK_DAEMON", "GUARD_HOOKD_IDLE")
FINGERPRINTED = (".py", ".toml", ".json", ".typed")


# -- JSON through the C accelerator alone (``import json`` costs more than the call) --


class _Scan:
    """What ``_json.make_scanner`` reads from a decoder: strict JSON, no hooks."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> "Any":
        raise ValueError(f"{name} is not JSON")


def _codec() -> "tuple[Callable[[str], str], Callable[[str, int], tuple[Any, int]]]":
    """(string encoder, value scanner): ``_json``'s, else the ``json`` module's."""
    try:
        import _json

        return _json.encode_basestring_ascii, _json.make_scanner(_Scan())  # type: ignore[arg-type]
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - not CPython
        import json

        decoder = json.JSONDecoder()
        return json.dumps, decoder.scan_once  # type: ignore[attr-defined]


_quote, _scan = _codec()


def dumps(value: object, sort_keys: bool = False) -> str:
    """JSON text (ASCII) of str, int, bool, None, list and str-keyed dict values."""
    if isinstance(value, str):
        return _quote(value)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps(v, sort_keys) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        return "{" + ", ".join(f"{_quote(str(k))}: {dumps(v, sort_keys)}" for k, v in items) + "}"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def loads(text: str) -> "Any":
    """The one JSON value in ``text``; ValueError when it is not exactly one."""
    start = len(text) - len(text.lstrip())
    try:
        value, end = _scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"not JSON at character {exc.value}") from None
    if text[end:].strip():
        raise ValueError(f"extra data at character {end}")
    return value


# <site>/guard/hooks/hookclient.py -> <site>/guard
PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _host_env() -> "tuple[tuple[str, ...], tuple[str, ...]]":
    """(names, prefixes) of the variables the hosts read (guard/hosts/hook_env.py, a
    module that imports nothing, loaded by its path through its byte-code cache)."""
    import _frozen_importlib as bootstrap
    import _frozen_importlib_external as external

    path = os.path.join(PACKAGE, "hosts", "hook_env.py")
    loader = external.SourceFileLoader("guard_hook_env", path)
    spec = bootstrap.spec_from_loader(loader.name, loader)
    if spec is None:  # pragma: no cover - a file loader always has a spec
        raise ImportError(f"cannot load {path}")
    table = bootstrap.module_from_spec(spec)
    loader.exec_module(table)
    return tuple(table.NAMES), tuple(table.PREFIXES)


_HOST_NAMES, _HOST_PREFIXES = _host_env()
#: Variables a decision reads from the deciding process's own environment (where guard's
#: data and configuration are, which shell and programs a confined command finds, what
#: the host says of itself: each host record's ``environment``, what is loaded into the
#: process), by name and by prefix. hookd is started by whichever client finds none
#: running, with that client's environment (an agent's build-mode command can be that
#: client): it serves only clients whose values of all of these equal its own
#: (:func:`decision_env`), and its socket is named by them, so each environment has its
#: own daemon.
SAME_ENV = ("HOME", "TMPDIR", "PATH", *_HOST_NAMES)
SAME_PREFIXES = ("GUARD_", "XDG_", "LD_", *_HOST_PREFIXES)
SITE = os.path.dirname(PACKAGE)

# Import guard from this installation, never from another one on sys.path.
_BOOT = (
    "import sys; sys.path.insert(0, {site!r}); from {module} import main; raise SystemExit(main())"
)


def boot_command(module: str) -> list[str]:
    """``python -I -c ...`` running ``module.main()`` from this file's own installation."""
    return [sys.executable, "-I", "-c", _BOOT.format(site=SITE, module=module)]


def run_dir() -> str:
    """``<data dir>/run``, computed like platformdirs' user_data_dir on Linux."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(os.path.realpath(base), "openoxide", "run")


def version() -> str:
    """``guard.__version__``, read from ``guard/version.py`` without importing guard."""
    try:
        with open(os.path.join(PACKAGE, "version.py"), encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return "unknown"
    for line in text.splitlines():
        name, eq, value = line.partition("=")
        if eq and name.strip() == "__version__":
            value = value.strip()
            if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
                return value[1:-1] or "unknown"
    return "unknown"


def fingerprint() -> str:
    """Changes whenever a file of guard's code or shipped policies changes on disk.

    ctime is part of it: no write, rename or ``touch -d`` can keep it. Every call
    pays for this walk, so it stats only the fingerprinted files (directories are
    told apart by the directory entry's type) and hashes once.
    """
    lines = []
    stack = [PACKAGE]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                entries = sorted((e.name, e) for e in it)
        except OSError as exc:
            lines.append(f"{top}\0error {exc.errno}")
            continue
        for name, entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name != "__pycache__":
                        stack.append(entry.path)
                    continue
                if not name.endswith(FINGERPRINTED):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            lines.append(
                f"{entry.path}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
            )
    lines.append("")
    return str(sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest())


def decision_env(environ: "dict[str, str] | None" = None) -> dict[str, str]:
    """The variables of ``environ`` (default: this process's) that change a decision made
    in this process (:data:`SAME_ENV`, :data:`SAME_PREFIXES`), sorted by name."""
    env = os.environ if environ is None else environ
    return {
        k: env[k]
        for k in sorted(env)
        if (k in SAME_ENV or k.startswith(SAME_PREFIXES))
        and k not in ENV_KEYS and k not in CLIENT_KEYS
    }


def identity() -> dict[str, str]:
    """Who this installation is, and in which environment it decides, as both ends of the
    socket compare it."""
    env = dumps(decision_env(), sort_keys=True).encode("utf-8", "surrogateescape")
    return {
        "package": PACKAGE,
        "version": version(),
        "prefix": os.path.realpath(sys.prefix),
        "fingerprint": fingerprint(),
        "env": str(sha256(env).hexdigest())[:32],
    }


def key_of(ident: dict[str, str]) -> str:
    """The name of an installation's socket, lock and pid file: ``hookd-<key>.*``."""
    text = dumps(ident, sort_keys=True)
    return str(sha256(text.encode("utf-8", "surrogateescape")).hexdigest())[:16]


def files(key: str) -> dict[str, str]:
    """Names (inside :func:`run_dir`) of one installation's socket, lock and pid file."""
    return {kind: f"hookd-{key}.{kind}" for kind in ("sock", "lock", "pid")}


def socket_path(key: str | None = None) -> str:
    """This installation's socket (or the one of ``key``)."""
    return os.path.join(run_dir(), files(key or key_of(identity()))["sock"])


def pid_path(key: str | None = None) -> str:
    """This installation's daemon pid file (or the one of ``key``)."""
    return os.path.join(run_dir(), files(key or key_of(identity()))["pid"])


def open_run_dir(create: bool = False) -> int | None:
    """An ``O_PATH`` descriptor of the run directory, if it is ours and nobody else can write it."""
    path = run_dir()
    if create:
        try:  # noqa: SIM105 (contextlib is not loaded; importing it costs)
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            pass
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        os.close(fd)
        return None
    return fd


def trusted(path: str) -> bool:
    """The socket and its directory belong to us and nobody else can replace them."""
    try:
        d = os.lstat(os.path.dirname(path))
        s = os.lstat(path)
    except OSError:
        return False
    uid = os.getuid()
    return (
        stat.S_ISDIR(d.st_mode)
        and d.st_uid == uid
        and not d.st_mode & 0o022
        and stat.S_ISSOCK(s.st_mode)
        and s.st_uid == uid
    )


class Refused(Exception):
    """A daemon answered but refused the call (another installation or environment)."""


_START = 0.0  # when main() began (time.monotonic()), for DEADLINE


def _left() -> float:
    """Seconds left of :data:`DEADLINE`."""
    import time

    return DEADLINE - (time.monotonic() - _START) if _START else DEADLINE


def _exchange(dirfd: int, name: str, request: dict[str, object], timeout: float) -> "Any":
    """Send ``request`` to the socket ``name`` in the directory ``dirfd`` and read the one
    JSON reply, within ``timeout`` seconds per socket operation.

    Connects through the checked directory descriptor: no path swap, no length limit.
    Raises OSError (no answer in time, a refused connection) or ValueError (not one JSON
    value)."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(f"/proc/self/fd/{dirfd}/{name}")
        sock.sendall(dumps(request).encode() + b"\n")
        sock.shutdown(_socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    finally:
        sock.close()
    return loads(b"".join(chunks).decode("utf-8", "surrogateescape"))


def ask_daemon(request: dict[str, object], key: str) -> dict[str, object] | None:
    """The daemon's answer, or None when no trustworthy daemon of ours answered properly.

    Raises :class:`Refused` when a daemon refused: waiting for it is pointless.
    """
    dirfd = open_run_dir()
    if dirfd is None:
        if not os.path.lexists(run_dir()):
            return None  # no daemon ever ran here
        raise Refused("the run directory is not ours alone")
    try:
        name = files(key)["sock"]
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            raise Refused(f"{name} is not a socket of ours")
        left = _left()
        if left <= 0:
            return None
        reply = _exchange(dirfd, name, request, left)
    except (OSError, ValueError):
        return None
    finally:
        os.close(dirfd)
    if not isinstance(reply, dict):
        return None
    if reply.get("retry") or reply.get("v") != PROTOCOL or reply.get("id") != request["id"]:
        raise Refused(str(reply.get("why", "another installation")))  # never trust it
    if not isinstance(reply.get("exit_code"), int) or reply.get("payload") != request["digest"]:
        return None
    return reply


def ask_status(name: str) -> dict[str, object] | None:
    """What the daemon answering on ``name`` (a socket in the run directory) decides with:
    its pid, test switches, walls and environment (``guard doctor``); None when no
    trustworthy daemon answered."""
    dirfd = open_run_dir()
    if dirfd is None:
        return None
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            return None
        reply = _exchange(dirfd, name, {"v": PROTOCOL, "status": True}, 10.0)
    except (OSError, ValueError):
        return None
    finally:
        os.close(dirfd)
    return reply if isinstance(reply, dict) and reply.get("status") else None


def daemon_running(key: str) -> bool:
    """True when the installation's lock is held: a daemon runs or is starting."""
    import fcntl

    dirfd = open_run_dir(create=True)
    if dirfd is None:
        return True  # an untrusted run directory: do not start anything there
    try:
        fd = os.open(
            files(key)["lock"],
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dirfd,
        )
    except OSError:
        return True
    finally:
        os.close(dirfd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the lock if we took it
    return False


def start_daemon(key: str) -> bool:
    """Start this installation's hookd detached, unless one runs; racing starts are harmless.

    True when a daemon runs or was started.
    """
    import subprocess

    if daemon_running(key):
        return True
    try:
        subprocess.Popen(
            [*boot_command("guard.hooks.hookd"), "hookd"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return False
    return True


def ask_or_start(request: dict[str, object], key: str) -> dict[str, object] | None:
    """Ask the daemon; when none answers, start one and keep asking while it comes up.

    A daemon starts in a fraction of the time an in-process decision takes, so
    under load (or after the daemon was killed) waiting for it is the cheap
    path. Gives up after :data:`STARTUP_WAIT` seconds, at once when a daemon
    refused the call, and after a second when no daemon holds the lock.
    """
    import time

    try:
        reply = ask_daemon(request, key)
        if reply is not None or not start_daemon(key):
            return reply
        start = time.monotonic()
        while time.monotonic() - start < STARTUP_WAIT and _left() > 0:
            time.sleep(0.05)
            reply = ask_daemon(request, key)
            if reply is not None:
                return reply
            if time.monotonic() - start > 1.0 and not daemon_running(key):
                return None  # it died or refused to start: decide in-process
    except Refused:
        return None
    return None


def main(argv: list[str]) -> int:
    global _START
    import time

    _START = time.monotonic()
    payload = sys.stdin.buffer.read()
    trace = os.environ.get("GUARD_HOOK_TRACE") == "1"
    use_daemon = os.environ.get("GUARD_HOOK_DAEMON", "1") != "0"
    key = ""
    if use_daemon:
        ident = identity()
        key = key_of(ident)
        request = {
            "v": PROTOCOL,
            "id": ident,
            "argv": argv,
            "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
            "same_env": decision_env(),
            "cwd": os.getcwd(),
            "payload": payload.decode("utf-8", "surrogateescape"),
            "digest": sha256(payload).hexdigest(),
        }
        reply = ask_or_start(request, key)
        if reply is not None:
            sys.stdout.write(str(reply.get("stdout", "")))
            sys.stdout.flush()
            sys.stderr.write(str(reply.get("stderr", "")))
            if trace:
                sys.stderr.write(f"guard hook: answered by hookd pid {reply.get('pid')}\n")
            return int(str(reply["exit_code"]))
    import subprocess  # only on the slow path: keeps the daemon path's start cheap

    try:
        proc = subprocess.run(
            [*boot_command("guard.hooks.__main__"), *argv],
            input=payload,
            capture_output=True,
            check=False,
            timeout=max(0.5, _left()),
        )
    except subprocess.TimeoutExpired:
        sys.stderr.write(
            f"guard (fail-closed): no decision within {DEADLINE:.0f} s (neither hookd nor"
            " the in-process decision answered in time); the call is blocked\n"
        )
        return 2
    sys.stdout.buffer.write(proc.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(proc.stderr)
    if trace:
        sys.stderr.write("guard hook: answered in-process\n")
    return proc.returncode if proc.returncode in (0, 2) else 2
