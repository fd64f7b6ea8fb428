"""The ``egress`` dialect: connections made through guard's egress proxy.

:mod:`guard.sandbox.egress_proxy` hands the gate one call per decision it needs, as a
:class:`~guard.effects.ToolCall` of this dialect; the audit record keeps the input
(under ``egress``), so ``guard replay`` can decide recorded connections again.
No call here is a tool call: there is no ``tool`` effect, the agent's network
rules alone decide (and, in plan mode, the rule that nothing may change a remote).

``connect`` ``{host, port}``
    An HTTP CONNECT tunnel (HTTPS): decided by host and port only; what is sent
    inside is encrypted and not seen.
``request`` ``{host, port, method, path, content_type?, body?, query?}``
    One plain-HTTP request (``path`` without its query; ``body``: it carries one;
    ``query``: its target has a query, which is not recorded). A
    method other than GET, HEAD and OPTIONS may change the server
    (``changes_remote``), except a git fetch (:func:`is_git_fetch`, without a query,
    its body checked by the proxy: :mod:`guard.sandbox.gitwire`); so may a GET,
    HEAD or OPTIONS with a body, which a server that does not expect one may read as
    a request of its own.
``address`` ``{host, port, address, class}``
    A private, loopback or link-local address a name resolved to: reached only
    where a rule names the address itself (a name's answer can change: DNS
    rebinding).

Each may carry ``via: "run"``: made under ``guard run``, where the agent's
``network.model_api`` list applies too.
"""

from __future__ import annotations

import re
from typing import Any

from guard.analysis.dialect import Handler
from guard.effects import Effect, ToolCall, ToolInputError
from guard.network import format_target

NAME = "egress"
#: Methods that read: the only ones plan mode sends over plain HTTP.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: A git fetch over smart HTTP posts its wants to this service, which only reads.
UPLOAD_PACK_TYPE = "application/x-git-upload-pack-request"
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")


def is_git_fetch(method: str, path: str, content_type: str | None) -> bool:
    """A git fetch's ``POST …/git-upload-pack``, spelt so that no server can read it as
    another service: no percent-encoding, no query, plain characters only (git's
    http-backend picks the service by the decoded path's ending)."""
    return (
        method == "POST"
        and content_type == UPLOAD_PACK_TYPE
        and _PLAIN_PATH.fullmatch(path) is not None
        and path.endswith("/git-upload-pack")
    )


def _target(call: ToolCall) -> tuple[str, str]:
    host = call.input.get("host")
    port = call.input.get("port")
    if not isinstance(host, str) or not host:
        raise ToolInputError(f"{call.where('host')} must be a non-empty string")
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ToolInputError(f"{call.where('port')} must be a port number, got {port!r}")
    return format_target(host, port), _via(call)


def _via(call: ToolCall) -> str:
    via = call.input.get("via", "")
    if via not in ("", "run"):
        raise ToolInputError(f"{call.where('via')} must be \"run\" or absent, got {via!r}")
    return str(via)


def _str(call: ToolCall, key: str, required: bool = True) -> str | None:
    value: Any = call.input.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise ToolInputError(f"{call.where(key)} must be a non-empty string, got {value!r}")
    return value


def _connect(call: ToolCall) -> list[Effect]:
    target, via = _target(call)
    return [Effect.network(
        target, f"CONNECT {target}: a tunnel, decided by host and port (what is sent inside"
        " is encrypted and not seen)", via=via)]


def _request(call: ToolCall) -> list[Effect]:
    target, via = _target(call)
    method = _str(call, "method") or ""
    path = _str(call, "path") or ""
    content_type = _str(call, "content_type", required=False)
    body = call.input.get("body", False)
    query = call.input.get("query", False)
    for key, flag in (("body", body), ("query", query)):
        if not isinstance(flag, bool):
            raise ToolInputError(f"{call.where(key)} must be true or false, got {flag!r}")
    safe = method in SAFE_METHODS and not body
    # a git fetch carries no query: one could hand the server what the decision never saw
    changes = not safe and (query or not is_git_fetch(method, path, content_type))
    detail = f"{method} http://{target.removesuffix(':80')}{path}"
    if changes and method in SAFE_METHODS:
        detail += " with a body, which a server may read as a request of its own"
    elif changes:
        detail += " may change the server"
    elif method == "POST":
        detail += " (a git fetch: the upload-pack service only reads)"
    return [Effect.network(target, detail, changes_remote=changes, via=via)]


def _address(call: ToolCall) -> list[Effect]:
    name, via = _target(call)
    address = _str(call, "address") or ""
    port = call.input["port"]
    kind = _str(call, "class", required=False) or "not public"
    target = format_target(address, port)
    return [Effect.network(
        target, f"{name} resolved to {address} ({kind}): such an address is reached only"
        " where a rule names it (a name's answer can change: DNS rebinding)", via=via)]


TOOLS: dict[str, Handler] = {"connect": _connect, "request": _request, "address": _address}
