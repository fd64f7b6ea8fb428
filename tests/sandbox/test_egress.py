"""guard's egress proxy, for real: commands in a network namespace of their own whose
only way out is the proxy, real clients (curl, git, openssl), servers on 127.0.0.1 that
record what reaches them, real name resolution (a private /etc/hosts in the proxy's
mount namespace). Each attack names what it tries; the servers, the remote's refs and
the audit log are checked afterwards. Commands run as root and as nobody (in a user
namespace of their own) where the privilege could matter.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from egress_support import (
    confined,
    git_server,
    make_cert,
    need_tools,
    port_of,
    proxy,
    recorder,
    shared_dir,
    write_policy,
)

USERS = ["root", "nobody"]


@pytest.fixture
def work() -> Iterator[Path]:
    """A directory every user can use, holding a git worktree ``repo`` (the command's
    cwd) and the audit log."""
    d = shared_dir("guard-egress-")
    repo = d / "repo"
    repo.mkdir(mode=0o777)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    repo.chmod(0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _policy(
    work: Path, allow: list[str], resolve: dict[str, str], model_api: list[str] | None = None
) -> Path:
    """The default policy, with ``allow`` as both agents' network allow list (and
    ``model_api`` as theirs when given), and ``resolve`` as ``[egress] resolve``."""
    allow_s = ", ".join(f'"{a}"' for a in allow)
    resolve_s = ", ".join(f'"{k}" = "{v}"' for k, v in resolve.items())
    api = "" if model_api is None else "model_api = [" + ", ".join(
        f'"{a}"' for a in model_api) + "]"
    return write_policy(work, f"""version = 1
extends = ["builtin:default"]
[agents.plan.network]
allow = [{allow_s}]
{api}
[agents.build.network]
allow = [{allow_s}]
{api}
[egress]
resolve = {{ {resolve_s} }}
""")


def _curl(*args: str) -> list[str]:
    return ["curl", "-sS", "--max-time", "60", *args]


def _verdicts(records: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(r.get("tool_name"), r.get("decision"), r.get("answered", r.get("decision")),
             r.get("rule")) for r in records]


# -- the plain-HTTP rules of plan mode --------------------------------------------


@pytest.mark.parametrize("user", USERS)
def test_plan_mode_post_through_the_proxy_never_reaches_the_server(
    work: Path, user: str
) -> None:
    """Attack: a confined plan-mode command POSTs to a host the policy allows (curl -d);
    plan mode sends only GET, HEAD and OPTIONS. The server sees nothing; the audit log
    has the refusal with its reason."""
    need_tools("curl", "unshare", "setpriv")
    with recorder() as srv:
        pol = _policy(work, ["api.test"], {"api.test": f"127.0.0.1:{port_of(srv)}"})
        done, records = confined(
            _curl("-i", "-d", "change=1", "http://api.test/orders"),
            user=user, policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
        )
        assert srv.seen == []
    assert "403" in done.stdout.splitlines()[0], done
    assert "plan-mode agent" in done.stdout and "POST http://api.test/orders" in done.stdout
    [rec] = records
    assert (rec["source"], rec["tool_name"], rec["decision"], rec["rule"]) == (
        "hook", "request", "deny", "guard.plan-network")
    assert rec["egress"] == {"host": "api.test", "port": 80, "method": "POST",
                             "path": "/orders", "body": True,
                             "content_type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize("user", USERS)
def test_plan_mode_get_to_an_allowed_host_mapped_to_a_local_server_works(
    work: Path, user: str
) -> None:
    """A GET to a host the policy allows, mapped by ``[egress] resolve`` to the test
    server, goes through and is recorded once, as an allow."""
    need_tools("curl", "unshare", "setpriv")
    with recorder() as srv:
        pol = _policy(work, ["docs.test"], {"docs.test": f"127.0.0.1:{port_of(srv)}"})
        done, records = confined(
            _curl("http://docs.test/guide?page=2"),
            user=user, policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
        )
        assert done.returncode == 0, done
        assert done.stdout == "GET /guide?page=2 answered\n"
        assert [(s.method, s.path, s.host) for s in srv.seen] == [
            ("GET", "/guide?page=2", "docs.test")]
    assert _verdicts(records) == [("request", "allow", "allow", records[0]["rule"])]
    assert "agents.plan.network.allow[0] 'docs.test'" in str(records[0]["rule"])
    assert records[0]["egress"]["path"] == "/guide"  # the query is not recorded


@pytest.mark.parametrize("user", USERS)
def test_a_host_no_rule_names_is_refused_without_being_resolved(work: Path, user: str) -> None:
    """Attack: reach a host the policy does not list, by HTTP and by HTTPS (CONNECT).
    Both are refused (the plan agent's network default asks, and the proxy cannot ask),
    and the name is never looked up: a refused name leaks nothing through DNS. The
    proxy's private /etc/hosts maps it to the recording server, so a lookup followed
    by a connection would show there."""
    need_tools("curl", "unshare", "setpriv")
    with recorder() as srv:
        pol = _policy(work, [], {})
        done, records = confined(
            ["sh", "-c", f"{' '.join(_curl('http://leak.test:' + str(port_of(srv)) + '/x'))};"
                         f" {' '.join(_curl('https://leak.test:' + str(port_of(srv)) + '/'))}"],
            user=user, policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
            hosts={"leak.test": ["127.0.0.1"]},
        )
        assert srv.seen == []
    assert "no rule matches; agents.plan.network.default is ask" in done.stdout
    assert "CONNECT tunnel failed, response 403" in done.stderr
    assert [(r["tool_name"], r["decision"], r["answered"]) for r in records] == [
        ("request", "ask", "deny"), ("connect", "ask", "deny")]
    assert all(r["tool_name"] != "address" for r in records)  # never resolved


def test_the_command_has_no_other_way_out(work: Path) -> None:
    """Attack: ignore the proxy and connect straight to the server's port on 127.0.0.1.
    In the namespace, loopback is the namespace's own: nothing listens there."""
    need_tools("curl", "unshare")
    with recorder() as srv:
        pol = _policy(work, ["*"], {})
        done, _ = confined(
            _curl("--noproxy", "*", f"http://127.0.0.1:{port_of(srv)}/direct"),
            user="root", policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
        )
        assert srv.seen == []
    assert done.returncode == 7, done  # curl: failed to connect


def test_the_proxy_process_imports_nothing_of_guard_before_the_first_connection(
    work: Path,
) -> None:
    """A confined command that never uses the network does not pay for the policy: the
    proxy's process (started like the helper, without site-packages) imports guard on
    the first connection, not before."""
    with recorder() as srv:
        pol = _policy(work, ["docs.test"], {"docs.test": f"127.0.0.1:{port_of(srv)}"})
        with proxy(pol, work / "repo", work / "audit.jsonl") as p:
            # the spec came as JSON, so json is loaded; nothing else is until a connection
            assert p.loaded() == {"json"}
            with socket.create_connection(("127.0.0.1", p.port)) as c:
                c.sendall(b"GET http://docs.test/ HTTP/1.1\r\nHost: docs.test\r\n"
                          b"Connection: close\r\n\r\n")
                assert _read_all(c).startswith(b"HTTP/1.1 200")
            assert {"guard", "relay", "httpwire"} <= p.loaded()


# -- raw protocol attacks (smuggling, splitting, disagreement) -------------------------


def _read_all(c: socket.socket, timeout: float = 30) -> bytes:
    c.settimeout(timeout)
    out = b""
    while True:
        try:
            data = c.recv(65536)
        except TimeoutError:
            return out
        if not data:
            return out
        out += data


@pytest.fixture
def raw(work: Path) -> Iterator[tuple[int, object, Path]]:
    """The proxy on 127.0.0.1 for the plan agent; ``api.test`` allowed and mapped to a
    recording server. Yields (proxy port, the server, the audit log)."""
    with recorder() as srv:
        pol = _policy(work, ["api.test"], {"api.test": f"127.0.0.1:{port_of(srv)}"})
        with proxy(pol, work / "repo", work / "audit.jsonl") as p:
            yield p.port, srv, work / "audit.jsonl"


SMUGGLING = {
    "content-length-and-chunked": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 44\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /b HTTP/1.1\r\nHost: api.test\r\n\r\n",
        "400", "both Transfer-Encoding and Content-Length"),
    "two-content-lengths": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n"
        b"Content-Length: 40\r\n\r\n",
        "400", "one decimal number"),
    "chunked-with-another-coding": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\n"
        b"Transfer-Encoding: gzip, chunked\r\n\r\n",
        "501", "only 'chunked' alone"),
    "transfer-encoding-with-a-space-before-the-colon": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding : chunked\r\n"
        b"\r\n0\r\n\r\n",
        "400", "malformed header field"),
    "folded-header": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nX-A: 1\r\n"
        b" Transfer-Encoding: chunked\r\n\r\n",
        "400", "folded header line"),
    "bare-lf-line-ends": (
        b"GET http://api.test/a HTTP/1.1\nHost: api.test\n\n",
        "400", "lone CR or LF"),
    "bare-cr-inside-a-header": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nX-A: 1\rContent-Length: 5\r\n\r\n",
        "400", "lone CR or LF"),
    "host-header-disagrees-with-the-absolute-url": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: evil.test\r\n\r\n",
        "400", "the Host header names 'evil.test'"),
    "host-header-names-another-port": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test:8080\r\n\r\n",
        "400", "the Host header names"),
    "two-host-headers": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nHost: evil.test\r\n\r\n",
        "400", "more than one Host header"),
    "origin-form-request-to-the-proxy": (
        b"POST /a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n\r\n",
        "400", "needs an absolute URL"),
    "user-info-in-the-url": (
        b"GET http://api.test@evil.test/a HTTP/1.1\r\n\r\n",
        "400", "user information"),
    "address-in-an-unusual-spelling": (
        b"GET http://2130706433/a HTTP/1.1\r\n\r\n",
        "400", "an address in an unusual spelling"),
    "hex-address": (
        b"GET http://0x7f.1/a HTTP/1.1\r\n\r\n",
        "400", "an address in an unusual spelling"),
    "transfer-encoding-in-http-1.0": (
        b"GET http://api.test/a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "400", "Transfer-Encoding in an HTTP/1.0 request"),
    "websocket-upgrade": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\n"
        b"Upgrade: websocket\r\n\r\n",
        "501", "protocol upgrades"),
    "http-2-preface": (
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "505", "is not HTTP/1.1 or HTTP/1.0"),
    "unknown-expectation": (
        b"GET http://api.test/a HTTP/1.1\r\nHost: api.test\r\nExpect: 200-ok\r\n\r\n",
        "417", "Expect"),
}


@pytest.mark.parametrize("attack", sorted(SMUGGLING))
def test_requests_two_parsers_could_read_differently_are_refused(
    raw: tuple[int, object, Path], attack: str
) -> None:
    """Attack: request smuggling and parser disagreement. The proxy refuses (with the
    status named) rather than guess how the server will read it; nothing reaches the
    server; the refusal is recorded with its reason."""
    port, srv, audit = raw
    data, status, why = SMUGGLING[attack]
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(data)
        answer = _read_all(c)
    assert answer.split(b" ", 2)[1] == status.encode(), answer
    assert why.encode() in answer, answer
    assert srv.seen == []  # type: ignore[attr-defined]
    records = _records(audit)
    assert [(r["decision"], r["rule"]) for r in records] == [("deny", "guard.egress: protocol")]
    assert why in str(records[0]["reason"])


def _records(audit: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []


def test_each_pipelined_request_is_decided_and_a_post_after_a_get_never_leaves(
    raw: tuple[int, object, Path],
) -> None:
    """Attack: pipelining. A GET and a POST sent in one write on one connection: the GET
    is answered, the POST is decided on its own and refused; the server saw the GET
    only."""
    port, srv, audit = raw
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b"GET http://api.test/one HTTP/1.1\r\nHost: api.test\r\n\r\n"
                  b"POST http://api.test/two HTTP/1.1\r\nHost: api.test\r\n"
                  b"Content-Length: 5\r\n\r\nhello")
        answer = _read_all(c)
    assert answer.startswith(b"HTTP/1.1 200 OK"), answer
    assert b"GET /one answered" in answer
    assert b"HTTP/1.1 403 guard: network api.test:80: POST http://api.test/two" in answer
    assert [(s.method, s.path) for s in srv.seen] == [("GET", "/one")]  # type: ignore[attr-defined]
    assert [(r["egress"]["method"], r["decision"]) for r in _records(audit)] == [
        ("GET", "allow"), ("POST", "deny")]


def test_a_later_request_on_a_keep_alive_connection_is_decided_too(
    raw: tuple[int, object, Path],
) -> None:
    """Attack: open a keep-alive connection with an allowed GET, wait for the answer,
    then send a DELETE on the same connection. Each request is checked, not the first."""
    port, srv, _ = raw
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b"GET http://api.test/one HTTP/1.1\r\nHost: api.test\r\n\r\n")
        first = b""
        while not first.endswith(b"GET /one answered\n"):
            first += c.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first
        c.sendall(b"DELETE http://api.test/one HTTP/1.1\r\nHost: api.test\r\n\r\n")
        second = _read_all(c)
    assert second.startswith(b"HTTP/1.1 403"), second
    assert [(s.method, s.path) for s in srv.seen] == [("GET", "/one")]  # type: ignore[attr-defined]


def test_a_request_split_across_many_reads_is_read_whole(raw: tuple[int, object, Path]) -> None:
    """Attack: send the request line and headers a few bytes at a time (a parser that
    decides on the first read would see a partial request). The proxy decides on the
    whole request: a split GET goes through, a split POST is refused."""
    port, srv, _ = raw
    for method, body in (("GET", b""), ("POST", b"x=1")):
        data = (f"{method} http://api.test/split HTTP/1.1\r\nHost: api.test\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(0, len(data), 3):
                c.sendall(data[i : i + 3])
                time.sleep(0.002)
            answer = _read_all(c)
        want = b"200" if method == "GET" else b"403"
        assert answer.split(b" ", 2)[1:2] == [want], (method, answer)
    assert [(s.method, s.path) for s in srv.seen] == [("GET", "/split")]  # type: ignore[attr-defined]


def test_a_get_with_a_body_is_refused_in_plan_mode(raw: tuple[int, object, Path]) -> None:
    """Attack: hide a second request in the body of a GET, for a server that ignores the
    bodies of GETs and would read it as a request of its own (CL.0 desync)."""
    port, srv, _ = raw
    hidden = b"POST /admin HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b"GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\nContent-Length: "
                  + str(len(hidden)).encode() + b"\r\n\r\n" + hidden)
        answer = _read_all(c)
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert b"with a body, which a server may read as a request of its own" in answer
    assert srv.seen == []  # type: ignore[attr-defined]


def test_a_chunked_body_is_forwarded_as_guard_parsed_it(work: Path) -> None:
    """In build mode a chunked POST goes through, re-framed by guard (extensions and
    trailers dropped) so the server reads exactly the body guard parsed."""
    with recorder() as srv:
        pol = _policy(work, ["api.test"], {"api.test": f"127.0.0.1:{port_of(srv)}"})
        with proxy(pol, work / "repo", work / "audit.jsonl", agent="build") as p, \
                socket.create_connection(("127.0.0.1", p.port)) as c:
            c.sendall(b"POST http://api.test/up HTTP/1.1\r\nHost: api.test\r\n"
                      b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                      b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n")
            answer = _read_all(c)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        [seen] = srv.seen
    assert (seen.method, seen.body, seen.headers.get("transfer-encoding")) == (
        "POST", b"abcde", "chunked")
    assert "x-trailer" not in seen.headers


# -- DNS rebinding ---------------------------------------------------------------


REBIND = {
    "rebind-loop.test": ["127.0.0.1"],
    "rebind-ten.test": ["10.11.12.13"],
    "rebind-link.test": ["169.254.169.254"],
    "rebind-mapped.test": ["::ffff:127.0.0.1"],
    "rebind-192.test": ["192.168.7.7"],
}


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("name", sorted(REBIND))
def test_a_name_resolving_to_a_private_address_is_refused_unless_a_rule_names_it(
    work: Path, user: str, name: str
) -> None:
    """Attack: DNS rebinding. An allowed name resolves (really: the proxy's resolver
    reads a private /etc/hosts) to loopback, a private network, the cloud metadata
    address or an IPv4-mapped loopback. The proxy refuses, says which address and why,
    and records the refusal; nothing is connected to."""
    need_tools("curl", "unshare", "setpriv")
    with recorder() as srv:
        pol = _policy(work, [name], {})
        done, records = confined(
            _curl("-i", f"http://{name}:{port_of(srv)}/meta"),
            user=user, policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
            hosts={name: REBIND[name]},
        )
        assert srv.seen == []
    assert done.stdout.startswith("HTTP/1.1 403"), done
    assert f"{name} resolved to" in done.stdout and "DNS rebinding" in done.stdout, done
    [allowed, refused] = records
    assert (allowed["tool_name"], allowed["decision"]) == ("request", "allow")
    assert (refused["tool_name"], refused["decision"]) == ("address", "ask")
    assert refused["egress"]["address"] in (REBIND[name][0], "::ffff:127.0.0.1")


def test_a_loopback_answer_is_reached_where_a_rule_names_the_address(work: Path) -> None:
    """The same name resolving to 127.0.0.1 goes through once the policy allows the
    address and port themselves."""
    need_tools("curl", "unshare")
    with recorder() as srv:
        port = port_of(srv)
        pol = _policy(work, ["rebind-loop.test", f"127.0.0.1:{port}"], {})
        done, records = confined(
            _curl(f"http://rebind-loop.test:{port}/ok"),
            user="root", policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
            hosts={"rebind-loop.test": ["127.0.0.1"]},
        )
        assert done.stdout == "GET /ok answered\n", done
        assert [(s.method, s.host) for s in srv.seen] == [("GET", f"rebind-loop.test:{port}")]
    assert [(r["tool_name"], r["decision"]) for r in records] == [
        ("request", "allow"), ("address", "allow")]


# -- HTTPS (CONNECT) -------------------------------------------------------------


@pytest.fixture
def tls_server(work: Path) -> Iterator[tuple[object, Path]]:
    need_tools("openssl")
    certs = make_cert(work / "certs", "secure.test", "other.test")
    (work / "certs").chmod(0o755)
    (certs / "key.pem").chmod(0o644)
    (certs / "cert.pem").chmod(0o644)
    with recorder(tls=certs) as srv:
        yield srv, certs / "cert.pem"


@pytest.mark.parametrize("user", USERS)
def test_https_to_an_allowed_host_goes_through_and_is_decided_by_host_only(
    work: Path, tls_server: tuple[object, Path], user: str
) -> None:
    """HTTPS is decided by host and port (CONNECT): a POST inside the tunnel is not seen
    by the proxy, which says so in the record's detail and in the docs."""
    need_tools("curl", "unshare", "setpriv")
    srv, cert = tls_server
    pol = _policy(work, ["secure.test:443"], {"secure.test": f"127.0.0.1:{port_of(srv)}"})  # type: ignore[arg-type]
    done, records = confined(
        _curl("--cacert", str(cert), "https://secure.test/read"),
        user=user, policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
    )
    assert done.stdout == "GET /read answered\n", done
    [rec] = records
    assert (rec["tool_name"], rec["decision"], rec["egress"]) == (
        "connect", "allow", {"host": "secure.test", "port": 443})
    assert "what is sent inside is encrypted and not seen" in rec["effect"]["detail"]


def test_a_tls_server_name_other_than_the_connect_host_closes_the_tunnel(
    work: Path, tls_server: tuple[object, Path]
) -> None:
    """Attack: domain fronting. CONNECT to the allowed host, then a TLS ClientHello
    naming another server (openssl s_client -servername). The tunnel is closed before
    the hello is sent on; the server never completes a handshake; the refusal is
    recorded."""
    need_tools("openssl", "unshare")
    srv, cert = tls_server
    pol = _policy(work, ["secure.test:443"], {"secure.test": f"127.0.0.1:{port_of(srv)}"})  # type: ignore[arg-type]
    done, records = confined(
        ["openssl", "s_client", "-proxy", "127.0.0.1:30128", "-connect", "secure.test:443",
         "-servername", "other.test", "-CAfile", str(cert), "-brief"],
        user="root", policy=pol, cwd=work / "repo", audit=work / "audit.jsonl",
    )
    assert done.returncode != 0
    assert srv.seen == []  # type: ignore[attr-defined]
    assert [(r["tool_name"], r["decision"], r["rule"]) for r in records] == [
        ("connect", "allow", records[0]["rule"]), ("connect", "deny", "guard.egress: protocol")]
    assert "'other.test' is not the CONNECT host 'secure.test'" in str(records[1]["reason"])


def test_plan_mode_closes_a_tunnel_that_does_not_start_with_tls(
    work: Path,
) -> None:
    """Attack: CONNECT to an allowed host's plain-HTTP port, then speak plain HTTP inside
    the tunnel, where the proxy cannot check the method. In plan mode the tunnel must
    start with TLS: it is closed and the server sees nothing."""
    with recorder() as srv:
        pol = _policy(work, ["api.test"], {"api.test": f"127.0.0.1:{port_of(srv)}"})
        with proxy(pol, work / "repo", work / "audit.jsonl") as p, \
                socket.create_connection(("127.0.0.1", p.port)) as c:
            c.sendall(b"CONNECT api.test:80 HTTP/1.1\r\nHost: api.test:80\r\n\r\n")
            assert c.recv(4096).startswith(b"HTTP/1.1 200")
            c.sendall(b"POST /orders HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n\r\n")
            assert _read_all(c) == b""
        assert srv.seen == []
    records = _records(work / "audit.jsonl")
    assert [(r["tool_name"], r["decision"]) for r in records] == [
        ("connect", "allow"), ("connect", "deny")]
    assert "in plan mode a tunnel carries TLS only" in str(records[1]["reason"])


# -- git over HTTP ---------------------------------------------------------------


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def remote(work: Path) -> Iterator[tuple[object, Path, Path]]:
    """A bare repository served by ``git http-backend`` (receive-pack on), a client clone
    made directly, and a new commit on the remote the client has not fetched yet."""
    need_tools("git")
    root = work / "srv"
    root.mkdir()
    bare = root / "remote.git"
    seed = work / "seed"
    _git("init", "-q", "-b", "main", str(seed))
    (seed / "a.txt").write_text("one\n")
    _git("add", "a.txt", cwd=seed)
    _git("commit", "-qm", "one", cwd=seed)
    _git("clone", "-q", "--bare", str(seed), str(bare))
    _git("config", "http.receivepack", "true", cwd=bare)
    client = work / "client"
    _git("clone", "-q", str(bare), str(client))
    (seed / "a.txt").write_text("two\n")
    _git("commit", "-qam", "two", cwd=seed)
    _git("push", "-q", str(bare), "main", cwd=seed)
    (client / "b.txt").write_text("mine\n")
    _git("add", "b.txt", cwd=client)
    _git("commit", "-qm", "local change", cwd=client)
    _git("remote", "set-url", "origin", "http://git.test/remote.git", cwd=client)
    subprocess.run(["chown", "-R", "65534:65534", str(client)], check=True)
    with git_server(root) as srv:
        yield srv, bare, client


GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
           "GIT_CONFIG_VALUE_0": "*"}


@pytest.mark.parametrize("user", USERS)
def test_git_fetch_through_the_proxy_works_and_git_push_is_refused(
    work: Path, remote: tuple[object, Path, Path], user: str
) -> None:
    """A plan-mode git fetch over HTTP through the proxy brings the remote's new commit
    (smart HTTP posts its wants to git-upload-pack, which only reads); git push is
    refused at its POST to git-receive-pack, and the remote's refs are unchanged."""
    need_tools("git", "unshare", "setpriv")
    srv, bare, client = remote
    refs = _git("for-each-ref", cwd=bare)
    pol = _policy(work, ["git.test"], {"git.test": f"127.0.0.1:{port_of(srv)}"})  # type: ignore[arg-type]
    fetched, records = confined(
        ["git", "fetch", "origin"], user=user, policy=pol, cwd=client,
        audit=work / "audit.jsonl", env=GIT_ENV,
    )
    assert fetched.returncode == 0, fetched
    assert _git("rev-parse", "origin/main", cwd=client) == _git("rev-parse", "main", cwd=bare)
    assert {r["decision"] for r in records} == {"allow"}
    assert ("POST", "/remote.git/git-upload-pack") in [
        (x.method, x.path) for x in srv.seen]  # type: ignore[attr-defined]
    pushed, records = confined(
        ["git", "push", "origin", "HEAD:refs/heads/agent"], user=user, policy=pol,
        cwd=client, audit=work / "audit.jsonl", env=GIT_ENV,
    )
    assert pushed.returncode != 0
    assert "403" in pushed.stderr, pushed
    assert _git("for-each-ref", cwd=bare) == refs
    assert not any(s.path.endswith("git-receive-pack") and s.method == "POST"
                   for s in srv.seen)  # type: ignore[attr-defined]
    refused = [r for r in records if r["decision"] == "deny"]
    assert refused and refused[-1]["egress"]["path"] == "/remote.git/git-receive-pack"


def test_git_push_goes_through_in_build_mode(
    work: Path, remote: tuple[object, Path, Path]
) -> None:
    """The refusal is plan mode's: the build agent, allowed the same host, pushes."""
    need_tools("git", "unshare")
    srv, bare, client = remote
    pol = _policy(work, ["git.test"], {"git.test": f"127.0.0.1:{port_of(srv)}"})  # type: ignore[arg-type]
    pushed, _ = confined(
        ["git", "push", "origin", "HEAD:refs/heads/agent"], user="root", agent="build",
        policy=pol, cwd=client, audit=work / "audit.jsonl", env=GIT_ENV,
    )
    assert pushed.returncode == 0, pushed
    assert _git("rev-parse", "agent", cwd=bare) == _git("rev-parse", "HEAD", cwd=client)


# -- guard run: the host agent's model API -----------------------------------------


def test_model_api_hosts_are_reachable_under_guard_run_only(work: Path) -> None:
    """``network.model_api`` lets the host agent reach its model API (any method, plan
    mode included) through the proxy under ``guard run``; a confined shell command
    (source hook) gets nothing from it."""
    need_tools("curl", "unshare")
    with recorder() as srv:
        pol = _policy(work, [], {"api.anthropic.com": f"127.0.0.1:{port_of(srv)}"},
                      model_api=["api.anthropic.com:80"])
        argv = _curl("-i", "-d", "{}", "http://api.anthropic.com/v1/messages")
        run, run_records = confined(argv, user="root", source="run", policy=pol,
                                    cwd=work / "repo", audit=work / "run.jsonl")
        hook, hook_records = confined(argv, user="root", source="hook", policy=pol,
                                      cwd=work / "repo", audit=work / "hook.jsonl")
        assert [(s.method, s.path) for s in srv.seen] == [("POST", "/v1/messages")]
    assert run.stdout.startswith("HTTP/1.1 200"), run
    assert run.stdout.endswith("POST /v1/messages answered\n"), run
    assert hook.stdout.startswith("HTTP/1.1 403"), hook
    assert (run_records[0]["source"], run_records[0]["decision"]) == ("run", "allow")
    assert run_records[0]["egress"]["via"] == "run"
    assert "model_api" in str(run_records[0]["rule"])
    assert (hook_records[0]["source"], hook_records[0]["decision"]) == ("hook", "deny")


def test_the_proxy_refuses_everything_while_the_policy_cannot_be_read(work: Path) -> None:
    """Fail closed: a broken policy file makes every connection a 503 naming the
    problem; nothing is forwarded."""
    with recorder() as srv:
        pol = write_policy(work, "version = 1\n[agents.plan]\nmode = 'plan'\ndefault = 'maybe'\n")
        with proxy(pol, work / "repo", work / "audit.jsonl") as p, \
                socket.create_connection(("127.0.0.1", p.port)) as c:
            c.sendall(f"GET http://127.0.0.1:{port_of(srv)}/ HTTP/1.1\r\n\r\n".encode())
            answer = _read_all(c)
        assert srv.seen == []
    assert answer.startswith(b"HTTP/1.1 503"), answer
    assert b"cannot load the policy" in answer and b"default" in answer


def test_egress_spec_round_trips_and_rejects_bad_values(tmp_path: Path) -> None:
    from guard.sandbox.egress_proxy import EgressSpec

    spec = EgressSpec("plan", str(tmp_path), None, "run")
    assert EgressSpec.from_argv_value(spec.to_argv()[1]) == spec
    for bad, why in [
        ('{"agent": "plan"}', "missing keys"),
        ('{"agent": "plan", "cwd": "rel", "policy": null, "source": "hook"}', "absolute"),
        ('{"agent": "plan", "cwd": "/", "policy": null, "source": "web"}', "source must be"),
        ('{"agent": "", "cwd": "/", "policy": null, "source": "hook"}', "agent must be"),
        ('{"agent": "p", "cwd": "/", "policy": null, "source": "hook", "x": 1}', "unknown"),
        ("[1]", "JSON object"),
        ("{", "not JSON"),
    ]:
        with pytest.raises(ValueError, match=why):
            EgressSpec.from_argv_value(bad)
    with pytest.raises(AttributeError):
        spec.agent = "build"  # type: ignore[misc]
    assert spec.replace(source="hook") == EgressSpec("plan", str(tmp_path), None, "hook")
    assert hash(spec) == hash(EgressSpec("plan", str(tmp_path), None, "run"))
    with pytest.raises(ValueError, match="source must be"):
        spec.replace(source="web")


def test_proxy_env_points_every_usual_client_at_the_proxy() -> None:
    from guard.sandbox.egress_proxy import PROXY_PORT, proxy_env

    env = proxy_env()
    url = f"http://127.0.0.1:{PROXY_PORT}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY",
                 "npm_config_https_proxy", "PIP_PROXY"):
        assert env[name] == url
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1"


# -- the record: audit log and replay ------------------------------------------------


def test_recorded_connections_replay_under_another_agent(work: Path) -> None:
    """The proxy's records keep each call's input (host, port, method, path without the
    query), so ``guard replay`` decides them again: connections a build-mode command made
    (a GET and a POST, both forwarded) replayed for the plan agent show the POST refused,
    with the same rule the proxy would have applied."""
    need_tools("curl", "unshare")
    audit = work / "audit.jsonl"
    with recorder() as srv:
        pol = _policy(work, ["api.test"], {"api.test": f"127.0.0.1:{port_of(srv)}"})
        done, records = confined(
            ["sh", "-c", " ".join(_curl("http://api.test/a?token=secret")) + " && "
             + " ".join(_curl("-d", "x=1", "http://api.test/b"))],
            user="root", agent="build", policy=pol, cwd=work / "repo", audit=audit,
        )
        assert done.returncode == 0, done
        assert [(s.method, s.path) for s in srv.seen] == [("GET", "/a?token=secret"),
                                                         ("POST", "/b")]
    assert "secret" not in audit.read_text()
    assert [(r["source"], r["agent"], r["decision"]) for r in records] == [
        ("hook", "build", "allow"), ("hook", "build", "allow")]
    out = subprocess.run(
        [sys.executable, "-m", "guard", "replay", str(audit), "--agent", "plan", "--policy",
         str(pol), "--json"], capture_output=True, text=True, check=False,
    )
    assert out.returncode == 3, out  # something would have been refused
    replayed = json.loads(out.stdout)["calls"]
    assert [(r["host"], r["tool"], r["input"]["method"], r["decision"], r["rule"])
            for r in replayed] == [
        ("audit", "request", "GET", "allow", replayed[0]["rule"]),
        ("audit", "request", "POST", "deny", "guard.plan-network")]
    assert "agents.plan.network.allow[0] 'api.test'" in replayed[0]["rule"]
