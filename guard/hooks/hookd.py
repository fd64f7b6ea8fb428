"""hookd: keeps guard's policy core loaded so that each hook call stays cheap.

Started on demand by the hook client (:mod:`guard.hooks.hookclient`), one
per user, data directory and installation: it answers on
``<data>/run/hookd-<key>.sock``, where ``<key>`` names the installation (the
package's resolved path, its version, the interpreter prefix and a fingerprint
of its code and shipped policies). The directory is 0700, the socket 0600. Each
request names the client's installation in full; a request from another
installation is refused, and a reply always names the daemon's own, which the
client checks.

Who is answered (:func:`peer_refusal`, from the kernel's ``SO_PEERCRED`` and the
peer's pidfd, never from anything the request says):

* a peer of hookd's own uid only. Root is not special: root's daemon answers
  root, and no user's daemon answers another uid (root included);
* never a process inside a confinement guard set up: one in another PID
  namespace than hookd's (every confined command with namespaces runs in its
  own), or one under more seccomp filters than hookd (every confined command
  installs guard's filter, with or without namespaces, and a process can never
  remove a filter: a child inherits it, and re-parenting does not shed it);
* and only while the peer is still the process that connected: its pidfd
  (``SO_PEERPIDFD``, else ``pidfd_open`` at once) must still name a live process
  after the checks, so a recycled pid cannot stand in for it.

A confined peer gets a refusal (exit code 2, ``retry``), never a decision: no
verdict is made for it and nothing is appended to an audit log. A genuine hook
client that is refused decides in-process, under whatever confinement it runs
in, where guard's data directory is read-only, so a forged "build" payload can
neither be answered by hookd nor recorded by the client itself. Anything that
cannot be checked (``/proc`` unreadable, the peer gone) is a refusal too.

It decides each call exactly as ``python -m guard.hooks`` would, and
exits after ``$GUARD_HOOKD_IDLE`` seconds without calls (default 600), or as
soon as guard's code or shipped policies change on disk: a client that sees a
changed installation asks another socket, and a request that reaches the old
daemon is refused (the client then decides in-process and starts a fresh
daemon). A killed daemon leaves its lock free: the next daemon of the same
installation takes it and replaces the stale socket and pid file, and any
daemon sweeps the files of installations whose lock nobody holds.
"""

from __future__ import annotations

# Lazy imports: started on the hook path; the policy core loads once, before serving.
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import socketserver
import struct
import threading
import time
from typing import Any

from guard.hooks.hookclient import (
    PROTOCOL,
    decision_env,
    files,
    identity,
    key_of,
    open_run_dir,
)

MAX_REQUEST = 16 << 20
TIMEOUT_STOP = 30.0  # seconds a worker may take to finish its call at shutdown


#: threads waiting in accept(2): each connection wakes exactly one, which answers it
WORKERS = 4


class Server(socketserver.UnixStreamServer):
    """The socket and a few worker threads, each blocked in ``accept`` until a call comes.

    No thread is started and no hand-off made per call (a call's latency is mostly
    wake-ups); :data:`WORKERS` calls are answered at once and more wait in the
    listen backlog.
    """

    def __init__(self, path: str, ident: dict[str, str]) -> None:
        super().__init__(path, Handler)
        self.ident = ident
        self.env = decision_env()
        self.last = time.monotonic()
        self.stopping = False
        self._done = threading.Event()

    def serve(self) -> None:
        """Answer calls until :meth:`stop`."""
        workers = [threading.Thread(target=self._work, daemon=True) for _ in range(WORKERS)]
        for w in workers:
            w.start()
        self._done.wait()
        for w in workers:
            w.join(timeout=TIMEOUT_STOP)

    def _work(self) -> None:
        while not self._done.is_set():
            try:
                conn, addr = self.socket.accept()
            except OSError:
                if self._done.is_set():
                    return
                time.sleep(0.01)  # EMFILE and the like: try again shortly
                continue
            try:
                with contextlib.suppress(Exception):  # no answer: the client decides itself
                    Handler(conn, addr, self)
            finally:
                self.shutdown_request(conn)

    def stop(self) -> None:
        """Stop accepting: the workers finish the call they answer and return."""
        self.stopping = True
        self._done.set()
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)  # wakes every accept() with an error


class Handler(socketserver.StreamRequestHandler):
    server: Server
    timeout = TIMEOUT_STOP  # a client that connects and sends nothing frees its worker

    def handle(self) -> None:
        self.server.last = time.monotonic()
        creds = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            return  # not ours: close without an answer
        data = self.rfile.read(MAX_REQUEST)
        why = peer_refusal(self.request, pid)
        reply = self.refuse(why) if why else self.answer(data, pid)
        reply.update(v=PROTOCOL, id=self.server.ident, pid=os.getpid())
        self.wfile.write(json.dumps(reply).encode() + b"\n")
        self.server.last = time.monotonic()

    def status(self) -> dict[str, Any]:
        """What this daemon decides with (``guard doctor``): its test switches and the walls
        and namespaces a command it confines gets, and its deciding environment."""
        from guard.sandbox import confine

        return {
            "status": True,
            "exit_code": 2,
            "switches": confine.test_switches(),
            "walls": confine.walls_off(),
            "namespaces": confine.namespaces_unavailable(),
            "env": self.server.env,
        }

    def refuse(self, why: str) -> dict[str, Any]:
        return {"retry": True, "exit_code": 2, "why": why}

    def answer(self, data: bytes, client_pid: int | None = None) -> dict[str, Any]:
        try:
            req = json.loads(data)
            if not isinstance(req, dict) or req.get("v") != PROTOCOL:
                return self.refuse("another protocol")
            if req.get("status"):
                return self.status()
            if self.server.stopping:
                return self.refuse("stopping")
            theirs = req.get("id")
            if not isinstance(theirs, dict):
                return self.refuse("no installation named")
            mine = self.server.ident
            if any(theirs.get(k) != mine[k] for k in ("package", "version", "prefix")):
                return self.refuse("another installation")
            same = req.get("same_env")
            if theirs.get("env") != mine["env"] or same != self.server.env:
                differ = sorted(k for k in {*(same or {}), *self.server.env}
                                if (same or {}).get(k) != self.server.env.get(k))
                return self.refuse(f"another environment ({', '.join(differ) or 'its digest'}"
                                   " differs from hookd's)")
            if theirs.get("fingerprint") != mine["fingerprint"]:
                if identity()["fingerprint"] != mine["fingerprint"]:
                    self.server.stopping = True  # our code or policies changed: stop now
                return self.refuse("another fingerprint")
            from guard.hooks.__main__ import parse_args
            from guard.hooks.front_door import decide

            host, agent, policy = parse_args([str(a) for a in req["argv"]])
            payload = str(req["payload"]).encode("utf-8", "surrogateescape")
            client_env = req.get("env") or {}
            answer = decide(
                host,
                payload,
                agent=agent,
                policy=policy,
                env={str(k): str(v) for k, v in dict(client_env).items()},
                cwd=str(req["cwd"]),
                client_pid=client_pid,
            )
            return {
                "exit_code": answer.exit_code,
                "stdout": answer.stdout,
                "stderr": answer.stderr,
                "payload": hashlib.sha256(payload).hexdigest(),
            }
        except BaseException as exc:  # fail closed
            return {
                "exit_code": 2,
                "stdout": "",
                "stderr": f"guard (fail-closed): hookd: {type(exc).__name__}: {exc}\n",
            }


#: ``SO_PEERPIDFD`` (Linux 6.5): a pidfd of the peer as it was when it connected.
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)


def _pid_namespace(pid: int | str) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


def _seccomp_filters(pid: int | str) -> int:
    """How many seccomp filters the process runs under (``Seccomp_filters``, Linux 5.9;
    before it, 1 for any filter mode): filters are inherited and never removed."""
    mode = 0
    with open(f"/proc/{pid}/status", "rb") as fh:
        for line in fh:
            if line.startswith(b"Seccomp_filters:"):
                return int(line.split()[1])
            if line.startswith(b"Seccomp:"):
                mode = int(line.split()[1])
    return 1 if mode == 2 else 0


def _peer_pidfd(conn: socket.socket, pid: int) -> int | None:
    """A pidfd naming the peer: the kernel's own (``SO_PEERPIDFD``), else one opened now
    (``pidfd_open``), else None (a kernel with neither)."""
    try:
        return int(conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD))
    except OSError as exc:
        if exc.errno != errno.ENOPROTOOPT:
            raise  # ESRCH: the peer is gone already (its pid may be another's by now)
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def peer_refusal(conn: socket.socket, pid: int) -> str:
    """Why the peer ``pid`` on ``conn`` must not be answered ("" when it may be): it runs
    inside a confinement guard set up, or it cannot be checked (fail closed)."""
    import signal

    try:
        pidfd = _peer_pidfd(conn, pid)
    except OSError as exc:
        return f"the peer cannot be checked ({exc.strerror or exc})"
    try:
        try:
            if pid <= 0:
                return "the peer's process is not visible from hookd (another PID namespace)"
            if _pid_namespace(pid) != _pid_namespace("self"):
                return "the peer runs in another PID namespace (a confined command)"
            theirs, mine = _seccomp_filters(pid), _seccomp_filters("self")
            if theirs > mine:
                return (
                    f"the peer runs under {theirs} seccomp filters, hookd under {mine}"
                    " (a confined command)"
                )
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, 0)  # still the process that connected
        except (OSError, ValueError, IndexError) as exc:
            return f"the peer cannot be checked ({type(exc).__name__}: {exc})"
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return ""


def take_lock(dirfd: int, name: str, patience: float = 0.0) -> int | None:
    """An exclusive lock on ``name`` (a file that is still at that name), or None when held.

    ``patience``: seconds to keep trying, for the hook clients' brief checks
    of the lock (:func:`guard.hooks.hookclient.daemon_running`).
    """
    deadline = time.monotonic() + patience
    for _ in range(5):
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=dirfd)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(0.01)
        try:
            same = os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # swept away while we waited: lock the file now at that name
    return None


def sweep(dirfd: int, mine: str) -> None:
    """Remove the socket, pid and lock files of daemons that no longer run."""
    for name in os.listdir(f"/proc/self/fd/{dirfd}"):
        if not (name.startswith("hookd") and name.endswith(".lock")) or name == mine:
            continue
        fd = take_lock(dirfd, name)
        if fd is None:
            continue  # its daemon runs
        stem = name[: -len(".lock")]
        for suffix in (".sock", ".pid", ".lock"):
            with contextlib.suppress(OSError):
                os.unlink(stem + suffix, dir_fd=dirfd)
        os.close(fd)


def write_pid(dirfd: int, name: str) -> None:
    tmp = f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)


IDLE_DEFAULT = 600.0


def idle_seconds(env: dict[str, str] | None = None) -> float:
    """How long the daemon waits for a call before it exits: ``$GUARD_HOOKD_IDLE`` seconds
    (a positive number), else 600; a value that is not one counts as the default."""
    raw = (os.environ if env is None else env).get("GUARD_HOOKD_IDLE", "").strip()
    try:
        value = float(raw)
    except ValueError:
        return IDLE_DEFAULT
    return value if 0 < value < float("inf") else IDLE_DEFAULT


def main() -> int:
    idle = idle_seconds()
    for key in ("GUARD_AGENT", "GUARD_POLICY"):  # each call brings its own
        os.environ.pop(key, None)
    os.chdir("/")
    ident = identity()
    names = files(key_of(ident))
    dirfd = open_run_dir(create=True)
    if dirfd is None:
        return 1  # not a directory only we can write: refuse to serve from it
    lock = take_lock(dirfd, names["lock"], patience=0.5)
    if lock is None:
        return 0  # this installation's daemon runs (or is starting)
    sweep(dirfd, names["lock"])
    with contextlib.suppress(FileNotFoundError):
        os.unlink(names["sock"], dir_fd=dirfd)  # a killed daemon's stale socket
    from guard.hooks import front_door  # noqa: F401  (load the policy core before serving)

    path = f"/proc/self/fd/{dirfd}/{names['sock']}"
    old = os.umask(0o177)
    try:
        server = Server(path, ident)
    finally:
        os.umask(old)
    bound = os.stat(names["sock"], dir_fd=dirfd, follow_symlinks=False).st_ino
    write_pid(dirfd, names["pid"])

    def ours() -> bool:
        try:
            return os.stat(names["sock"], dir_fd=dirfd, follow_symlinks=False).st_ino == bound
        except OSError:
            return False

    def reaper() -> None:
        while True:
            time.sleep(min(1.0, idle / 4))
            changed = identity()["fingerprint"] != ident["fingerprint"]
            if changed or server.stopping or not ours() or time.monotonic() - server.last > idle:
                server.stop()
                return

    threading.Thread(target=reaper, daemon=True).start()
    try:
        server.serve()
    finally:
        # still under our lock: nobody else can have put their files there
        if ours():
            with contextlib.suppress(OSError):
                os.unlink(names["sock"], dir_fd=dirfd)
        with contextlib.suppress(OSError):
            os.unlink(names["pid"], dir_fd=dirfd)
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
