"""What a git fetch posts to ``git-upload-pack``, checked whole before the egress proxy
sends it on.

Plan mode lets one POST through the egress proxy: a git fetch's ``POST
…/git-upload-pack`` (the upload-pack service only reads). The proxy reads such a
request's body whole (:data:`MAX_BODY` at most, gzip undone), and
:func:`check_upload_pack` accepts it only when it is what git sends there: pkt-lines
(protocol v0/v1: ``want``, ``have``, ``shallow``, ``deepen…``, ``filter``, ``done`` and
the capabilities on the first ``want``; protocol v2: a ``command=`` of ``fetch``,
``ls-refs`` or ``object-info``, capability lines, then that command's arguments).
Anything else (an HTTP request riding in the body for a server that does not read
it, a payload for another service on the allowed host) is a :class:`WireError`, and
the request is refused. Stdlib only (loaded by the helper without site-packages).
"""

from __future__ import annotations

import re
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:
    from guard.sandbox.httpwire import WireError
    from guard.sandbox.sockio import read_body
else:  # the helper: siblings by their plain names
    from httpwire import WireError
    from sockio import read_body
if TYPE_CHECKING:
    import socket

    from guard.sandbox.httpwire import Request
    from guard.sandbox.sockio import Reader

#: The content type of the request a git fetch posts to git-upload-pack.
UPLOAD_PACK_TYPE = "application/x-git-upload-pack-request"
#: The largest upload-pack body read (its wants and haves); more is refused.
MAX_BODY = 8 * 1024 * 1024

_OID = r"[0-9a-f]{40}(?:[0-9a-f]{24})?"
_CAP = r"[A-Za-z0-9][A-Za-z0-9._-]*(?:=[!-~]*)?"
_REF = r"[!-~]+"
#: The arguments of protocol v0/v1 (a want's capabilities follow its object id).
_V0 = re.compile(
    rf"want {_OID}(?: {_CAP})*|have {_OID}|shallow {_OID}|deepen [0-9]+|deepen-since [0-9]+"
    rf"|deepen-not {_REF}|filter [!-~]+|done"
)
#: The arguments each protocol v2 command takes.
_V2 = {
    "fetch": re.compile(
        rf"want {_OID}|have {_OID}|shallow {_OID}|want-ref {_REF}|done|thin-pack|no-progress"
        rf"|include-tag|ofs-delta|deepen [0-9]+|deepen-since [0-9]+|deepen-not {_REF}"
        r"|deepen-relative|filter [!-~]+|sideband-all|wait-for-done|packfile-uris [!-~]+"
    ),
    "ls-refs": re.compile(rf"peel|symrefs|unborn|ref-prefix {_REF}"),
    "object-info": re.compile(rf"size|oid {_OID}"),
}
_V2_CAPABILITY = re.compile(_CAP)


def is_fetch(req: Request) -> bool:
    """A git fetch's ``POST …/git-upload-pack`` (its query is decided apart)."""
    return (
        req.method == "POST"
        and req.bare_path.endswith("/git-upload-pack")
        and req.content_type == UPLOAD_PACK_TYPE
    )


def read_fetch(reader: Reader, client: socket.socket, req: Request) -> bytes:
    """A git fetch's body, read whole from the client before anything goes up and checked
    (:func:`check_upload_pack`), as guard sends it on: gzip undone, with a length, and
    ``req`` changed to match and to close the connection after the response (nothing
    else rides on it). WireError when it is anything else."""
    if req.expect_continue:
        client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    coding = [v for n, v in req.headers if n.lower() == "content-encoding"]
    if len(coding) > 1:
        raise WireError(400, "more than one Content-Encoding")
    raw = read_body(reader, req.chunked, req.length, MAX_BODY)
    body = decoded(raw, coding[0] if coding else None)
    check_upload_pack(body)
    dropped = ("content-encoding", "expect")
    req.headers = [(n, v) for n, v in req.headers if n.lower() not in dropped]
    req.chunked, req.length, req.close, req.expect_continue = False, len(body), True, False
    return body


def decoded(body: bytes, encoding: str | None) -> bytes:
    """The body as git wrote it: ``gzip`` undone (bounded), none kept as it is; any other
    coding is a WireError."""
    if encoding is None or encoding.lower() == "identity":
        return body
    if encoding.lower() not in ("gzip", "x-gzip"):
        raise WireError(415, f"Content-Encoding {encoding[:40]!r} on a git fetch")
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(body, MAX_BODY + 1)
    except zlib.error:
        raise WireError(400, "a git fetch's gzip body does not inflate") from None
    if len(out) > MAX_BODY or inflate.unconsumed_tail or not inflate.eof:
        raise WireError(413, "a git fetch's body is too large or cut short")
    return out


def pkt_lines(body: bytes) -> list[bytes | None]:
    """The pkt-lines of ``body``: each payload without its line end, None for a flush
    (``0000``), a delimiter (``0001``) or a response end (``0002``)."""
    out: list[bytes | None] = []
    pos = 0
    while pos < len(body):
        size_text = body[pos : pos + 4]
        if len(size_text) < 4 or not re.fullmatch(rb"[0-9a-f]{4}", size_text):
            raise WireError(400, "a git fetch's body is not pkt-lines")
        size = int(size_text, 16)
        if size in (0, 1, 2):
            out.append(None)
            pos += 4
            continue
        if size < 5 or pos + size > len(body):
            raise WireError(400, "a git fetch's body holds a malformed pkt-line")
        payload = body[pos + 4 : pos + size]
        out.append(payload[:-1] if payload.endswith(b"\n") else payload)
        pos += size
    return out


def check_upload_pack(body: bytes) -> None:
    """WireError unless ``body`` is an upload-pack request as git sends it."""
    lines = pkt_lines(body)
    if not lines:
        raise WireError(400, "an empty git fetch")
    texts: list[str | None] = []
    for line in lines:
        try:
            texts.append(None if line is None else line.decode("ascii"))
        except UnicodeDecodeError:
            raise WireError(400, "a git fetch's pkt-line is not ASCII") from None
    first = texts[0]
    if first is not None and first.startswith("command="):
        _check_v2(texts)
        return
    for text in texts:
        if text is not None and not _V0.fullmatch(text):
            raise WireError(400, f"{text[:60]!r} is not part of a git fetch")


def _check_v2(texts: list[str | None]) -> None:
    command = (texts[0] or "").removeprefix("command=")
    arguments = _V2.get(command)
    if arguments is None:
        raise WireError(400, f"git protocol v2 command {command[:40]!r} is not a fetch")
    section = "capabilities"
    for text in texts[1:]:
        if text is None:
            section = "arguments" if section == "capabilities" else "end"
            continue
        if section == "end":
            raise WireError(400, "a git fetch carries more after its end")
        pattern = _V2_CAPABILITY if section == "capabilities" else arguments
        if not pattern.fullmatch(text):
            raise WireError(400, f"{text[:60]!r} is not part of a git {command}")
