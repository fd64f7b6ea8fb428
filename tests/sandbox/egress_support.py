"""Real parts for the egress proxy tests: servers on 127.0.0.1 that record what reaches
them, guard's proxy in a process of its own (started like the confinement helper:
``python -E -s -S``, the proxy module imported by its plain name), and commands run
in a network namespace of their own whose only way out is the proxy's listener,
handed out of the namespace as a file descriptor (the shape of guard's confinement).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import select
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nobody import reach

import guard.sandbox.egress_proxy as egress

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "egress_driver.py"
SHIM = HERE / "netns_shim.py"
SANDBOX_DIR = Path(egress.__file__).resolve().parent
NOBODY = 65534
#: The shim runs as nobody in a user namespace: an interpreter every user may run (a
#: virtual environment under /root may not be), the standard library is all it needs.
SHIM_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


# -- servers -------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    host: str | None
    headers: dict[str, str]
    body: bytes


class _Recording(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RecordingServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self) -> None:
        body = self._body()
        self.server.seen.append(Seen(self.command, self.path, self.headers.get("Host"),
                                     {k.lower(): v for k, v in self.headers.items()}, body))
        if self.path.startswith("/big/"):
            self._big(int(self.path.split("/")[2]))
            return
        out = f"{self.command} {self.path} answered\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def _big(self, size: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        chunk = b"\xa5" * (1 << 20)
        left = size
        while left > 0:
            n = min(left, len(chunk))
            self.wfile.write(chunk[:n])
            left -= n

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle


class _RecordingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    seen: list[Seen]


@contextlib.contextmanager
def recorder(tls: Path | None = None) -> Iterator[_RecordingServer]:
    """An HTTP server on 127.0.0.1 that records every request reaching it (``seen``);
    with ``tls`` (a directory holding cert.pem and key.pem), HTTPS."""
    srv = _RecordingServer(("127.0.0.1", 0), _Recording)
    srv.seen = []
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls / "cert.pem", tls / "key.pem")
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def port_of(srv: http.server.HTTPServer) -> int:
    return int(srv.server_address[1])


def make_cert(where: Path, *names: str) -> Path:
    """A self-signed certificate (openssl) for ``names``: cert.pem, key.pem."""
    where.mkdir(parents=True, exist_ok=True)
    san = ",".join(f"DNS:{n}" for n in names)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={names[0]}", "-addext", f"subjectAltName={san}",
         "-keyout", str(where / "key.pem"), "-out", str(where / "cert.pem")],
        check=True, capture_output=True,
    )
    return where


class _GitCgi(http.server.BaseHTTPRequestHandler):
    """``git http-backend`` as CGI: each request runs it with the CGI variables."""

    protocol_version = "HTTP/1.1"
    server: _GitServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        body = _Recording._body(self)  # type: ignore[arg-type]
        path, _, query = self.path.partition("?")
        self.server.seen.append(Seen(self.command, path, self.headers.get("Host"), {}, b""))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        if self.headers.get("Content-Encoding", "") == "gzip":
            env["HTTP_CONTENT_ENCODING"] = "gzip"
        run = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, check=False)
        head, _, out = run.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = run.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _handle


class _GitServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    root: Path
    seen: list[Seen]


@contextlib.contextmanager
def git_server(root: Path) -> Iterator[_GitServer]:
    """A git smart-HTTP remote on 127.0.0.1 serving the bare repositories under ``root``
    (``http.receivepack`` is on, so a push is accepted unless something stops it)."""
    srv = _GitServer(("127.0.0.1", 0), _GitCgi)
    srv.root = root
    srv.seen = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


# -- the proxy ------------------------------------------------------------------


@dataclass
class Proxy:
    """guard's egress proxy in a process of its own."""

    proc: subprocess.Popen[str]
    port: int
    audit: Path
    lines: list[str] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines() if line]

    def loaded(self) -> set[str]:
        """Which of guard, relay, httpwire, json, ipaddress the proxy process has imported
        (asked over stdin)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("modules\n")
        self.proc.stdin.flush()
        answer = _line(self.proc, 10).split()[1]
        return {m for m in answer.removeprefix("loaded=").split(",") if m}


def _line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise AssertionError("the egress proxy process did not answer in time")
    return proc.stdout.readline()


def shared_dir(prefix: str) -> Path:
    """A directory every user may use (an unprivileged command writes in it)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(0o777)
    return d


def write_policy(where: Path, text: str) -> Path:
    path = where / "policy.toml"
    path.write_text(text)
    path.chmod(0o644)
    return path


@contextlib.contextmanager
def proxy(
    policy: Path,
    cwd: Path,
    audit: Path,
    *,
    agent: str = "plan",
    source: str = "hook",
    hosts: dict[str, Sequence[str]] | None = None,
    channel: socket.socket | None = None,
) -> Iterator[Proxy]:
    """Run the proxy (tests/sandbox/egress_driver.py) for ``agent``.

    ``hosts``: name -> addresses of a private ``/etc/hosts`` the proxy's process sees
    (a mount namespace of its own), so that real name resolution answers what a test
    needs. ``channel``: a Unix socket on which the listener arrives as a descriptor
    (:func:`confined`); otherwise the proxy listens on 127.0.0.1 itself.
    """
    spec = egress.EgressSpec(agent, str(cwd), str(policy), source, str(audit))
    argv = [sys.executable, "-E", "-s", "-S", str(DRIVER), "--sandbox", str(SANDBOX_DIR),
            "--spec", spec.to_argv()[1]]
    pass_fds: tuple[int, ...] = ()
    if channel is not None:
        argv += ["--channel", str(channel.fileno())]
        pass_fds = (channel.fileno(),)
    if hosts is not None:
        hosts_file = cwd.parent / "hosts"
        hosts_file.write_text("127.0.0.1 localhost\n" + "".join(
            f"{addr} {name}\n" for name, addrs in hosts.items() for addr in addrs))
        unshare = ["unshare", "-m", "--propagation", "private"]
        if os.geteuid() != 0:
            unshare = ["unshare", "-U", "-r", "-m", "--propagation", "private"]
        argv = [*unshare, "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"',
                str(hosts_file), *argv]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, pass_fds=pass_fds)
    try:
        first = _line(proc, 30)
        if not first.startswith("ready "):
            proc.kill()
            raise AssertionError(f"the proxy did not start: {first!r} {proc.stderr.read()!r}"
                                 if proc.stderr else first)
        p = Proxy(proc, int(first.split()[1]) if channel is None else egress.PROXY_PORT, audit)
        p.lines.append(first)
        yield p
    finally:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


# -- commands in a network namespace of their own -------------------------------


def as_user(user: str) -> list[str]:
    """The argv prefix that runs a command as ``user`` ("root" or "nobody") in new
    network (and, for nobody, user) namespaces."""
    if user == "root":
        return ["unshare", "-n", "--"]
    setpriv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return [*reach(), *setpriv, "unshare", "-U", "-r", "-n", "--"]


def confined(
    argv: Sequence[str],
    *,
    user: str,
    policy: Path,
    cwd: Path,
    audit: Path,
    agent: str = "plan",
    source: str = "hook",
    hosts: dict[str, Sequence[str]] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run ``argv`` as ``user`` in a network namespace with loopback only, whose
    ``127.0.0.1:PROXY_PORT`` is a listener served by guard's proxy outside it (the
    descriptor crosses over a Unix socket), with the proxy variables set. Returns the
    completed command and the proxy's audit records."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    run_env = {**os.environ, **egress.proxy_env(), **(env or {})}
    try:
        with proxy(policy, cwd, audit, agent=agent, source=source, hosts=hosts,
                   channel=ours) as p:
            done = subprocess.run(
                [*as_user(user), SHIM_PYTHON, str(SHIM), str(theirs.fileno()),
                 str(egress.PROXY_PORT), "--", *argv],
                pass_fds=(theirs.fileno(),), cwd=cwd, env=run_env, capture_output=True,
                text=True, timeout=timeout, check=False,
            )
            return done, p.records()
    finally:
        ours.close()
        theirs.close()


def need_tools(*names: str) -> None:
    """Each program on PATH, else skip (locally) or fail (CI=true)."""
    from components import require_component

    for name in names:
        require_component(name, shutil.which(name), "scripts/test.sh installs it")


def wait_until(check: Any, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
