"""Whether a server speaks TLS, asked with a ClientHello of guard's own.

In plan mode the egress proxy sends a tunnel's ClientHello to the server only once the
server is known to speak TLS: the client's hello is bytes the client chose (its random,
session id and key shares may be lines of a plaintext protocol that a line-based store
behind an allowed host would take), so it goes only to a server that reads it as TLS.
:func:`probe` sends a hello guard made (nothing of the client's in it) and accepts a
ServerHello or an alert as the answer; a server found speaking TLS is not asked again
for :data:`SEEN_FOR` seconds (:func:`known`).

Standard library only, and importable by the confinement helper by its plain name
(like its siblings): it is loaded with :mod:`guard.sandbox.relay`, ``ssl`` only on the
first probe.
"""

# Lazy imports: ssl only when a plan-mode tunnel asks (the helper's start-up speed).

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time

#: Seconds a server found speaking TLS is not asked again.
SEEN_FOR = 60.0
#: Seconds to wait for the server's answer.
ANSWER_TIMEOUT = 15.0
_seen: dict[tuple[str, int], float] = {}
_lock = threading.Lock()


def known(host: str, port: int) -> bool:
    """``host:port`` answered a probe with TLS less than :data:`SEEN_FOR` seconds ago."""
    with _lock:
        return _seen.get((host, port), 0.0) > time.monotonic()


def hello(host: str) -> bytes:
    """A ClientHello of guard's own for ``host`` (no server name for an IP address)."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    try:
        ipaddress.ip_address(host)
        name = None
    except ValueError:
        name = host
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def is_tls_answer(head: bytes) -> bool:
    """``head`` (a record header and one byte more) starts a ServerHello or an alert:
    not an echo of the hello, nor a plaintext protocol's answer."""
    if len(head) < 6 or head[1] != 3:
        return False
    if head[0] == 0x16:
        return head[5] == 2
    return head[0] == 0x15 and int.from_bytes(head[3:5], "big") == 2


def probe(sock: socket.socket, host: str, port: int) -> bool:
    """Send guard's own ClientHello on ``sock`` (connected to ``host:port``) and read the
    start of the answer (a bounded wait): True when it is TLS (remembered)."""
    head = b""
    with contextlib.suppress(OSError):
        sock.settimeout(ANSWER_TIMEOUT)
        sock.sendall(hello(host))
        while len(head) < 6 and (chunk := sock.recv(6 - len(head))):
            head += chunk
    if not is_tls_answer(head):
        return False
    with _lock:
        _seen[(host, port)] = time.monotonic() + SEEN_FOR
    return True
