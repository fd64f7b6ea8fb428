"""The egress proxy's wire formats: strict request parsing, guard's own rendering of what
it parsed (what the server reads), response framing, and the server name of a real TLS
ClientHello (made by Python's ssl, as a client sends it)."""

from __future__ import annotations

import ssl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.sandbox import httpwire
from guard.sandbox.httpwire import WireError, client_hello_sni, parse_request, response_framing


def test_a_request_is_rendered_in_origin_form_with_its_own_host_header() -> None:
    req = parse_request(
        b"GET http://Docs.Test:8080/a/b?c=d HTTP/1.1\r\nhost: docs.test:8080\r\n"
        b"Accept: */*\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
        b"Proxy-Authorization: secret\r\nKeep-Alive: 5\r\n\r\n")
    assert (req.method, req.host, req.port, req.path) == ("GET", "docs.test", 8080, "/a/b?c=d")
    assert req.render() == (b"GET /a/b?c=d HTTP/1.1\r\nHost: docs.test:8080\r\n"
                            b"Accept: */*\r\n\r\n")


def test_connect_needs_a_port_and_takes_ipv6() -> None:
    req = parse_request(b"CONNECT [2001:DB8::1]:443 HTTP/1.1\r\n\r\n")
    assert (req.connect, req.host, req.port) == (True, "2001:db8::1", 443)
    with pytest.raises(WireError, match="names no port"):
        parse_request(b"CONNECT pypi.org HTTP/1.1\r\n\r\n")


def test_http_1_0_closes_unless_kept_alive() -> None:
    assert parse_request(b"GET http://a.test/ HTTP/1.0\r\n\r\n").close
    req = parse_request(b"GET http://a.test/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert not req.close and b"Connection: keep-alive" in req.render()


_label = r"[a-z]([a-z0-9-]{0,9}[a-z0-9])?"
_names = st.from_regex(rf"{_label}(\.{_label}){{0,2}}", fullmatch=True)
_paths = st.from_regex(r"(/[A-Za-z0-9._~%!$&'()*+,;=:@-]{0,8}){0,4}(\?[A-Za-z0-9=&]{0,8})?",
                       fullmatch=True)
_values = st.from_regex(r"[!-~]([ !-~]{0,20}[!-~])?", fullmatch=True)


@given(
    method=st.sampled_from(["GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PROPFIND"]),
    host=_names,
    port=st.one_of(st.none(), st.integers(1, 65535)),
    path=_paths,
    headers=st.lists(st.tuples(st.sampled_from(["Accept", "X-A", "User-Agent", "Cookie"]),
                               _values), max_size=4),
    length=st.one_of(st.none(), st.integers(0, 10**9)),
    chunked=st.booleans(),
)
def test_guards_rendering_reads_back_as_the_request_it_decided(
    method: str, host: str, port: int | None, path: str,
    headers: list[tuple[str, str]], length: int | None, chunked: bool,
) -> None:
    """What the server receives parses (by guard's strict rules) to the same request:
    method, host, port, path, framing and end-to-end headers."""
    auth = host if port is None else f"{host}:{port}"
    lines = [f"{method} http://{auth}{path} HTTP/1.1", f"Host: {auth}"]
    lines += [f"{n}: {v}" for n, v in headers]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    req = parse_request(("\r\n".join(lines) + "\r\n\r\n").encode())
    rendered = req.render()
    # the server reads origin-form; guard reads it back as the proxy would see it again
    start, target, rest = rendered.split(b" ", 2)
    absolute = b"http://" + httpwire.authority(req.host, req.port, 80).encode()
    again = parse_request(start + b" " + absolute + (b"" if target == b"*" else target)
                          + b" " + rest)
    assert (again.method, again.host, again.port, again.path) == (
        req.method, req.host, req.port, req.path)
    assert (again.chunked, again.length) == (req.chunked, req.length)
    assert again.headers == req.headers


@pytest.mark.parametrize(
    ("head", "method", "want"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "GET", (5, False, False)),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", (0, False, False)),
        (b"HTTP/1.1 204 No Content\r\n\r\n", "GET", (0, False, False)),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "GET",
         (None, True, False)),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "GET", (None, False, True)),
        (b"HTTP/1.0 200 OK\r\n\r\n", "GET", (None, False, True)),
    ],
)
def test_response_framing(head: bytes, method: str, want: tuple[object, ...]) -> None:
    f = response_framing(head, method)
    assert (f.length, f.chunked, f.until_close) == want


def test_a_switch_of_protocols_is_not_relayed() -> None:
    with pytest.raises(WireError):
        response_framing(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "GET")


def _client_hello(name: str | None) -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_the_server_name_of_a_real_client_hello() -> None:
    hello = _client_hello("secure.test")
    assert client_hello_sni(hello) == (len(hello), "secure.test")
    for cut in (1, 5, 40, len(hello) - 1):  # arriving in pieces: more bytes needed
        assert client_hello_sni(hello[:cut]) is None
    assert client_hello_sni(_client_hello(None)) == (len(_client_hello(None)), None)


def test_what_is_not_a_client_hello_is_refused() -> None:
    for data in (b"GET / HTTP/1.1\r\n\r\n", b"SSH-2.0-OpenSSH_9.2\r\n",
                 b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00",  # a ServerHello
                 b"\x17\x03\x03\x00\x10" + b"x" * 16):  # application data
        with pytest.raises(WireError):
            client_hello_sni(data)
