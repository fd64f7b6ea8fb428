"""Strict reading and canonical writing of the proxy's JSON-RPC lines.

guard decides on the message it parsed, and another program (the MCP server, or
the host on the way back) parses the same line again. Whatever the two could read
differently is refused here, and what guard forwards is never the bytes it was
given but its own rendering of the object it checked (:func:`render`): printable
ASCII, no whitespace, one line. What is refused, and why each rule exists:

* **a carriage return** anywhere but just before the line's end (CR LF): Python's
  text streams (the official Python SDK's stdio transport) end a line at a bare
  CR, so a message hidden after one would reach the server unchecked;
* **bytes that are not UTF-8**, and **lone surrogates** written as escapes
  (``"\\ud800"``): decoders replace, keep or reject them, each its own way;
* **the same key twice** in one object, and **two keys equal but for case** (Unicode
  case folding, as Go's ``encoding/json`` matches struct fields), and **a key that
  differs only in case from a name in** :data:`VOCABULARY` (every property name of
  the MCP schema, JSON-RPC's members, and every argument name guard's MCP analysis
  reads): a decoder that matches keys without regard to case reads ``"Name"`` or
  ``"PATH"`` where guard reads nothing;
* **nesting deeper than** :data:`MAX_DEPTH`, measured before parsing and without
  recursion (Python's decoder would raise ``RecursionError``);
* ``NaN``, ``Infinity`` and numbers too large for a double: not JSON; other decoders
  refuse or round them;
* **an id** that is not a string or an integer within ``±(2**53 - 1)`` (JavaScript and
  Go's ``interface{}`` keep integers exactly only that far: two ids would become
  one), and booleans (Python reads ``true`` as ``1``);
* **a message of no single shape**: a request is ``{jsonrpc, id, method, params?}``,
  a notification ``{jsonrpc, method, params?}``, a response ``{jsonrpc, id, result}`` or
  ``{jsonrpc, id, error}``; ``jsonrpc`` is ``"2.0"``, ``params`` and ``result`` are objects.
  A member of another shape (``method`` next to ``result``) could make a decoder
  take a request for an answer;
* **batches** (a JSON array): removed from MCP in 2025-06-18; the proxy refuses them
  in every revision (see docs/mcp.md).

A refused line raises :class:`Refused`, which says what the line seemed to be
(request, notification, response) and its id when one can be read safely, so
the router can answer a request exactly once, and drop the rest.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from itertools import accumulate
from typing import Any, Literal

Json = dict[str, Any]
Id = str | int

#: Deepest nesting of objects and arrays in one message (serde_json's default limit).
MAX_DEPTH = 128
#: Largest integer id magnitude that JavaScript numbers and Go's float64 keep exactly.
MAX_ID = 2**53 - 1
#: How much of an unreadable line is searched for its id (to answer it).
SALVAGE_BYTES = 1 << 20

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

Kind = Literal["request", "notification", "response", "unknown"]

#: JSON-RPC's members and every property name of the MCP schema (revisions 2025-11-25
#: and 2026-07-28, from the official SDK's types; tests/mcp/test_mcp_wire.py checks the
#: list against it), and every argument name guard's analysis of an MCP tool call reads
#: (tests check that too). A key that differs from one of these only in case is refused.
def _words(text: str) -> list[str]:
    return text.split()


VOCABULARY: frozenset[str] = frozenset(
    # JSON-RPC 2.0
    _words("jsonrpc id method params result error code message data")
    # MCP schema
    + _words("""
    $schema _meta action annotations anyOf argument arguments audience blob cacheScope
    call cancel capabilities clientInfo code completion completions const content contents
    context costPriority create createMessage createdAt cursor data default description
    destructiveHint elicitation elicitationId elicitations enum enumNames error execution
    experimental extensions form format hasMore hints icons id idempotentHint
    includeContext input inputRequests inputResponses inputSchema instructions
    intelligencePriority io.modelcontextprotocol/clientCapabilities
    io.modelcontextprotocol/clientInfo io.modelcontextprotocol/logLevel
    io.modelcontextprotocol/protocolVersion io.modelcontextprotocol/serverInfo
    io.modelcontextprotocol/subscriptionId isError items jsonrpc lastModified
    lastUpdatedAt level list listChanged logger logging maxItems maxLength maxTokens
    maximum message messages metadata method mimeType minItems minLength minimum mode
    model modelPreferences name nextCursor notifications oneOf openWorldHint
    outputSchema params pollInterval priority progress progressToken prompts
    promptsListChanged properties protocolVersion readOnlyHint reason ref requestId
    requestState requested requestedSchema requests required requiredCapabilities
    resource resourceSubscriptions resourceTemplates resources resourcesListChanged
    result resultType role roots sampling serverInfo size sizes speedPriority src status
    statusMessage stopReason stopSequences structuredContent subscribe supported
    supportedVersions systemPrompt task taskId taskSupport tasks temperature text theme
    title toolChoice toolUseId tools toolsListChanged total ttl ttlMs type uri
    uriTemplate url value values version websiteUrl
    """)
    # tool arguments guard's MCP analysis reads (guard/analysis/mcp.py, guess_effects)
    + _words("""
    path paths source destination edits dryRun pattern command cmd workdir cwd
    directory dir_path file_path filePath notebook_path oldText newText
    subagent_type subagentType
    """)
)


def fold(key: str) -> str:
    """``key`` under Unicode case folding (ASCII keys: lowercased)."""
    return key.lower() if key.isascii() else key.casefold()


_FOLDED = {fold(k): k for k in VOCABULARY}


class Refused(Exception):
    """A line guard will not read, so never forwards.

    ``kind`` is what it seemed to be, ``msg_id`` its id when that could be read safely
    (else None), ``code`` the JSON-RPC error code to answer with.
    """

    def __init__(
        self, reason: str, *, kind: Kind = "unknown", msg_id: Id | None = None,
        code: int = INVALID_REQUEST, method: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind: Kind = kind
        self.msg_id = msg_id
        self.code = code
        self.method = method


class _Bad(Exception):
    """Raised inside the decoder; becomes :class:`Refused`."""


def _object(pairs: list[tuple[str, Any]]) -> Json:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Bad(f"the key {key!r} appears twice in one object")
            seen.add(key)
    keys = obj.keys()
    if len(obj) > 1:
        ascii_only = "".join(keys).isascii()  # then lower() is the fold, mapped in C
        if len(set(map(str.lower, keys)) if ascii_only else {fold(k) for k in keys}) != len(obj):
            folds: dict[str, str] = {}
            for key in keys:
                other = folds.setdefault(fold(key), key)
                if other != key:
                    raise _Bad(f"the keys {other!r} and {key!r} differ only in case")
    for key in keys - VOCABULARY:  # most keys are the vocabulary's own
        spec = _FOLDED.get(fold(key))
        if spec is not None:
            raise _Bad(
                f"the key {key!r} differs from {spec!r} only in case (a decoder that"
                " ignores case would read it as that)"
            )
    return obj


def _constant(name: str) -> Any:
    raise _Bad(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Bad(f"the number {text[:40]} is too large for a double")
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object, parse_constant=_constant, parse_float=_float
)
#: A JSON string from its opening quote: to its closing quote, or to the line's end when it
#: has none (an unclosed string, its last byte perhaps a lone backslash). Possessive, so that
#: a string is read once: never given back, never begun again from a quote inside it (the
#: usual ``"[^"\\]*(?:\\.[^"\\]*)*"`` retries from each ``\\"`` of an unclosed string: quadratic).
_STRING_BODY = rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)'
_STRING = re.compile(_STRING_BODY, re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def depth(line: bytes) -> int:
    """How deep objects and arrays nest in ``line`` (a bound: brackets in strings are
    skipped, and so is everything after a string left open, which no decoder reads past);
    no recursion, linear time."""
    opened = line.count(b"[") + line.count(b"{")
    if opened <= MAX_DEPTH:
        return opened
    steps = array("b")
    steps.frombytes(_STRING.sub(b"", line).translate(None, _NOT_BRACKETS).translate(_STEPS))
    return max(accumulate(steps), default=0)


def usable_id(value: object) -> bool:
    """A string, or an integer (not a boolean) that every decoder keeps exactly."""
    if isinstance(value, str):
        return True
    return type(value) is int and -MAX_ID <= value <= MAX_ID


def read(line: bytes) -> Json:
    """The one JSON-RPC message of ``line`` (without its line end), read strictly.

    Raises :class:`Refused` for anything the module docstring lists.
    """
    if b"\r" in line:
        raise _refused(line, "the line holds a carriage return (some servers end a line there)")
    if depth(line) > MAX_DEPTH:
        raise _refused(line, f"objects and arrays nest deeper than {MAX_DEPTH}")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refused(line, f"the line is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        message, end = _DECODER.raw_decode(text, _skip_space(text))
    except _Bad as exc:
        raise _refused(line, str(exc)) from None
    except (ValueError, RecursionError) as exc:  # not JSON: JSON-RPC answers with id null
        raise Refused(f"parse error: {exc}", code=PARSE_ERROR) from None
    if text[end:].strip(" \t"):
        raise Refused("parse error: more after the JSON value", code=PARSE_ERROR)
    if _SURROGATE_ESCAPE.search(line) and _has_lone_surrogate(message):
        raise _refused(line, "a string holds a lone surrogate (\\ud800-\\udfff unpaired)")
    if isinstance(message, list):
        raise Refused(
            "JSON-RPC batches are not supported by MCP since 2025-06-18; send one message"
            " per line",
        )
    if not isinstance(message, dict):
        raise Refused("a message must be a JSON object")
    _check_shape(message)
    return message


def _skip_space(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _has_lone_surrogate(message: object) -> bool:
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_REQUEST = frozenset(("jsonrpc", "id", "method", "params"))
_NOTIFICATION = frozenset(("jsonrpc", "method", "params"))
_RESULT = frozenset(("jsonrpc", "id", "result"))
_ERROR = frozenset(("jsonrpc", "id", "error"))


def kind_of(message: Json) -> Kind:
    if "method" in message:
        return "request" if "id" in message else "notification"
    return "response" if "id" in message else "unknown"


def _check_shape(message: Json) -> None:
    kind = kind_of(message)
    method = message.get("method")
    msg_id = message.get("id")
    ok_id = msg_id if usable_id(msg_id) else None

    def bad(reason: str) -> Refused:
        return Refused(reason, kind=kind, msg_id=ok_id,
                       method=method if isinstance(method, str) else None)

    if "id" in message and ok_id is None:
        raise bad(
            f"the id must be a string or an integer within ±{MAX_ID} (got"
            f" {json.dumps(msg_id)[:40]})"
        )
    if message.get("jsonrpc") != "2.0":
        raise bad('"jsonrpc" must be "2.0"')
    keys = message.keys()
    if kind in ("request", "notification"):
        allowed = _REQUEST if kind == "request" else _NOTIFICATION
        if not isinstance(method, str) or not method:
            raise bad('"method" must be a non-empty string')
        if "params" in message and not isinstance(message["params"], dict):
            raise bad('"params" must be an object (MCP names every parameter)')
    elif kind == "response":
        if "result" in message:
            allowed = _RESULT
            if not isinstance(message["result"], dict):
                raise bad('"result" must be an object')
        elif "error" in message:
            allowed = _ERROR
            err = message["error"]
            if not (isinstance(err, dict) and type(err.get("code")) is int
                    and isinstance(err.get("message"), str)):
                raise bad('"error" must be an object with an integer code and a message')
        else:
            raise bad("a message with an id and no method must hold a result or an error")
    else:
        raise bad("a message must have a method (request, notification) or an id (response)")
    extra = keys - allowed
    if extra:
        raise bad(
            f"unexpected member {sorted(extra)[0]!r} for a {kind} (a decoder could take the"
            " message for another kind)"
        )


def _refused(line: bytes, reason: str, code: int = INVALID_REQUEST) -> Refused:
    """Refused, with what the line seemed to be and its id if it can be found safely."""
    kind, msg_id, method = salvage(line)
    return Refused(reason, kind=kind, msg_id=msg_id, code=code, method=method)


_TOKEN = re.compile(_STRING_BODY + rb'|[\[\]{}:,]|[^\s\[\]{}:,"]+', re.DOTALL)
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]{0,15})")


def salvage(line: bytes) -> tuple[Kind, Id | None, str | None]:
    """What an unreadable line seems to be, read from its top-level ``id`` and ``method``
    members: its kind, its id (only when it is usable and named once), its method.

    Looks at the first :data:`SALVAGE_BYTES` bytes only; no recursion.
    """
    found: dict[str, list[bytes]] = {}
    level = 0
    pending_key: str | None = None
    tokens = _TOKEN.finditer(line, 0, min(len(line), SALVAGE_BYTES))
    previous = b""
    for match in tokens:
        tok = match.group()
        if pending_key is not None:
            found.setdefault(pending_key, []).append(tok)
            pending_key = None
        if tok in (b"{", b"["):
            level += 1
        elif tok in (b"}", b"]"):
            level -= 1
            if level <= 0:
                break
        elif tok == b":" and level == 1 and previous[:1] == b'"':
            try:
                key = json.loads(previous.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                key = None
            if key in ("id", "method", "result", "error"):
                pending_key = key
        previous = tok
    msg_id: Id | None = None
    ids = found.get("id", [])
    if len(ids) == 1:
        tok = ids[0]
        if tok[:1] == b'"':
            try:
                value = json.loads(tok.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                value = None
            if isinstance(value, str) and _encodable(value):
                msg_id = value
        elif _INTEGER.fullmatch(tok) and usable_id(int(tok)):
            msg_id = int(tok)
    method: str | None = None
    methods = found.get("method", [])
    if len(methods) == 1 and methods[0][:1] == b'"':
        try:
            value = json.loads(methods[0].decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            value = None
        method = value if isinstance(value, str) and _encodable(value) else None
    if methods:
        return ("request" if ids else "notification"), msg_id, method
    return ("response" if ids else "unknown"), msg_id, method


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def render(message: Json) -> bytes:
    """The canonical line of ``message`` (without the newline): printable ASCII only,
    every non-ASCII character escaped, no whitespace."""
    return _ENCODER.encode(message).encode("ascii")
