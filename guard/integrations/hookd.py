"""hookd: keeps guard's policy core loaded so that each hook call stays cheap.

Started on demand by the hook client (:mod:`guard.integrations._client`),
one per user and data directory. It answers on ``<data>/run/hookd.sock``
(directory 0700, socket 0600, peers of another uid refused), decides each
call exactly as ``python -m guard.integrations`` would, and exits after
``$GUARD_HOOKD_IDLE`` seconds without calls (default 600), or as soon as
guard's code or shipped policies change on disk (the client then decides
in-process and starts a fresh daemon).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import socketserver
import struct
import threading
import time
from pathlib import Path
from typing import Any

import guard
from guard.integrations.__main__ import parse_args
from guard.integrations._client import PROTOCOL, SAME_ENV, run_dir, socket_path
from guard.integrations.runner import decide

MAX_REQUEST = 16 << 20


def fingerprint() -> str:
    """Changes whenever guard's code or shipped policies change on disk."""
    root = Path(guard.__file__).parent
    h = hashlib.sha256()
    for p in sorted([*root.rglob("*.py"), *root.rglob("*.toml")]):
        with contextlib.suppress(OSError):
            st = p.stat()
            h.update(f"{p}\0{st.st_mtime_ns}\0{st.st_size}\n".encode())
    return h.hexdigest()


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str) -> None:
        super().__init__(path, Handler)
        self.fp = fingerprint()
        self.env = {k: os.environ.get(k) for k in SAME_ENV}
        self.last = time.monotonic()
        self.stopping = False


class Handler(socketserver.StreamRequestHandler):
    server: Server

    def handle(self) -> None:
        self.server.last = time.monotonic()
        creds = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            return  # not ours: close without an answer
        reply = self.answer(self.rfile.read(MAX_REQUEST))
        self.wfile.write(json.dumps(reply).encode() + b"\n")
        self.server.last = time.monotonic()

    def answer(self, data: bytes) -> dict[str, Any]:
        try:
            req = json.loads(data)
            if not isinstance(req, dict) or req.get("v") != PROTOCOL:
                return {"retry": True, "exit_code": 2}
            client_env = req.get("env") or {}
            same = req.get("same_env") or {}
            if any(same.get(k) != self.server.env[k] for k in SAME_ENV):
                return {"retry": True, "exit_code": 2}
            if fingerprint() != self.server.fp:
                self.server.stopping = True
                return {"retry": True, "exit_code": 2}
            host, agent, policy = parse_args([str(a) for a in req["argv"]])
            answer = decide(
                host,
                str(req["payload"]).encode("utf-8", "surrogateescape"),
                agent=agent,
                policy=policy,
                env={str(k): str(v) for k, v in dict(client_env).items()},
                cwd=str(req["cwd"]),
            )
            return {"exit_code": answer.exit_code, "stdout": answer.stdout, "stderr": answer.stderr}
        except BaseException as exc:  # fail closed
            return {
                "exit_code": 2,
                "stdout": "",
                "stderr": f"guard (fail-closed): hookd: {type(exc).__name__}: {exc}\n",
            }


def main() -> int:
    idle = float(os.environ.get("GUARD_HOOKD_IDLE", "600"))
    for key in ("GUARD_AGENT", "GUARD_POLICY"):  # each call brings its own
        os.environ.pop(key, None)
    os.chdir("/")
    run = run_dir()
    os.makedirs(run, mode=0o700, exist_ok=True)
    st = os.lstat(run)
    if st.st_uid != os.getuid():
        return 1
    lock = os.open(os.path.join(run, "hookd.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another hookd is running
    os.chmod(run, 0o700)
    path = socket_path()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    old = os.umask(0o177)
    try:
        server = Server(path)
    finally:
        os.umask(old)
    pidfile = os.path.join(run, "hookd.pid")
    with open(pidfile, "w") as fh:
        fh.write(f"{os.getpid()}\n")

    def reaper() -> None:
        while True:
            time.sleep(min(1.0, idle / 4))
            if server.stopping or time.monotonic() - server.last > idle:
                server.shutdown()
                return

    threading.Thread(target=reaper, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.unlink(pidfile)
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
