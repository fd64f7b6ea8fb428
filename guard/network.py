"""Network targets and patterns: ``host[:port]`` and the paths the matcher sees.

A network effect's target is a host, optionally with a port: ``pypi.org``,
``pypi.org:443``, ``10.0.0.7:5432``, ``[2001:db8::1]:443`` (an IPv6 address in
brackets when a port follows; bare without one). :func:`split_target` makes it
canonical: lower case, no trailing dot, IPv6 in its compressed form, the port a
decimal number in 1..65535.

The matcher (:mod:`guard.match`) sees a target as a path below a root no
canonical path has, ``//network``: the host is a directory and the port a file
in it, ``//network/pypi.org/443``. A target without a port (the shell analysis
names hosts only) is the host directory itself, ``//network/pypi.org``.

A network pattern is ``HOST`` or ``HOST:PORT`` (``[IPV6]`` / ``[IPV6]:PORT``),
each part a glob, with ``!`` for an exception like any list entry. It is
anchored to the host level: ``HOST`` matches that host on every port (the host
directory and everything in it), ``HOST:PORT`` that port only, so
``allow = ["*.example.com", "!*.example.com:22"]`` means what it says. A pattern
with a port decides only targets whose port is known (every connection guard's
egress proxy makes); for a target without one, patterns naming the host alone
decide. Anything else (a ``/``, a ``{root}``, spaces, ``@``, a port that is no
number) is a :class:`~guard.match.PatternError` naming the fix.
"""

from __future__ import annotations

import ipaddress
import re

from guard.effects import GuardError
from guard.match import Pattern, PatternError, Source, parse_pattern

#: The root network targets are matched under; no canonical path starts with "//".
NETWORK_ROOT = "//network"

_HOST_GLOB = re.compile(r"[a-z0-9._*?\[\]!^\\-]+")
_V6_GLOB = re.compile(r"[0-9a-f:.*?]+")
_PORT_GLOB = re.compile(r"[0-9*?\[\]!^-]+")
_BAD_HOST_CHARS = re.compile(r"[\x00-\x20\x7f/\\@#?]")


def split_target(target: str) -> tuple[str, int | None]:
    """``(host, port)`` of a network target, canonical; :class:`GuardError` if malformed."""
    text = target.strip().lower()
    port_text: str | None = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise GuardError(f"invalid network target {target!r}: '[' without ']'")
        host, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise GuardError(f"invalid network target {target!r}: text after ']'")
            port_text = rest[1:]
        try:
            host = ipaddress.IPv6Address(host).compressed
        except ValueError:
            raise GuardError(
                f"invalid network target {target!r}: {host!r} is not an IPv6 address"
            ) from None
    elif text.count(":") >= 2:
        try:
            host = ipaddress.IPv6Address(text).compressed
        except ValueError:
            raise GuardError(
                f"invalid network target {target!r}: not an IPv6 address (write [ADDRESS]:PORT"
                " for one with a port)"
            ) from None
    else:
        host, sep, port_text_found = text.partition(":")
        port_text = port_text_found if sep else None
        host = host.rstrip(".")
        if not host or _BAD_HOST_CHARS.search(host):
            raise GuardError(f"invalid network host {target!r}")
    return host, None if port_text is None else _port(port_text, target)


def _port(text: str, target: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 5 or (text[0] == "0"):
        raise GuardError(f"invalid port in network target {target!r}: expected 1 to 65535")
    port = int(text)
    if not 1 <= port <= 65535:
        raise GuardError(f"invalid port in network target {target!r}: expected 1 to 65535")
    return port


def format_target(host: str, port: int | None) -> str:
    """The target as written: ``host``, ``host:port``, ``[v6]:port``."""
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def target_path(host: str, port: int | None) -> tuple[str, bool]:
    """(the path the matcher sees, whether it is a directory) for a canonical target."""
    if port is None:
        return f"{NETWORK_ROOT}/{host}", True
    return f"{NETWORK_ROOT}/{host}/{port}", False


def path_target(path: str) -> str:
    """The target a matcher path stands for: ``//network/h/443`` -> ``h:443``."""
    rest = path[len(NETWORK_ROOT) + 1 :]
    host, _, port = rest.partition("/")
    return format_target(host, int(port) if port else None)


def canonical(target: str) -> str:
    """:func:`split_target` then :func:`format_target`."""
    return format_target(*split_target(target))


def parse_network_pattern(text: str, source: Source | None = None) -> Pattern | None:
    """One network list entry as a :class:`~guard.match.Pattern` anchored to the host
    level (its ``text`` stays as written); None for blank lines and ``#`` comments.
    Raises :class:`~guard.match.PatternError` for anything but ``[!]HOST[:PORT]``."""
    if "\x00" in text or "\n" in text or "\r" in text:
        raise PatternError(f"pattern {text!r} contains a NUL or newline character")
    body = text.strip()
    if body == "" or body.startswith("#"):
        return None
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    host, port = _split_pattern(text, body.lower())
    glob = "/" + host + ("" if port is None else "/" + port)
    parsed = parse_pattern(("!" if negated else "") + glob, source)
    if parsed is None:  # pragma: no cover - a non-empty anchored glob always parses
        raise PatternError(f"network pattern {text!r} is empty")
    return parsed.with_text(text)


def _split_pattern(text: str, body: str) -> tuple[str, str | None]:
    fix = (
        "a network pattern is HOST or HOST:PORT (globs allowed: '*.example.com', 'pypi.org:443',"
        " '10.*:5432', '[::1]:8080')"
    )
    if not body:
        raise PatternError(f"network pattern {text!r} names no host; {fix}")
    port: str | None = None
    if body.startswith("[") and ":" in body[: body.find("]") if "]" in body else len(body)]:
        end = body.find("]")
        if end < 0:
            raise PatternError(f"network pattern {text!r}: '[' without ']'; {fix}")
        host, rest = body[1:end], body[end + 1 :]
        if not _V6_GLOB.fullmatch(host):
            raise PatternError(f"network pattern {text!r}: {host!r} is not an IPv6 glob; {fix}")
        if rest:
            if not rest.startswith(":"):
                raise PatternError(f"network pattern {text!r}: text after ']'; {fix}")
            port = rest[1:]
    else:
        host, sep, rest = body.partition(":")
        if sep:
            port = rest
        host = host.rstrip(".") if host.rstrip(".") else host
        if not host:
            raise PatternError(f"network pattern {text!r} names no host; {fix}")
        if not _HOST_GLOB.fullmatch(host):
            bad = sorted({c for c in host if not _HOST_GLOB.fullmatch(c)})
            what = f"the character(s) {''.join(bad)!r}" if bad else "an empty host"
            raise PatternError(f"network pattern {text!r} has {what} in its host; {fix}")
    if port is not None:
        if not port or not _PORT_GLOB.fullmatch(port):
            raise PatternError(f"network pattern {text!r}: the port {port!r} is not a number"
                               f" or a glob of digits; {fix}")
        if port.isdigit() and (port[0] == "0" or not 1 <= int(port) <= 65535):
            raise PatternError(f"network pattern {text!r}: port {port} is not in 1..65535"
                               " (written without leading zeros)")
    return host, port


def parse_address(text: str) -> tuple[str, int | None]:
    """``ADDRESS`` or ``ADDRESS:PORT`` (``[V6]:PORT``) where ADDRESS is an IP address, not
    a name: ``(address, port)``, canonical. :class:`GuardError` otherwise."""
    host, port = split_target(text)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise GuardError(
            f"{text!r} is not an IP address (a name would be resolved again)"
        ) from None
    return host, port


def resolve_problem(name: str, address: str) -> str | None:
    """What is wrong with one ``[egress] resolve`` entry, or None."""
    fix = 'write it as "HOST" or "HOST:PORT" = "ADDRESS" or "ADDRESS:PORT", e.g.' \
          ' "pypi.org" = "127.0.0.1:8080"'
    try:
        host, _ = split_target(name)
    except GuardError as exc:
        return f"{exc}; {fix}"
    if not re.fullmatch(r"[a-z0-9._:-]+", host):
        return f"{name!r} is not a host name or address; {fix}"
    try:
        parse_address(address)
    except GuardError as exc:
        return f"{exc}; {fix}"
    return None


def resolve_table(resolve: dict[str, str]) -> dict[tuple[str, int | None], tuple[str, int | None]]:
    """``[egress] resolve`` as ``(host, port or None) -> (address, port or None)``; entries
    are checked when the policy loads (:func:`resolve_problem`)."""
    return {split_target(name): parse_address(addr) for name, addr in resolve.items()}
