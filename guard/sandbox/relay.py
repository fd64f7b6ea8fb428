"""One client connection of guard's egress proxy: decide, connect, relay.

Loaded by :mod:`guard.sandbox.egress_proxy` on the first connection (standard library
only, like its siblings; the policy side, :class:`Decider`, imports guard).

A client connection is served one request at a time, in order: each request is
parsed (:mod:`guard.sandbox.httpwire`), decided, and forwarded as guard renders
it; its response is relayed whole before the next request is read, so a
pipelined request waits its turn and is decided like the first. The first
request to an origin (host and port) opens the upstream connection and is
recorded; later requests on it are decided again and recorded when refused. A
refusal ends the connection with a 403 whose status line and body say why. A
CONNECT request turns the connection into a tunnel.

This module holds the connection (:class:`Client`), its policy side
(:class:`Decider`) and the refusal a client reads (:func:`answer`). It does not hold
the parsing and rendering of HTTP (:mod:`guard.sandbox.httpwire`), the check of a git
fetch's body (:mod:`guard.sandbox.gitwire`), whether a server speaks TLS
(:mod:`guard.sandbox.tlsprobe`), what kind of address a name resolved to
(:mod:`guard.sandbox.addresses`, against DNS rebinding), nor the reading and moving of
a socket's bytes (:mod:`guard.sandbox.sockio`).
"""

# Lazy imports: Decider imports guard's policy side (the gate, the audit log) when the
# first connection needs it: the confinement helper of ``guard run`` loads this module
# without site-packages, and a command that never uses the network never pays for them.
from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:
    from guard.sandbox import gitwire, httpwire, tlsprobe
    from guard.sandbox.addresses import address_class, local_addresses
    from guard.sandbox.sockio import HEAD_TIME, Reader, idle, linger, transfer
else:  # the helper: siblings by their plain names
    import gitwire
    import httpwire
    import tlsprobe
    from addresses import address_class, local_addresses
    from sockio import HEAD_TIME, Reader, idle, linger, transfer

FAIL_RULE = "guard.egress: fail closed"
PROTOCOL_RULE = "guard.egress: protocol"

if TYPE_CHECKING:
    from typing import Any, NoReturn, Protocol

    from guard.sandbox.httpwire import Request

    # what this module uses of the proxy that loads it, so as not to import it back
    class EgressSettings(Protocol):  # an EgressSpec, as a Decider reads it
        agent: str
        cwd: str
        policy: str | None
        source: str
        audit: str | None

    class ClientHost(Protocol):  # an EgressProxy, as a Client uses it
        decider_error: str

        def decider(self) -> Decider | None: ...
        def track(self, s: socket.socket) -> bool: ...
        def untrack(self, s: socket.socket) -> None: ...

#: Idle seconds before a client connection waiting for its next request is closed.
CLIENT_IDLE = 300.0
#: Idle seconds before a tunnel or a response that sends nothing is closed.
RELAY_IDLE = 900.0
CONNECT_TIMEOUT = 15.0


class Outcome:
    """A decision as the proxy applies it."""

    __slots__ = ("allowed", "reason", "rule")

    def __init__(self, allowed: bool, reason: str, rule: str) -> None:
        self.allowed = allowed
        self.reason = reason
        self.rule = rule


class Decider:
    """The policy side, shared by every connection: egress calls through the gate."""

    def __init__(self, spec: EgressSettings) -> None:
        from pathlib import Path

        from guard.audit.sinks import AuditLog
        from guard.decide import Guard
        from guard.effects import ToolCall
        from guard.gate import Gate, Verdict, VerdictAction
        from guard.network import resolve_table

        self.spec = spec
        self._Guard = Guard
        self._Gate = Gate
        self._ToolCall = ToolCall
        self._Verdict = Verdict
        self._deny = VerdictAction.DENY
        self._resolve_table = resolve_table
        self._sink = AuditLog(Path(spec.audit) if spec.audit else None)
        self._lock = threading.Lock()

    def _load(self) -> Any:
        # the policy as it reads now (recompiled only when one of its files changed)
        return self._Guard.load_shared(policy=self.spec.policy, cwd=self.spec.cwd)

    def _gate(self, g: Any) -> Any:
        return self._Gate(
            guard=g, agent=self.spec.agent, sessions=False, sink=self._sink,
            source=self.spec.source, refusal=_refusal,
        )  # fmt: skip

    def _call(self, name: str, data: dict[str, Any]) -> Any:
        if self.spec.source == "run":
            data = {**data, "via": "run"}
        return self._ToolCall("egress", name, data, self.spec.cwd)

    def context(self) -> tuple[str, dict[tuple[str, int | None], tuple[str, int | None]]]:
        """(the agent's mode, the resolver overrides of ``[egress] resolve``)."""
        with self._lock:
            g = self._load()
            table = self._resolve_table(g.loaded.model.egress.resolve)
            return str(g.agent(self.spec.agent).mode), table

    def decide(self, name: str, data: dict[str, Any], record: bool = True) -> Outcome:
        """One egress call through the gate: recorded when ``record``, or when refused."""
        with self._lock:
            call = self._call(name, data)
            context = {"egress": dict(call.input)}
            g = self._load()
            gate = self._gate(g)
            verdict = gate.decide(call)
            if record or not verdict.allowed:
                verdict = gate.record(verdict, context, _answered, g)
            reason = str(verdict.reason)
            if verdict.action.value == "ask":
                reason += " (the egress proxy has no one to ask: refused)"
            return Outcome(bool(verdict.allowed), reason, str(verdict.rule))

    def refuse(self, name: str, data: dict[str, Any], reason: str) -> None:
        """Record a refusal the proxy makes itself (a malformed or smuggled request, a
        tunnel that is not what it claims)."""
        with self._lock:
            call = self._call(name, data)
            verdict = self._Verdict(
                self._deny, reason, PROTOCOL_RULE, call, self.spec.agent, "egress proxy"
            )
            self._gate(None).record(verdict, {"egress": dict(call.input)})


def _answered(verdict: Any) -> str:
    return "allow" if verdict.allowed else "deny"


def _refusal(call: Any) -> str:
    return ("guard's egress proxy refused it (a confined command reaches the network only"
            " through it)")


def answer(
    sock: socket.socket, status: int, reason: str, rule: str = "", *, wait: float = 2.0
) -> None:
    """A refusal the client can read: the reason in the status line (a client whose
    CONNECT fails shows it) and in the body; the connection closes after it. ``wait``:
    how long to read what the client still sends (0: only what has arrived already)."""
    line = " ".join(reason.split())
    short = line if len(line) <= 300 else line[:297] + "..."
    phrase = "".join(c if 32 <= ord(c) < 127 else "?" for c in f"guard: {short}")
    body = (f"guard: {line}\n" + (f"rule: {rule}\n" if rule else "")).encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        sock.settimeout(5)
        sock.sendall(head.encode("latin-1") + body)
        linger(sock, wait)
    except OSError:
        pass


def _shutdown(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)


class Refused(Exception):
    """The connection ends with this answer (any record is already written)."""

    def __init__(self, status: int, reason: str, rule: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.rule = rule


class Client:
    """One client connection: its requests in order, each decided, one upstream at a time."""

    def __init__(self, proxy: ClientHost, sock: socket.socket) -> None:
        self.proxy = proxy
        self.sock = sock
        self.reader = Reader(sock)
        self.upstream: socket.socket | None = None
        self.up_reader: Reader | None = None
        self.origin: tuple[str, int] | None = None
        self.decider: Decider | None = None
        self.mode = ""
        self.overrides: dict[tuple[str, int | None], tuple[str, int | None]] = {}

    def run(self) -> None:
        idle(self.sock, CLIENT_IDLE)
        try:
            self._serve()
        except Refused as exc:
            answer(self.sock, exc.status, exc.reason, exc.rule)
        except (OSError, httpwire.WireError):
            pass  # a peer went away, or the server broke the protocol mid-response
        finally:
            self._drop_upstream()

    # -- the request loop ----------------------------------------------------

    def _serve(self) -> None:
        first = True
        while True:
            try:
                data = self.reader.head(skip_blank=not first)
                if data is None:
                    return
                req = httpwire.parse_request(data)
            except httpwire.WireError as exc:
                self._protocol("request", {}, exc)
            self._policy()
            if req.connect:
                self._drop_upstream()
                self._tunnel(req)
                return
            self._request(req)
            first = False
            if req.close:
                return

    def _policy(self) -> None:
        if self.decider is not None:
            return
        self.decider = self.proxy.decider()
        if self.decider is None:
            raise Refused(503, "guard's egress proxy cannot load the policy:"
                               f" {self.proxy.decider_error}", FAIL_RULE)
        try:
            self.mode, self.overrides = self.decider.context()
        except Exception as exc:
            raise Refused(503, f"guard's egress proxy cannot load the policy: {exc}",
                          FAIL_RULE) from None

    def _decide(self, name: str, data: dict[str, Any], record: bool = True) -> None:
        assert self.decider is not None
        try:
            outcome = self.decider.decide(name, data, record)
        except Exception as exc:  # fail closed
            raise Refused(403, f"guard's egress proxy could not decide: {exc}",
                          FAIL_RULE) from None
        if not outcome.allowed:
            raise Refused(403, outcome.reason, outcome.rule)

    def _protocol(self, name: str, data: dict[str, Any], exc: httpwire.WireError) -> NoReturn:
        """Refuse, and record, a request guard will not forward."""
        reason = f"refused by guard's egress proxy: {exc.message}"
        self._policy()
        assert self.decider is not None
        try:
            self.decider.refuse(name, data, reason)
        except Exception as audit_exc:
            reason += f" (the audit log could not record it: {audit_exc})"
        raise Refused(exc.status, reason, PROTOCOL_RULE)

    # -- plain HTTP ------------------------------------------------------------

    def _request(self, req: Request) -> None:
        data: dict[str, Any] = {
            "host": req.host, "port": req.port, "method": req.method, "path": req.bare_path,
        }  # fmt: skip
        if req.chunked or req.length:
            data["body"] = True
            if req.content_type is not None:
                data["content_type"] = req.content_type
        if "?" in req.path:
            data["query"] = True  # decided (a git fetch carries none), never recorded
        new = (req.host, req.port) != self.origin or self.upstream is None
        self._decide("request", data, record=new)
        body = None
        if self.mode == "plan" and gitwire.is_fetch(req):  # plan mode's one POST
            try:
                body = gitwire.read_fetch(self.reader, self.sock, req)
            except httpwire.WireError as exc:
                self._protocol("request", data, exc)
        if new:
            self._drop_upstream()
            self.upstream = self._open(req.host, req.port)
            self.up_reader = Reader(self.upstream)
            self.origin = (req.host, req.port)
        assert self.upstream is not None and self.up_reader is not None
        self.upstream.sendall(req.render() if body is None else req.render() + body)
        if req.expect_continue:
            self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            if body is not None:
                pass  # sent above, whole
            elif req.chunked:
                self._send_chunked()
            elif req.length:
                self.reader.copy(self.upstream, req.length)
        except httpwire.WireError as exc:
            self._drop_upstream()  # the server saw a request cut short: it is not finished
            self._protocol("request", data, exc)
        self._relay_response(req)

    def _send_chunked(self) -> None:
        assert self.upstream is not None
        while True:
            size = httpwire.chunk_size(self.reader.line())
            if size == 0:
                while self.reader.line():
                    pass  # trailer fields: dropped
                self.upstream.sendall(b"0\r\n\r\n")
                return
            self.upstream.sendall(b"%x\r\n" % size)
            self.reader.copy(self.upstream, size)
            self.reader.crlf()
            self.upstream.sendall(b"\r\n")

    def _relay_response(self, req: Request) -> None:
        up, upr = self.upstream, self.up_reader
        assert up is not None and upr is not None
        idle(up, RELAY_IDLE)
        while True:
            head = upr.head()
            if head is None:
                raise ConnectionError("the server closed the connection without an answer")
            framing = httpwire.response_framing(head, req.method)
            self.sock.sendall(head)
            if framing.interim:
                continue
            if framing.chunked:
                self._relay_chunked(upr)
            elif framing.until_close:
                upr.copy(self.sock, None)
                raise ConnectionError("the response ran until the server closed")
            elif framing.length:
                upr.copy(self.sock, framing.length)
            if framing.close:
                self._drop_upstream()
            return

    def _relay_chunked(self, upr: Reader) -> None:
        while True:
            line = upr.line()
            self.sock.sendall(line + b"\r\n")
            size = httpwire.chunk_size(line)
            if size == 0:
                while True:
                    trailer = upr.line()
                    self.sock.sendall(trailer + b"\r\n")
                    if not trailer:
                        return
            upr.copy(self.sock, size)
            upr.crlf()
            self.sock.sendall(b"\r\n")

    # -- CONNECT -------------------------------------------------------------

    def _tunnel(self, req: Request) -> None:
        data: dict[str, Any] = {"host": req.host, "port": req.port}
        self._decide("connect", data)
        if self.mode == "plan":
            self._plan_tunnel(req, data)
            return
        up = self._open(req.host, req.port)
        self.upstream = up
        self.sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        idle(self.sock, RELAY_IDLE)
        # the server's bytes flow at once (some protocols speak first); the client's
        # go up once their start is checked
        self._splice(up, lambda: self._check_tls(req, data) and None)

    def _plan_tunnel(self, req: Request, data: dict[str, Any]) -> None:
        """Plan mode: nothing reaches the server before a complete TLS ClientHello naming
        the CONNECT host was read and parsed whole; only then is the server connected,
        asked whether it speaks TLS (:meth:`_probe_tls`) and sent the hello alone; the
        client's further bytes follow once the server answered it with TLS."""
        self.sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        idle(self.sock, RELAY_IDLE)
        try:
            end = self._check_tls(req, data)
        except OSError:
            _shutdown(self.sock)
            return
        reason = self._probe_tls(req.host, req.port)
        if reason:
            assert self.decider is not None
            self.decider.refuse("connect", data, f"refused by guard's egress proxy: {reason}")
            _shutdown(self.sock)
            return
        up = self._open(req.host, req.port)
        self.upstream = up
        up.sendall(self.reader.buf[:end])
        del self.reader.buf[:end]
        first = b""
        while len(first) < 5:
            chunk = up.recv(5 - len(first))
            if not chunk:
                break
            first += chunk
        if len(first) < 5 or first[0] not in (0x15, 0x16) or first[1] != 3:
            reason = (f"the server {req.host}:{req.port} did not answer the ClientHello with TLS;"
                      " in plan mode a tunnel carries TLS only")  # fmt: skip
            assert self.decider is not None
            self.decider.refuse("connect", data, f"refused by guard's egress proxy: {reason}")
            _shutdown(self.sock)
            return
        self.sock.sendall(first)
        self._splice(up, lambda: None)

    def _probe_tls(self, host: str, port: int) -> str:
        """Why ``host:port`` is not known to speak TLS ("" when it is): see
        :mod:`guard.sandbox.tlsprobe`."""
        if tlsprobe.known(host, port):
            return ""
        probe = self._open(host, port)
        try:
            if tlsprobe.probe(probe, host, port):
                return ""
        finally:
            self.proxy.untrack(probe)
            _shutdown(probe)
            probe.close()
        return (f"the server {host}:{port} did not answer guard's own ClientHello with TLS:"
                " it does not speak TLS, and in plan mode a tunnel carries TLS only")

    def _splice(self, up: socket.socket, check: Any) -> None:
        """Copy both ways: the server's bytes at once, the client's once ``check`` passed
        (it raises OSError to close the tunnel)."""
        idle(up, RELAY_IDLE)
        down = threading.Thread(target=_pump, args=(up, self.sock), daemon=True,
                                name="guard-egress-down")  # fmt: skip
        down.start()
        try:
            check()
            if self.reader.buf:
                up.sendall(self.reader.buf)
                self.reader.buf.clear()
            _pump(self.sock, up)
        except OSError:
            _shutdown(self.sock)
            _shutdown(up)
        down.join(RELAY_IDLE)

    def _check_tls(self, req: Request, data: dict[str, Any]) -> int:
        """The tunnel's first bytes: a TLS ClientHello naming the CONNECT's host (or no
        name). Another name closes the tunnel (domain fronting), and so, in plan mode,
        does anything but a complete ClientHello naming the host (a name only an IP
        address may lack). A refusal is recorded (ConnectionError). Returns where the
        hello ends in the buffer (0 when a build-mode tunnel carries something else)."""
        reason = ""
        end = 0
        plan = self.mode == "plan"
        while True:
            try:
                hello = httpwire.client_hello_sni(bytes(self.reader.buf), sealed=not plan)
                more = hello is not None or self.reader.fill_within(HEAD_TIME, "a hello")
            except httpwire.WireError as exc:
                if plan:
                    reason = (f"{exc.message}; in plan mode a tunnel carries TLS only (nothing"
                              " else could be checked)")  # fmt: skip
                break
            if hello is not None:
                end, sni = hello
                if sni is not None and sni != req.host:
                    reason = (f"the TLS server name {sni!r} is not the CONNECT host"
                              f" {req.host!r} (domain fronting)")  # fmt: skip
                elif plan and sni is None and not _is_ip(req.host):
                    reason = (f"the TLS ClientHello names no server; in plan mode it must name"
                              f" the CONNECT host {req.host!r}")  # fmt: skip
                break
            if not more:
                if plan:
                    reason = ("the tunnel ended before a complete TLS ClientHello; in plan mode"
                              " a tunnel carries TLS only")  # fmt: skip
                break
        if reason:
            assert self.decider is not None
            self.decider.refuse("connect", data, f"refused by guard's egress proxy: {reason}")
            raise ConnectionError(reason)
        return end

    # -- upstream ------------------------------------------------------------

    def _open(self, host: str, port: int) -> socket.socket:
        """A connection to ``host``, to an address checked once (see :meth:`_addresses`)."""
        last: OSError | None = None
        for family, sockaddr in self._addresses(host, port):
            s = socket.socket(family, socket.SOCK_STREAM)
            if not self.proxy.track(s):
                s.close()
                raise ConnectionError("the egress proxy is closing")
            try:
                s.settimeout(CONNECT_TIMEOUT)
                s.connect(sockaddr)
                idle(s, RELAY_IDLE)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError as exc:
                last = exc
                self.proxy.untrack(s)
                s.close()
        raise Refused(502, f"cannot connect to {host}:{port}: {last}")

    def _addresses(self, host: str, port: int) -> list[tuple[int, Any]]:
        """Where ``host`` is: the ``[egress] resolve`` entry if any (trusted as written),
        an IP address as given (decided as the host), else the resolver's answers, each
        private, loopback or link-local one decided as a host of its own."""
        override = self.overrides.get((host, port)) or self.overrides.get((host, None))
        if override is not None:
            addr, to = override
            return [(_family(addr), (addr, to or port))]
        if _is_ip(host):
            return [(_family(host), (host, port))]
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise Refused(502, f"cannot resolve {host}: {exc.strerror}") from None
        out: list[tuple[int, Any]] = []
        seen: set[str] = set()
        refused: list[str] = []
        local = local_addresses()
        for family, _, _, _, sockaddr in infos:
            addr = str(sockaddr[0])
            if addr in seen or family not in (socket.AF_INET, socket.AF_INET6):
                continue
            seen.add(addr)
            kind = address_class(addr, local)
            if kind is not None:
                bare = addr.split("%", 1)[0]
                data = {"host": host, "port": port, "address": bare, "class": kind}
                try:
                    self._decide("address", data)
                except Refused as exc:
                    shown = f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"
                    refused.append(
                        f"{host} resolved to {bare} ({kind}), which is reached only where a"
                        f" rule allows the address itself (a name's answer can change: DNS"
                        f" rebinding); to reach it, allow {shown!r}. {exc.reason}"
                    )
                    continue
            out.append((family, sockaddr))
        if not out:
            raise Refused(403, refused[0] if refused else f"{host} has no address")
        return out

    def _drop_upstream(self) -> None:
        if self.upstream is not None:
            self.proxy.untrack(self.upstream)
            _shutdown(self.upstream)
            self.upstream.close()
        self.upstream = None
        self.up_reader = None
        self.origin = None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _family(addr: str) -> int:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until end of stream, then half-close ``dst``; on an error
    both ends are shut down."""
    try:
        transfer(src, dst, None)
    except OSError:
        _shutdown(src)
        _shutdown(dst)
        return
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
