"""HTTP/1.x and TLS wire formats for guard's egress proxy (standard library only).

Requests come from the confined command, which may be hostile, so they are
parsed strictly and forwarded as guard's own rendering of what it parsed, never
as the bytes received: the upstream server reads exactly the request guard
decided on. Whatever two parsers could read two ways is refused (400/501):

* lines end with CRLF; a lone CR or LF, a control character, a space before a
  header's colon, a folded header line is refused;
* the request target is absolute-form ``http://HOST[:PORT]/path`` (or
  authority-form for CONNECT): no user info, no fragment, a host in its plain
  spelling (a number that is not a dotted quad, such as ``2130706433`` or
  ``0x7f.1``, is refused); a ``Host`` header, if any, must name the same
  host and port;
* a body is framed by one ``Content-Length`` (digits only) or by
  ``Transfer-Encoding: chunked`` alone; both, two lengths, another coding, or a
  transfer coding in HTTP/1.0 is refused; chunks are parsed and sent on
  re-framed, their extensions and trailers dropped;
* hop-by-hop headers (``Connection`` and what it names, ``Keep-Alive``,
  ``Proxy-*``, ``TE``, ``Trailer``, ``Upgrade``, ``Expect``) are not forwarded;
  an upgrade (WebSocket, h2c) is refused.

Responses come from a server the policy allows and decide nothing: their
framing is read only to know where one ends (:func:`response_framing`).

:func:`client_hello_sni` reads the server name from a TLS ClientHello (the
first bytes a client sends through a CONNECT tunnel).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass, field

MAX_HEAD = 64 * 1024
MAX_HEADERS = 128
MAX_LINE = 8192

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_TARGET = re.compile(r"[\x21-\x7e]+")
_HOSTNAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?")
_DIGITS = re.compile(r"[0-9]{1,15}")
_HEX = re.compile(r"[0-9A-Fa-f]{1,15}")
_EXT = re.compile(r"[\x20-\x7e\t]*")
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authorization",
    "proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade", "expect",
    "host", "content-length",
})  # fmt: skip


class WireError(Exception):
    """A request guard refuses to forward: ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Head:
    """A parsed start line and header fields (names as sent; values trimmed)."""

    start: tuple[str, str, str]
    headers: list[tuple[str, str]]

    def values(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n.lower() == name]


def parse_head(data: bytes, *, request: bool = True) -> Head:
    """The start line and fields of a header block (``data`` ends with CRLF CRLF)."""
    if not data.endswith(b"\r\n\r\n"):
        raise WireError(400, "the header block does not end with an empty line")
    if data.count(b"\n") != data.count(b"\r\n") or data.count(b"\r") != data.count(b"\r\n"):
        raise WireError(400, "a line ends with a lone CR or LF (only CRLF is accepted)")
    text = data[:-4].decode("latin-1")
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2) if not request else lines[0].split(" ")
    if request and len(parts) != 3:
        raise WireError(400, f"malformed request line {lines[0][:80]!r}")
    if not request and (len(parts) < 2 or not parts[0].startswith("HTTP/1.")):
        raise WireError(502, f"malformed status line {lines[0][:80]!r}")
    if len(parts) == 2:
        parts.append("")
    if len(lines) - 1 > MAX_HEADERS:
        raise WireError(431, f"more than {MAX_HEADERS} header fields")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t"):
            raise WireError(400, "a folded header line (obsolete line folding) is refused")
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise WireError(400, f"malformed header field {line[:80]!r}")
        value = value.strip(" \t")
        if _BAD_VALUE.search(value):
            raise WireError(400, f"a control character in header field {name!r}")
        headers.append((name, value))
    return Head((parts[0], parts[1], parts[2]), headers)


def parse_authority(text: str, default_port: int | None) -> tuple[str, int]:
    """``host[:port]`` or ``[v6][:port]`` as (canonical host, port); WireError otherwise."""
    host, port_text = text, ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise WireError(400, f"malformed host {text!r}")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise WireError(400, f"malformed host {text!r}")
        port_text = rest[1:] if rest else ""
        try:
            addr = ipaddress.IPv6Address(host)
        except ValueError:
            raise WireError(400, f"{host!r} is not an IPv6 address") from None
        host = addr.compressed
        if rest and not port_text:
            raise WireError(400, f"an empty port in {text!r}")
    else:
        host, sep, port_text = text.rpartition(":") if ":" in text else (text, "", "")
        if sep and not port_text:
            raise WireError(400, f"an empty port in {text!r}")
        host = host.lower()
        if host.endswith(".") and not host.endswith(".."):
            host = host[:-1]
        if not _HOSTNAME.fullmatch(host) or ".." in host:
            raise WireError(400, f"{text!r} is not a host name guard forwards (letters, digits,"
                                 " '-', '_' and '.' only)")
        if _numeric_host(host):
            try:
                canonical = str(ipaddress.IPv4Address(host))
            except ValueError:
                canonical = ""
            if canonical != host:
                raise WireError(400, f"{host!r} is an address in an unusual spelling; write it"
                                     " as a dotted quad")
    if port_text:
        if not port_text.isdigit() or len(port_text) > 5 or port_text[0] == "0":
            raise WireError(400, f"malformed port in {text!r}")
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise WireError(400, f"port {port} is out of range")
    elif default_port is None:
        raise WireError(400, f"{text!r} names no port")
    else:
        port = default_port
    return host, port


def _numeric_host(host: str) -> bool:
    """Whether the C library would read ``host`` as an IPv4 address (inet_aton)."""
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


def authority(host: str, port: int, default: int) -> str:
    h = f"[{host}]" if ":" in host else host
    return h if port == default else f"{h}:{port}"


@dataclass
class Request:
    """One request as guard forwards it."""

    method: str
    host: str
    port: int
    path: str  # origin-form with the query, or "*"
    version: str  # HTTP/1.1 or HTTP/1.0
    headers: list[tuple[str, str]] = field(default_factory=list)  # end-to-end fields
    length: int = 0  # Content-Length when not chunked
    chunked: bool = False
    close: bool = False  # the client closes after this request
    expect_continue: bool = False
    content_type: str | None = None

    @property
    def connect(self) -> bool:
        return self.method == "CONNECT"

    @property
    def bare_path(self) -> str:
        """The path without its query (what audit records keep)."""
        return self.path.split("?", 1)[0]

    def render(self) -> bytes:
        """The request head guard sends upstream."""
        lines = [f"{self.method} {self.path} {self.version}",
                 f"Host: {authority(self.host, self.port, 80)}"]
        lines += [f"{n}: {v}" for n, v in self.headers]
        if self.chunked:
            lines.append("Transfer-Encoding: chunked")
        elif self.length or self.method not in ("GET", "HEAD", "OPTIONS"):
            lines.append(f"Content-Length: {self.length}")
        if self.close:
            lines.append("Connection: close")
        elif self.version == "HTTP/1.0":
            lines.append("Connection: keep-alive")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_request(data: bytes) -> Request:
    """A request head from the client: strict (see the module docstring)."""
    head = parse_head(data)
    method, target, version = head.start
    if not _TOKEN.fullmatch(method):
        raise WireError(400, f"malformed method {method[:40]!r}")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise WireError(505, f"{version[:20]!r} is not HTTP/1.1 or HTTP/1.0")
    if not _TARGET.fullmatch(target):
        raise WireError(400, "the request target holds a space, a control character or"
                             " non-ASCII")
    hosts = head.values("host")
    if len(hosts) > 1:
        raise WireError(400, "more than one Host header")
    if method == "CONNECT":
        host, port = parse_authority(target, None)
        req = Request(method, host, port, "", version)
    else:
        host, port, path = _absolute(target, method)
        req = Request(method, host, port, path, version)
    if hosts and parse_authority(hosts[0], 80 if not req.connect else port) != (host, port):
        raise WireError(400, f"the Host header names {hosts[0][:80]!r} but the request line"
                             f" {authority(host, port, 80)!r}")
    _framing(head, req)
    _connection(head, req)
    return req


def _absolute(target: str, method: str) -> tuple[str, int, str]:
    if target[:7].lower() != "http://":
        if target.startswith("/") or target == "*":
            raise WireError(400, "a proxy request needs an absolute URL (http://host/path);"
                                 " set HTTP_PROXY only for http:// URLs")
        if target[:8].lower() == "https://":
            raise WireError(400, "https:// goes through CONNECT, not as a plain request")
        raise WireError(400, f"unsupported request target {target[:80]!r} (http:// only)")
    rest = target[7:]
    if "#" in rest:
        raise WireError(400, "a fragment (#) in the request target")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    auth, path = rest[:cut], rest[cut:]
    if "@" in auth:
        raise WireError(400, "user information (user@host) in the request target")
    host, port = parse_authority(auth, 80)
    if not path:
        path = "*" if method == "OPTIONS" else "/"
    elif path.startswith("?"):
        path = "/" + path
    return host, port, path


def _framing(head: Head, req: Request) -> None:
    codings = head.values("transfer-encoding")
    lengths = head.values("content-length")
    if codings:
        if req.version == "HTTP/1.0":
            raise WireError(400, "Transfer-Encoding in an HTTP/1.0 request")
        if lengths:
            raise WireError(400, "both Transfer-Encoding and Content-Length (request"
                                 " smuggling)")
        if len(codings) != 1 or codings[0].lower() != "chunked":
            raise WireError(501, f"Transfer-Encoding {', '.join(codings)[:60]!r}: only"
                                 " 'chunked' alone is forwarded")
        req.chunked = True
    elif lengths:
        if len(lengths) != 1 or not _DIGITS.fullmatch(lengths[0]):
            raise WireError(400, f"Content-Length {', '.join(lengths)[:60]!r}: one decimal"
                                 " number is expected")
        req.length = int(lengths[0])
    if req.connect and (req.chunked or req.length):
        raise WireError(400, "a CONNECT request with a body")
    types = head.values("content-type")
    req.content_type = types[0].lower() if len(types) == 1 else None


def _connection(head: Head, req: Request) -> None:
    tokens = {t.strip().lower() for v in head.values("connection") for t in v.split(",")}
    tokens.discard("")
    if "upgrade" in tokens or head.values("upgrade"):
        raise WireError(501, "protocol upgrades (WebSocket, h2c) are not relayed over plain"
                             " HTTP; use https:// or wss:// (CONNECT)")
    req.close = "close" in tokens or (req.version == "HTTP/1.0" and "keep-alive" not in tokens)
    expect = head.values("expect")
    if expect:
        if len(expect) != 1 or expect[0].lower() != "100-continue":
            raise WireError(417, f"Expect {', '.join(expect)[:60]!r} is not supported")
        req.expect_continue = True
    drop = HOP_BY_HOP | tokens
    req.headers = [(n, v) for n, v in head.headers if n.lower() not in drop]


def chunk_size(line: bytes) -> int:
    """The size of a chunk from its size line (without CRLF); extensions are dropped."""
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise WireError(400, "a chunk size line holds non-ASCII") from None
    size, _, ext = text.partition(";")
    if not _HEX.fullmatch(size) or not _EXT.fullmatch(ext):
        raise WireError(400, f"malformed chunk size line {text[:40]!r}")
    return int(size, 16)


def trailer_line(line: bytes) -> None:
    """A trailer field line (dropped, but it must be well formed)."""
    name, sep, value = line.decode("latin-1").partition(":")
    if not sep or not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
        raise WireError(400, f"malformed trailer field {line[:60]!r}")


# -- responses ----------------------------------------------------------------


@dataclass
class Framing:
    """How a response's body ends."""

    status: int
    interim: bool = False  # a 1xx: another response follows
    length: int | None = None  # a Content-Length body
    chunked: bool = False
    until_close: bool = False  # the body runs until the server closes
    close: bool = False  # the server closes after this response


def response_framing(data: bytes, request_method: str) -> Framing:
    """Where the response whose head is ``data`` ends (RFC 9112, section 6.3)."""
    head = parse_head(data, request=False)
    try:
        status = int(head.start[1])
    except ValueError:
        raise WireError(502, f"malformed status {head.start[1][:10]!r}") from None
    if not 100 <= status <= 999:
        raise WireError(502, f"status {status} out of range")
    tokens = {t.strip().lower() for v in head.values("connection") for t in v.split(",")}
    close = "close" in tokens or (head.start[0] == "HTTP/1.0" and "keep-alive" not in tokens)
    if status == 101:
        raise WireError(502, "the server switched protocols, which guard does not relay")
    if 100 <= status < 200:
        return Framing(status, interim=True)
    if request_method == "HEAD" or status in (204, 304):
        return Framing(status, length=0, close=close)
    codings = [c.strip().lower() for v in head.values("transfer-encoding") for c in v.split(",")]
    if codings:
        if codings[-1] == "chunked":
            return Framing(status, chunked=True, close=close)
        return Framing(status, until_close=True, close=True)
    lengths = {v.strip() for v in head.values("content-length")}
    if lengths:
        if len(lengths) != 1 or not _DIGITS.fullmatch(next(iter(lengths))):
            raise WireError(502, "the server sent an invalid Content-Length")
        return Framing(status, length=int(next(iter(lengths))), close=close)
    return Framing(status, until_close=True, close=True)


def status_line(status: int) -> str:
    return {
        400: "Bad Request", 403: "Forbidden", 417: "Expectation Failed",
        431: "Request Header Fields Too Large", 501: "Not Implemented", 502: "Bad Gateway",
        503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
    }.get(status, "Error")  # fmt: skip


# -- TLS ----------------------------------------------------------------------

MAX_HELLO = 64 * 1024


#: Encrypted Client Hello and the draft it replaced (ESNI): a server name guard cannot read.
ENCRYPTED_HELLO = (0xFE0D, 0xFFCE)


def client_hello_sni(data: bytes, *, sealed: bool = True) -> tuple[int, str | None] | None:
    """Read a TLS ClientHello from the start of ``data``.

    None: more bytes are needed. Otherwise (bytes of the records that hold it, the
    host_name of its server_name extension or None). WireError when ``data`` does
    not start with a TLS handshake record carrying a ClientHello, or, unless
    ``sealed``, when the hello carries an encrypted one (:data:`ENCRYPTED_HELLO`:
    the name a server would route by is then inside, where it cannot be checked).
    """
    hs = bytearray()
    pos = 0
    need: int | None = None
    while need is None or len(hs) < need:
        if len(data) < pos + 5:
            if len(data) > MAX_HELLO:
                raise WireError(400, "the TLS ClientHello is too large")
            return None
        ctype, major, minor, length = data[pos], data[pos + 1], data[pos + 2], \
            int.from_bytes(data[pos + 3 : pos + 5], "big")
        if ctype != 0x16 or major != 3 or minor > 4 or not 0 < length <= 16384:
            raise WireError(400, "the tunnel does not start with a TLS handshake")
        if len(data) < pos + 5 + length:
            return None
        hs += data[pos + 5 : pos + 5 + length]
        pos += 5 + length
        if need is None and len(hs) >= 4:
            if hs[0] != 1:
                raise WireError(400, "the first TLS handshake message is not a ClientHello")
            need = 4 + int.from_bytes(hs[1:4], "big")
            if need > MAX_HELLO:
                raise WireError(400, "the TLS ClientHello is too large")
    if len(hs) != need:
        raise WireError(400, "the TLS records of the ClientHello hold more than the ClientHello")
    return pos, _sni(bytes(hs[4:need]), sealed)


def _sni(body: bytes, sealed: bool = True) -> str | None:
    """The server name of a ClientHello's body, parsed whole: every length must add up
    (a made-up hello with a valid record header is refused), and the names in it too."""
    try:
        if body[0] != 3 or not 1 <= body[1] <= 4 or body[2 + 32] > 32:
            raise IndexError  # legacy version, random, session id of at most 32 bytes
        p = 2 + 32
        p += 1 + body[p]  # session id
        suites = int.from_bytes(body[p : p + 2], "big")
        if suites < 2 or suites % 2:
            raise IndexError
        p += 2 + suites  # cipher suites
        if body[p] < 1:
            raise IndexError
        p += 1 + body[p]  # compression methods
        if p == len(body):
            return None
        end = p + 2 + int.from_bytes(body[p : p + 2], "big")
        p += 2
        if end != len(body):
            raise IndexError
        sni: str | None = None
        while p < end:
            if p + 4 > end:
                raise IndexError
            etype = int.from_bytes(body[p : p + 2], "big")
            elen = int.from_bytes(body[p + 2 : p + 4], "big")
            ext = body[p + 4 : p + 4 + elen]
            if len(ext) != elen:
                raise IndexError
            p += 4 + elen
            if etype in ENCRYPTED_HELLO and not sealed:
                raise WireError(400, "the TLS ClientHello carries an Encrypted Client Hello,"
                                     " whose server name guard cannot check")
            if etype != 0:
                continue
            if sni is not None or int.from_bytes(ext[0:2], "big") != len(ext) - 2:
                raise IndexError
            # one entry, a host name (as OpenSSL and Go's servers require): a second name
            # is one a server might pick instead of the one checked
            ntype, nlen = ext[2], int.from_bytes(ext[3:5], "big")
            name = ext[5 : 5 + nlen]
            if ntype != 0 or 5 + nlen != len(ext) or len(name) != nlen:
                raise IndexError
            sni = name.decode("ascii").lower().rstrip(".")
            if not sni or not _HOSTNAME.fullmatch(sni):
                raise WireError(400, "a malformed server name in the TLS ClientHello")
        return sni
    except (IndexError, UnicodeDecodeError):
        raise WireError(400, "a malformed TLS ClientHello") from None
