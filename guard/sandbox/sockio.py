"""A socket's bytes for the egress proxy: buffered reads, and copies from socket to socket.

Holds :class:`Reader` (a socket's bytes read ahead: the next header block, a chunk
line, a given length copied on), :func:`transfer` (bytes moved from socket to socket
by ``splice(2)`` through a pipe where the kernel allows it, else copied through
Python), :func:`idle` (a socket's idle time-out, kept by the kernel) and
:func:`linger` (a refused client's last bytes read before the close). It does not hold
what the bytes mean (:mod:`guard.sandbox.httpwire` parses and renders them), nor the
client connection that decides and relays them (:mod:`guard.sandbox.relay`).

Standard library only, and importable by the confinement helper by its plain name
(like its siblings): it is loaded with :mod:`guard.sandbox.relay`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import socket
import struct
import time

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:
    from guard.sandbox import httpwire
else:  # the helper: siblings by their plain names
    import httpwire

BUFFER = 1024 * 1024
#: Bodies smaller than this are copied through Python rather than spliced.
SPLICE_MIN = 64 * 1024
#: Seconds a header block may take from its first byte (a client sends it at once; one
#: that trickles it a byte at a time would hold a connection without end).
HEAD_TIME = 60.0


def idle(sock: socket.socket, seconds: float) -> None:
    """Block on ``sock`` for at most ``seconds`` without data, timed by the kernel
    (``SO_RCVTIMEO``/``SO_SNDTIMEO`` on a blocking socket): ``splice(2)`` then waits in
    the kernel, with no poll round per chunk. A time-out is an OSError (EAGAIN)."""
    sock.settimeout(None)
    tv = struct.pack("@ll", int(seconds), int(seconds % 1 * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


class Reader:
    """Buffered reads from a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.since: float | None = None

    def fill(self) -> bool:
        data = self.sock.recv(BUFFER)
        if not data:
            return False
        self.buf += data
        return True

    def fill_within(self, seconds: float, what: str) -> bool:
        """:meth:`fill`, refused (WireError 408 naming ``what``) once ``seconds`` have
        passed since this reader's first such call: a client trickling ``what`` a byte at
        a time holds the connection no longer."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
        elif now - self.since > seconds:
            raise httpwire.WireError(408, f"{what} took more than {seconds:g} seconds")
        return self.fill()

    def head(self, *, skip_blank: bool = False) -> bytes | None:
        """The next header block, CRLF CRLF included; None at a clean end of stream.
        ``skip_blank``: empty lines before it are skipped (after a body, RFC 9112 2.2).
        A line ending in a lone LF is refused as soon as it arrives, and a block still
        incomplete :data:`HEAD_TIME` seconds after its first byte (slowloris)."""
        started = time.monotonic() if self.buf else None
        while True:
            if skip_blank:
                while self.buf[:2] == b"\r\n":
                    del self.buf[:2]
            end = self.buf.find(b"\r\n\r\n")
            stop = len(self.buf) if end < 0 else end + 4
            lf = self.buf.find(b"\n", 0, stop)
            while lf >= 0:
                if lf == 0 or self.buf[lf - 1] != 13:
                    raise httpwire.WireError(400, "a line ends with a lone CR or LF (only CRLF"
                                                  " is accepted)")
                lf = self.buf.find(b"\n", lf + 1, stop)
            if end >= 0:
                if end + 4 > httpwire.MAX_HEAD:
                    raise httpwire.WireError(431, "the header block is too large")
                out = bytes(self.buf[: end + 4])
                del self.buf[: end + 4]
                return out
            if len(self.buf) > httpwire.MAX_HEAD:
                raise httpwire.WireError(431, "the header block is too large")
            if started is not None and time.monotonic() - started > HEAD_TIME:
                raise httpwire.WireError(408, f"the header block took more than {HEAD_TIME:g}"
                                              " seconds")
            if not self.fill():
                if not self.buf:
                    return None
                raise httpwire.WireError(400, "the connection ended inside a header block")
            if started is None:
                started = time.monotonic()

    def line(self) -> bytes:
        """One line without its CRLF (a chunk size or a trailer field)."""
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                out = bytes(self.buf[:end])
                del self.buf[: end + 2]
                if b"\r" in out or b"\n" in out:
                    raise httpwire.WireError(400, "a lone CR or LF in a chunked body")
                return out
            if len(self.buf) > httpwire.MAX_LINE:
                raise httpwire.WireError(400, "a chunk line is too long")
            if not self.fill():
                raise httpwire.WireError(400, "the connection ended inside a chunked body")

    def crlf(self) -> None:
        while len(self.buf) < 2:
            if not self.fill():
                raise httpwire.WireError(400, "the connection ended inside a chunked body")
        if self.buf[:2] != b"\r\n":
            raise httpwire.WireError(400, "a chunk is not followed by CRLF")
        del self.buf[:2]

    def copy(self, dst: socket.socket, n: int | None) -> None:
        """Send the next ``n`` bytes to ``dst`` (None: everything until end of stream)."""
        if self.buf:
            take = len(self.buf) if n is None else min(n, len(self.buf))
            dst.sendall(self.buf[:take])
            del self.buf[:take]
            if n is not None:
                n -= take
        if n != 0 and not transfer(self.sock, dst, n) and n is not None:
            raise ConnectionError("the connection ended inside a body")


def read_body(reader: Reader, chunked: bool, length: int, limit: int) -> bytes:
    """A request's whole body (``chunked``, else ``length`` bytes) read into memory, at
    most ``limit`` bytes (WireError 413 beyond; 400 when the stream ends inside it)."""
    out = bytearray()

    def take(n: int) -> None:
        if len(out) + n > limit:
            raise httpwire.WireError(413, f"a body guard must read whole is over {limit} bytes")
        while len(reader.buf) < n:
            if not reader.fill():
                raise httpwire.WireError(400, "the connection ended inside a body")
        out.extend(reader.buf[:n])
        del reader.buf[:n]

    if not chunked:
        take(length)
        return bytes(out)
    while size := httpwire.chunk_size(reader.line()):
        take(size)
        reader.crlf()
    while reader.line():
        pass  # trailer fields: dropped
    return bytes(out)


def transfer(src: socket.socket, dst: socket.socket, n: int | None) -> bool:
    """Move ``n`` bytes (None: until end of stream) from ``src`` to ``dst`` without
    reading them into Python: ``splice(2)`` through a pipe, where the kernel allows it
    (else ``recv_into``/``sendall``). Honours both sockets' timeouts. False when
    ``src`` ended first."""
    if n is not None and n < SPLICE_MIN:
        return _copy(src, dst, n)  # a pipe costs more than copying a little
    try:
        pipe = os.pipe2(os.O_CLOEXEC)
    except (AttributeError, OSError):
        return _copy(src, dst, n)
    r, w = pipe
    try:
        with contextlib.suppress(OSError):
            fcntl.fcntl(w, _F_SETPIPE_SZ, BUFFER)
        return _splice(src, dst, n, r, w)
    except _NoSplice:
        return _copy(src, dst, n)
    finally:
        os.close(r)
        os.close(w)


class _NoSplice(Exception):
    """splice(2) refused these descriptors before moving anything."""


_F_SETPIPE_SZ = 1031
_SPLICE = getattr(os, "splice", None)
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1)


def _splice(src: socket.socket, dst: socket.socket, n: int | None, r: int, w: int) -> bool:
    if _SPLICE is None:
        raise _NoSplice
    sfd, dfd = src.fileno(), dst.fileno()
    moved_any = False
    while n is None or n > 0:
        try:
            k = _SPLICE(sfd, w, BUFFER if n is None else min(n, BUFFER), flags=_FLAGS)
        except BlockingIOError:
            _wait(src, select.POLLIN)
            continue
        except OSError as exc:
            if not moved_any and exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise _NoSplice from None
            raise
        if k == 0:
            return False
        moved_any = True
        left = k
        while left:
            try:
                left -= _SPLICE(r, dfd, left, flags=_FLAGS)
            except BlockingIOError:
                _wait(dst, select.POLLOUT)
        if n is not None:
            n -= k
    return True


def _wait(sock: socket.socket, event: int) -> None:
    """Wait until ``sock`` is ready for ``event``, within its timeout (TimeoutError)."""
    timeout = sock.gettimeout()
    poller = select.poll()
    poller.register(sock.fileno(), event | select.POLLERR | select.POLLHUP)
    if not poller.poll(None if timeout is None else int(timeout * 1000)):
        raise TimeoutError("timed out")


def _copy(src: socket.socket, dst: socket.socket, n: int | None) -> bool:
    size = SPLICE_MIN if n is not None and n < SPLICE_MIN else BUFFER
    view = memoryview(bytearray(size))
    # a body of known length: wait for whole buffers (fewer, larger writes downstream)
    wait = socket.MSG_WAITALL if n is not None and src.gettimeout() is None else 0
    while n is None or n > 0:
        k = src.recv_into(view, size if n is None else min(n, size), wait)
        if k == 0:
            return False
        dst.sendall(view[:k])
        if n is not None:
            n -= k
    return True


def linger(sock: socket.socket, seconds: float = 2.0, limit: int = 1 << 20) -> None:
    """Half-close ``sock`` and read what the client still sends (a request body guard
    refused), for a moment: closing with unread data would reset the connection and
    could destroy the answer before the client reads it."""
    sock.shutdown(socket.SHUT_WR)
    end = time.monotonic() + seconds
    got = 0
    if seconds <= 0:  # what has arrived, without waiting for more
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            while got < limit and (data := sock.recv(65536)):
                got += len(data)
        return
    with contextlib.suppress(OSError):
        while got < limit and (left := end - time.monotonic()) > 0:
            sock.settimeout(left)
            data = sock.recv(65536)
            if not data:
                return
            got += len(data)
