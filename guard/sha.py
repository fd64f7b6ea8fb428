"""SHA-256 on guard's start-up path, without loading OpenSSL's binding where it can.

``import hashlib`` loads ``_hashlib`` (OpenSSL), a few milliseconds every ``guard run``
and hook call pays before its first digest. The interpreter's own SHA-256 module gives
the same digests of the few small inputs hashed there (policy texts, path names, the
audit chain's MACs, :func:`hmac_sha256`): it is used where the interpreter has one,
hashlib otherwise. Hashing of file contents (the monitor) loads hashlib once it has
hashed enough to pay for it (:mod:`guard.monitor.hashes`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import sha256 as sha256
    from typing import Any
else:
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:
            from hashlib import sha256

__all__ = ["hmac_sha256", "sha256"]

_BLOCK = 64  # SHA-256's block size (RFC 2104's B)
_INNER = bytes(x ^ 0x36 for x in range(256))
_OUTER = bytes(x ^ 0x5C for x in range(256))
#: key -> the hashers that have taken the inner and outer padded key (a MAC is then two
#: short updates); a process uses one or two keys
_pads: dict[bytes, tuple[Any, Any]] = {}


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` under ``key`` (RFC 2104): ``hmac.digest(key, message,
    "sha256")``, without importing hmac (which loads hashlib and OpenSSL)."""
    pads = _pads.get(key)
    if pads is None:
        k = sha256(key).digest() if len(key) > _BLOCK else key
        k = k.ljust(_BLOCK, b"\0")
        pads = (sha256(k.translate(_INNER)), sha256(k.translate(_OUTER)))
        if len(_pads) < 8:
            _pads[key] = pads
    inner = pads[0].copy()
    inner.update(message)
    outer = pads[1].copy()
    outer.update(inner.digest())
    digest: bytes = outer.digest()
    return digest
