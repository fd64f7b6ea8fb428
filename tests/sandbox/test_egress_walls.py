"""The egress proxy forwards only what it decided, and refuses at once what it cannot
serve: a flood of connections, a git fetch whose body is anything but upload-pack's
pkt-lines (or whose target carries a query), and a name that resolves to an address
of the proxy machine's own interfaces.

Each attack speaks to the real proxy (tests/sandbox/egress_driver.py) and real servers on
127.0.0.1 that record what reaches them; the servers and the audit log are checked.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from egress_support import port_of, proxy, recorder, shared_dir, write_policy

from guard.sandbox import egress_proxy


@pytest.fixture
def work() -> Iterator[Path]:
    d = shared_dir("guard-egress-walls-")
    (d / "repo").mkdir(mode=0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _policy(work: Path, allow: str, resolve: str = "") -> Path:
    return write_policy(work, f"""version = 1
extends = ["builtin:default"]
[agents.plan.network]
allow = ["{allow}"]
[egress]
resolve = {{ {resolve} }}
""")


def _records(work: Path) -> list[dict[str, object]]:
    path = work / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_attack_a_flood_of_connections_is_answered_503_at_once(work: Path) -> None:
    """Every slot is held by an idle connection; more connections, each kept open by its
    client without a word, are each answered 503 straight away: the proxy waits on none
    of them (it used to read from each for two seconds, one after the other, so a flood
    held every later client up). The bound below is far above what answering takes and
    below what waiting on each would."""
    pol = _policy(work, "api.test")
    held: list[socket.socket] = []
    excess: list[socket.socket] = []
    with proxy(pol, work / "repo", work / "audit.jsonl") as p:
        try:
            for _ in range(egress_proxy.MAX_CONNECTIONS):
                held.append(socket.create_connection(("127.0.0.1", p.port), timeout=60))
            while True:  # until the proxy has taken them all: the next one is refused
                probe = socket.create_connection(("127.0.0.1", p.port), timeout=60)
                probe.settimeout(1.0)
                try:
                    first = probe.recv(4096)
                except TimeoutError:
                    held.append(probe)  # accepted as a client: the proxy was not full yet
                    continue
                probe.close()
                assert first.startswith(b"HTTP/1.1 503 "), first
                break
            for _ in range(16):
                excess.append(socket.create_connection(("127.0.0.1", p.port), timeout=60))
            deadline = time.monotonic() + 20  # waiting 2 s on each would take 32 s
            answers = []
            for c in excess:
                c.settimeout(max(0.1, deadline - time.monotonic()))
                answers.append(c.recv(4096))
            assert all(a.startswith(b"HTTP/1.1 503 ") for a in answers), answers
            assert b"too many connections" in answers[0]
        finally:
            for c in held + excess:
                c.close()


# -- plan mode's one POST: a git fetch ----------------------------------------------

OID = "a" * 40


def _pkt(*lines: str | None) -> bytes:
    out = b""
    for line in lines:
        out += b"0000" if line is None else b"%04x%s\n" % (len(line) + 5, line.encode())
    return out


V0 = _pkt(f"want {OID} multi_ack_detailed side-band-64k thin-pack ofs-delta agent=git/2.43",
          None, f"have {'b' * 40}", "done")  # fmt: skip
V2 = (_pkt("command=fetch", "agent=git/2.43.0", "object-format=sha1")
      + b"0001" + _pkt("thin-pack", "ofs-delta", f"want {OID}", "done", None))  # fmt: skip


def _post(port: int, path: str, body: bytes, *extra: str) -> bytes:
    head = (
        f"POST http://api.test{path} HTTP/1.1\r\nHost: api.test\r\n"
        "Content-Type: application/x-git-upload-pack-request\r\n"
        + "".join(f"{h}\r\n" for h in extra)
        + f"Content-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(head.encode() + body)
        out = b""
        try:
            while chunk := c.recv(65536):  # to the end: the proxy closes after the answer
                out += chunk
        except OSError:
            pass
        return out


def test_attack_a_request_riding_in_a_git_fetch_body_never_leaves(work: Path) -> None:
    """The exemption's body is an HTTP request for the server to read after the fetch (a
    server that does not read a body would take it as the next request), or junk: it is
    not upload-pack's pkt-lines, so nothing is sent; the refusal is recorded."""
    with recorder() as srv:
        pol = _policy(work, "api.test", f'"api.test" = "127.0.0.1:{port_of(srv)}"')
        with proxy(pol, work / "repo", work / "audit.jsonl") as p:
            for body in (
                b"POST /deploy HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n\r\n",
                V0 + b"POST /deploy HTTP/1.1\r\nHost: api.test\r\n\r\n",
                _pkt("command=push", "agent=x") + b"0001" + _pkt("deploy", None),
            ):
                out = _post(p.port, "/repo.git/git-upload-pack", body)
                assert out.startswith(b"HTTP/1.1 400 "), out
        assert srv.seen == []
    refused = [r for r in _records(work) if r["decision"] == "deny"]
    assert len(refused) == 3 and all("pkt-line" in str(r["reason"]) or "not part of" in str(
        r["reason"]) or "not a fetch" in str(r["reason"]) for r in refused), refused  # fmt: skip


def test_attack_a_query_on_the_git_fetch_is_refused(work: Path) -> None:
    """The decision never saw the query (it is not recorded): the exemption carries none."""
    with recorder() as srv:
        pol = _policy(work, "api.test", f'"api.test" = "127.0.0.1:{port_of(srv)}"')
        with proxy(pol, work / "repo", work / "audit.jsonl") as p:
            out = _post(p.port, "/repo.git/git-upload-pack?action=deploy", V0)
            assert out.startswith(b"HTTP/1.1 403 "), out
        assert srv.seen == []
    (record,) = _records(work)
    assert record["decision"] == "deny" and "deploy" not in json.dumps(record)


def test_a_git_fetch_goes_up_as_read_and_the_connection_closes_after_it(work: Path) -> None:
    """A v0 and a v2 (gzip) fetch: each reaches the server with the body guard checked (gzip
    undone, with a length), and the connection ends after the response, keep-alive or not."""
    import gzip

    with recorder() as srv:
        pol = _policy(work, "api.test", f'"api.test" = "127.0.0.1:{port_of(srv)}"')
        with proxy(pol, work / "repo", work / "audit.jsonl") as p:
            out = _post(p.port, "/repo.git/git-upload-pack", V0, "Connection: keep-alive")
            assert out.startswith(b"HTTP/1.1 200 ") and out.endswith(b"answered\n"), out
            out = _post(p.port, "/repo.git/git-upload-pack", gzip.compress(V2),
                        "Content-Encoding: gzip", "Git-Protocol: version=2")  # fmt: skip
            assert out.startswith(b"HTTP/1.1 200 "), out
        assert [(s.method, s.path, s.body) for s in srv.seen] == [
            ("POST", "/repo.git/git-upload-pack", V0),
            ("POST", "/repo.git/git-upload-pack", V2),
        ]
        assert "content-encoding" not in srv.seen[1].headers
        assert srv.seen[1].headers["git-protocol"] == "version=2"


# -- the machine's own addresses -----------------------------------------------------

OWN_ADDRESS = """
import http.server, json, socket, subprocess, sys, threading
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", "9.9.9.9/32", "dev", "lo"], check=True)  # a public one
seen = []
class Service(http.server.BaseHTTPRequestHandler):  # bound to all interfaces
    def do_GET(self):
        seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Service)
threading.Thread(target=srv.serve_forever, daemon=True).start()
port = srv.server_address[1]
from guard.sandbox import egress_proxy
proxy = egress_proxy.EgressProxy(egress_proxy.EgressSpec.from_argv_value(sys.argv[1]))
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
proxy.serve(listener)
with socket.create_connection(listener.getsockname(), timeout=60) as c:
    c.sendall(f"GET http://own.test:{port}/admin HTTP/1.1\\r\\n"
              f"Host: own.test:{port}\\r\\n\\r\\n".encode())
    answer = c.recv(4096).split(b"\\r\\n")[0].decode()
proxy.close()
print(json.dumps({"answer": answer, "seen": seen}))
"""


def test_attack_a_name_resolving_to_the_machines_own_public_address_is_local(
    work: Path,
) -> None:
    """A VPS's public IPv4 (here 9.9.9.9 on an interface of the proxy's network
    namespace, made for the test) reaches the machine's services bound to all
    interfaces: a name the policy allows that resolves to it (a private /etc/hosts) is
    decided as the address itself, like loopback, and refused; the service sees nothing.
    (The proxy runs as the user who runs guard, outside the command's namespaces: here
    root, with a network namespace of its own so that the host's stays untouched.)"""
    import subprocess
    import sys

    from egress_support import need_tools

    from guard.sandbox.egress_proxy import EgressSpec

    need_tools("unshare", "ip")
    pol = _policy(work, "own.test")
    hosts = work / "hosts"
    hosts.write_text("127.0.0.1 localhost\n9.9.9.9 own.test\n")
    spec = EgressSpec("plan", str(work / "repo"), str(pol), "hook", str(work / "audit.jsonl"))
    home = work / "home"  # the proxy's audit key lives there: the user's own
    home.mkdir(mode=0o777)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "GUARD_"))}
    env["HOME"] = str(home)
    unshare = ["unshare", "-n", "-m", "--propagation", "private"]
    proc = subprocess.run(
        [*unshare, "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts),
         sys.executable, "-c", OWN_ADDRESS, spec.to_argv()[1]],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["seen"] == [] and out["answer"].startswith("HTTP/1.1 403 "), out
    denied = [r for r in _records(work) if r.get("answered", r["decision"]) == "deny"]
    (record,) = denied
    assert record["egress"] == {"host": "own.test", "port": record["egress"]["port"],  # type: ignore[index]
                                "address": "9.9.9.9", "class": "this machine"}, record


def test_attack_a_slowloris_header_block_is_bounded_from_its_first_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that trickles its header block a byte at a time, each byte within the idle
    time-out, holds no connection past the block's own time limit: the read refuses the
    block (408) at the first byte after it. (The limit is made short for the test; the
    wait before a block's first byte is the idle time-out alone.)"""
    import threading

    from guard.sandbox import httpwire, sockio

    monkeypatch.setattr(sockio, "HEAD_TIME", 0.3)
    a, b = socket.socketpair()
    refused = threading.Event()

    def trickle() -> None:
        b.sendall(b"GET http://ok.test/ HTTP/1.1\r\n")
        for n in range(400):  # a header line every 0.05 s, until refused (20 s at most)
            if refused.wait(0.05):
                return
            b.sendall(b"X-%d: 1\r\n" % n)

    with a, b:
        a.settimeout(60)
        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        with pytest.raises(httpwire.WireError) as exc:
            sockio.Reader(a).head()
        refused.set()
        sender.join(30)
    assert exc.value.status == 408


def test_attack_a_client_hello_trickled_a_byte_at_a_time_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tunnel's ClientHello trickled a byte at a time: the reads that wait for it are
    refused (408) once the limit has passed since the first one."""
    import threading

    from guard.sandbox import httpwire, sockio

    monkeypatch.setattr(sockio, "HEAD_TIME", 0.3)
    a, b = socket.socketpair()
    refused = threading.Event()

    def trickle() -> None:
        for _ in range(400):  # a byte every 0.05 s, until refused (20 s at most)
            b.sendall(b"\x16")
            if refused.wait(0.05):
                return

    with a, b:
        a.settimeout(60)
        sender = threading.Thread(target=trickle, daemon=True)
        sender.start()
        reader = sockio.Reader(a)
        with pytest.raises(httpwire.WireError) as exc:
            while reader.fill_within(sockio.HEAD_TIME, "a hello"):
                pass
        refused.set()
        sender.join(30)
    assert exc.value.status == 408 and "a hello took more than" in exc.value.message
