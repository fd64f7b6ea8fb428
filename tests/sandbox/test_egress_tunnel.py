"""A plan-mode CONNECT tunnel carries TLS only, and nothing reaches the server before that
is known: attacks on the egress proxy with a plaintext store (Redis's shape: it takes
``SET`` lines) behind a host the policy allows.

Each attack speaks to the real proxy (tests/sandbox/egress_driver.py) over a socket; the
store records every connection and every byte, and is checked afterwards, with the audit
log's refusal.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from egress_support import confined, need_tools, proxy, shared_dir, write_policy


class Store:
    """A plaintext key-value service on 127.0.0.1: records connections and bytes, answers
    ``+OK`` to a ``SET`` line and ``-ERR`` to anything else."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.data = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            buf = b""
            try:
                while chunk := conn.recv(4096):
                    self.data += chunk
                    buf += chunk
                    while b"\n" in buf:
                        line, _, buf = buf.partition(b"\n")
                        conn.sendall(b"+OK\r\n" if line.startswith(b"SET ") else b"-ERR\r\n")
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def setup() -> Iterator[tuple[Path, Store]]:
    work = shared_dir("guard-tunnel-")
    (work / "repo").mkdir(mode=0o777)
    store = Store()
    try:
        yield work, store
    finally:
        store.close()
        shutil.rmtree(work, ignore_errors=True)


def _policy(work: Path, store: Store) -> Path:
    return write_policy(work, f"""version = 1
extends = ["builtin:default"]
[agents.plan.network]
allow = ["store.test"]
[egress]
resolve = {{ "store.test" = "127.0.0.1:{store.port}" }}
""")


def _hello(name: str) -> bytes:
    """A real TLS ClientHello naming ``name``, as Python's ssl module sends it."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def _tunnel(port: int) -> socket.socket:
    c = socket.create_connection(("127.0.0.1", port), timeout=60)
    c.sendall(b"CONNECT store.test:6379 HTTP/1.1\r\nHost: store.test:6379\r\n\r\n")
    assert c.recv(4096).startswith(b"HTTP/1.1 200")
    return c


def _rest(c: socket.socket) -> bytes:
    out = b""
    try:
        while chunk := c.recv(4096):
            out += chunk
    except OSError:
        pass
    return out


def _refusals(work: Path) -> list[str]:
    records = [json.loads(x) for x in (work / "audit.jsonl").read_text().splitlines()]
    return [str(r["reason"]) for r in records if r["decision"] == "deny"]


def _attack(work: Path, store: Store, payload: bytes, *, half_close: bool) -> bytes:
    pol = _policy(work, store)
    with proxy(pol, work / "repo", work / "audit.jsonl") as p:
        c = _tunnel(p.port)
        with c:
            c.sendall(payload)
            if half_close:
                c.shutdown(socket.SHUT_WR)
            return _rest(c)


def test_attack_a_made_up_client_hello_carries_a_plaintext_set_to_no_one(
    setup: tuple[Path, Store],
) -> None:
    """A record header and a handshake type that look like TLS, then junk and a SET: the
    hello does not parse whole, the store is never even connected."""
    work, store = setup
    body = b"\x01\x00\x00\x20" + b"\x03\x03" + b"A" * 30
    payload = b"\x16\x03\x01" + len(body).to_bytes(2, "big") + body + b"SET owned 1\r\n"
    assert _attack(work, store, payload, half_close=False) == b""
    assert (store.connections, store.data) == (0, b"")
    assert any("malformed TLS ClientHello" in r for r in _refusals(work)), _refusals(work)


def test_attack_a_record_header_then_a_half_close_reaches_no_one(
    setup: tuple[Path, Store],
) -> None:
    work, store = setup
    assert _attack(work, store, b"\x16\x03\x01\x00\x40", half_close=True) == b""
    assert (store.connections, store.data) == (0, b"")
    assert any("ended before a complete TLS ClientHello" in r for r in _refusals(work))


def test_attack_a_real_client_hello_then_plaintext_stops_at_the_hello(
    setup: tuple[Path, Store],
) -> None:
    """A complete, real ClientHello naming the CONNECT host, then SET: the store gets
    guard's own ClientHello alone, answers it in plaintext, not TLS, and the tunnel closes
    before the client's hello or the SET goes up."""
    work, store = setup
    hello = _hello("store.test")
    assert _attack(work, store, hello + b"SET owned 1\r\n", half_close=False) == b""
    deadline = time.monotonic() + 10
    while store.connections == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert b"SET" not in store.data
    assert store.data.startswith(b"\x16\x03") and hello[11:43] not in store.data
    assert any("did not answer guard's own ClientHello with TLS" in r for r in _refusals(work))


def test_the_server_is_connected_only_once_the_hello_is_complete(
    setup: tuple[Path, Store],
) -> None:
    work, store = setup
    pol = _policy(work, store)
    hello = _hello("store.test")
    with proxy(pol, work / "repo", work / "audit.jsonl") as p, _tunnel(p.port) as c:
        c.sendall(hello[:20])
        time.sleep(0.5)  # time for a proxy that connected early to have done it
        assert store.connections == 0
        c.sendall(hello[20:])
        assert _rest(c) == b""  # the store does not speak TLS: the tunnel closes
    # one connection, once the hello was complete: guard's own ClientHello, which the
    # store answered in plaintext; the client's hello never went up
    assert store.connections == 1
    assert store.data.startswith(b"\x16\x03") and hello[11:43] not in store.data


def test_a_hello_naming_another_server_or_none_is_refused(setup: tuple[Path, Store]) -> None:
    work, store = setup
    for name in ("other.test", None):
        if name is None:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = ctx.wrap_bio(incoming, outgoing)
            with pytest.raises(ssl.SSLWantReadError):
                tls.do_handshake()
            hello = outgoing.read()
        else:
            hello = _hello(name)
        assert _attack(work, store, hello, half_close=False) == b""
    assert (store.connections, store.data) == (0, b"")
    refusals = _refusals(work)
    assert any("'other.test' is not the CONNECT host" in r for r in refusals), refusals
    assert any("names no server" in r for r in refusals), refusals


def _with_random(hello: bytes, random: bytes) -> bytes:
    """``hello`` (one record) with its 32 random bytes replaced: still a hello that parses
    whole, every length unchanged."""
    assert len(random) == 32 and hello[0] == 0x16 and hello[5] == 1
    return hello[:11] + random + hello[43:]


def test_attack_a_valid_client_hello_carrying_a_set_line_reaches_no_plaintext_store(
    setup: tuple[Path, Store],
) -> None:
    """A ClientHello that parses whole and names the CONNECT host, but whose random bytes
    are a line of the store's protocol: a line-based store would take the SET if the hello
    reached it. The proxy first checks, with a hello of its own, that the server speaks
    TLS; the store does not, so the client's hello never reaches it."""
    work, store = setup
    hello = _with_random(_hello("store.test"), b"\nSET owned 1\r\n".ljust(32, b"x"))
    assert _attack(work, store, hello, half_close=False) == b""
    time.sleep(0.5)  # time for a proxy that sent the hello on to have done it
    assert b"SET" not in store.data, store.data
    assert any("does not speak TLS" in r for r in _refusals(work)), _refusals(work)


def test_attack_a_hello_with_two_server_names_is_refused(setup: tuple[Path, Store]) -> None:
    """A server_name list with the CONNECT host and a second host name (a server may pick
    either): refused as malformed, nothing connected."""
    work, store = setup
    hello = bytearray(_hello("store.test"))
    name = b"store.test"
    entry = b"\x00" + len(name).to_bytes(2, "big") + name
    at = hello.index(entry) - 2  # the list's length
    other = b"\x00" + (10).to_bytes(2, "big") + b"other.test"
    new_list = entry + other
    ext = len(new_list).to_bytes(2, "big") + new_list
    # the extension: type 0, its length, then the list
    start = at - 4
    assert hello[start : start + 2] == b"\x00\x00"
    old_len = int.from_bytes(hello[start + 2 : start + 4], "big")
    grow = len(ext) - old_len
    hello[start + 2 : start + 4] = len(ext).to_bytes(2, "big")
    hello[at : at + old_len] = ext
    # the extensions block, the handshake message and the record grow alike
    exts = 5 + 4 + 2 + 32
    exts += 1 + hello[exts]
    exts += 2 + int.from_bytes(hello[exts : exts + 2], "big")
    exts += 1 + hello[exts]
    for pos, size in ((exts, 2), (6, 3), (3, 2)):
        value = int.from_bytes(hello[pos : pos + size], "big") + grow
        hello[pos : pos + size] = value.to_bytes(size, "big")
    assert _attack(work, store, bytes(hello), half_close=False) == b""
    assert (store.connections, store.data) == (0, b"")
    assert any("malformed TLS ClientHello" in r for r in _refusals(work)), _refusals(work)


def _with_extension(hello: bytes, etype: int, payload: bytes) -> bytes:
    """``hello`` (one record) with one more extension at the end, every length grown."""
    out = bytearray(hello)
    exts = 5 + 4 + 2 + 32
    exts += 1 + out[exts]
    exts += 2 + int.from_bytes(out[exts : exts + 2], "big")
    exts += 1 + out[exts]
    extra = etype.to_bytes(2, "big") + len(payload).to_bytes(2, "big") + payload
    for pos, size in ((exts, 2), (6, 3), (3, 2)):
        value = int.from_bytes(out[pos : pos + size], "big") + len(extra)
        out[pos : pos + size] = value.to_bytes(size, "big")
    return bytes(out + extra)


@pytest.mark.parametrize("etype", [0xFE0D, 0xFFCE], ids=["ech", "esni"])
def test_attack_encrypted_client_hello_fronting_is_refused(
    setup: tuple[Path, Store], etype: int
) -> None:
    """The outer server name is the CONNECT host, but an Encrypted Client Hello (or the
    older ESNI) names the real server inside, where guard cannot read it: a front serving
    many sites (a CDN) would route the tunnel to that other site. Refused in plan mode,
    nothing connected."""
    work, store = setup
    hello = _with_extension(_hello("store.test"), etype, b"\x00" + b"\x41" * 40)
    assert _attack(work, store, hello, half_close=False) == b""
    assert (store.connections, store.data) == (0, b"")
    assert any("Encrypted Client Hello" in r for r in _refusals(work)), _refusals(work)


#: Run inside the namespace: CONNECT through the proxy's listener, send argv[1]'s bytes
#: (hex), print what came back.
_SEND = """
import socket, sys
c = socket.create_connection(("127.0.0.1", 30128), timeout=60)
c.sendall(b"CONNECT store.test:6379 HTTP/1.1\\r\\nHost: store.test:6379\\r\\n\\r\\n")
head = c.recv(4096)
c.sendall(bytes.fromhex(sys.argv[1]))
out = b""
try:
    while chunk := c.recv(4096):
        out += chunk
except OSError:
    pass
print(head.split(b"\\r\\n")[0].decode(), len(out))
"""


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_attack_a_confined_command_sends_a_set_line_inside_a_valid_hello(
    setup: tuple[Path, Store], user: str
) -> None:
    """The same attack from a confined command (its own network namespace, as root and as
    an unprivileged user): the SET inside the hello's random never reaches the store."""
    need_tools("unshare", "setpriv")
    work, store = setup
    hello = _with_random(_hello("store.test"), b"\nSET owned 1\r\n".ljust(32, b"x"))
    done, records = confined(
        ["/usr/bin/python3", "-c", _SEND, hello.hex()], user=user,
        policy=_policy(work, store), cwd=work / "repo", audit=work / "audit.jsonl",
    )
    assert done.stdout.strip() == "HTTP/1.1 200 Connection established 0", done
    assert b"SET" not in store.data, store.data
    refused = [str(r["reason"]) for r in records if r["decision"] == "deny"]
    assert any("does not speak TLS" in r for r in refused), refused


def test_an_echo_of_guard_s_own_hello_is_not_taken_for_tls() -> None:
    """A plaintext service that sends back what it reads answers guard's hello with bytes
    that start like TLS (a handshake record): a ClientHello, not a ServerHello, so the
    server is not taken for a TLS one."""
    from guard.sandbox import tlsprobe

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def echo() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(conn.recv(65536))

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    port = srv.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        assert not tlsprobe.probe(c, "echo.test", port)
    assert not tlsprobe.known("echo.test", port)
    srv.close()
    assert tlsprobe.is_tls_answer(b"\x16\x03\x03\x00\x7a\x02")  # a ServerHello
    assert tlsprobe.is_tls_answer(b"\x15\x03\x03\x00\x02\x02")  # an alert
