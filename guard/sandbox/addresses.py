"""What kind of address a name resolved to: public, or one the egress proxy decides as a
host of its own (loopback, private, link-local, this machine's own).

Used by :mod:`guard.sandbox.relay` on each answer of the resolver (DNS rebinding: a
name's answer can change). Stdlib only (loaded by the helper without site-packages).
"""

from __future__ import annotations

import contextlib
import ipaddress

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def local_addresses() -> frozenset[str]:
    """Every address of this machine's interfaces (in the proxy's network namespace: the
    host's), from ``/proc/net/fib_trie``'s local routes and ``/proc/net/if_inet6``: a
    service bound to all interfaces answers on each, the public ones too."""
    out: set[str] = set()
    with contextlib.suppress(OSError):
        last = ""
        with open("/proc/net/fib_trie") as f:
            for line in f:
                if "|--" in line:
                    last = line.split("|--", 1)[1].strip()
                elif line.strip() == "/32 host LOCAL" and last:
                    out.add(last)
    with contextlib.suppress(OSError, ValueError), open("/proc/net/if_inet6") as f:
        out.update(str(ipaddress.IPv6Address(int(ln.split()[0], 16))) for ln in f if ln.strip())
    return frozenset(out)


def address_class(address: str, local: frozenset[str] = frozenset()) -> str | None:
    """Why ``address`` is not a public internet address ("loopback", "private",
    "link-local", "this machine" when it is in ``local``, ...), or None when it is one.
    IPv4 carried in IPv6 (mapped, NAT64, 6to4, Teredo) is judged by the IPv4 address
    it carries."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
        address.split("%", 1)[0]
    )
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is None and ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            ip = inner
    if str(ip) in local:
        return "this machine"
    for name in ("loopback", "link_local", "private", "unspecified", "multicast", "reserved"):
        if getattr(ip, f"is_{name}"):
            return name.replace("_", "-")
    return None if ip.is_global else "not public"
