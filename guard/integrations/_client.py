"""The hook command hosts run: a stdlib-only client of guard's warm hook daemon.

Run as a file (``python -I .../guard/integrations/_client.py HOST [options]``)
so that it imports neither guard nor pydantic: a hook call then costs one bare
interpreter start plus a round trip over a Unix socket to ``hookd``, which
keeps the policy core loaded. When no trustworthy daemon answers, the call is
decided in-process (``python -I -m guard.integrations``) and a daemon is
started for the next call. Every failure exits 2, which hosts treat as a block.

Trust: the socket must be a socket owned by this user, in a directory owned by
this user that nobody else can write; the daemon checks the peer's uid.
``GUARD_HOOK_DAEMON=0`` turns the daemon off.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import sys

PROTOCOL = 1
TIMEOUT = 25.0
ENV_KEYS = ("GUARD_AGENT", "GUARD_POLICY")
SAME_ENV = ("HOME", "XDG_DATA_HOME", "TMPDIR")


def run_dir() -> str:
    """``<data dir>/run``, computed like platformdirs' user_data_dir on Linux."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(os.path.realpath(base), "openoxide", "run")


def socket_path() -> str:
    return os.path.join(run_dir(), "hookd.sock")


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


def ask_daemon(request: dict[str, object]) -> dict[str, object] | None:
    """The daemon's answer, or None when no trustworthy daemon answered properly."""
    path = socket_path()
    if not trusted(path):
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            sock.connect(path)
            sock.sendall(json.dumps(request).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        reply = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return None
    if not isinstance(reply, dict) or not isinstance(reply.get("exit_code"), int):
        return None
    if reply.get("retry"):
        return None
    return reply


def start_daemon() -> None:
    """Start hookd detached; it refuses to run twice, so racing starts are harmless."""
    import subprocess

    with contextlib.suppress(OSError):
        subprocess.Popen(
            [sys.executable, "-I", "-m", "guard.integrations.hookd"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def main(argv: list[str]) -> int:
    payload = sys.stdin.buffer.read()
    trace = os.environ.get("GUARD_HOOK_TRACE") == "1"
    use_daemon = os.environ.get("GUARD_HOOK_DAEMON", "1") != "0"
    if use_daemon:
        request = {
            "v": PROTOCOL,
            "argv": argv,
            "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
            "same_env": {k: os.environ.get(k) for k in SAME_ENV},
            "cwd": os.getcwd(),
            "payload": payload.decode("utf-8", "surrogateescape"),
        }
        reply = ask_daemon(request)
        if reply is not None:
            sys.stdout.write(str(reply.get("stdout", "")))
            sys.stdout.flush()
            sys.stderr.write(str(reply.get("stderr", "")))
            if trace:
                sys.stderr.write("guard hook: answered by hookd\n")
            return int(str(reply["exit_code"]))
    import subprocess  # only on the slow path: keeps the daemon path's start cheap

    proc = subprocess.run(
        [sys.executable, "-I", "-m", "guard.integrations", *argv],
        input=payload,
        capture_output=True,
        check=False,
    )
    sys.stdout.buffer.write(proc.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(proc.stderr)
    if trace:
        sys.stderr.write("guard hook: answered in-process\n")
    if use_daemon:
        start_daemon()
    return proc.returncode if proc.returncode in (0, 2) else 2


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except BaseException as exc:  # fail closed, whatever happened
        with contextlib.suppress(BaseException):
            sys.stderr.write(f"guard (fail-closed): hook client: {type(exc).__name__}: {exc}\n")
        code = 2
    raise SystemExit(code)
