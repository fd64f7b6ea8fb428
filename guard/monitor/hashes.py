"""The monitor's content digests: SHA-256, and SHA-1 for git's blob ids.

``import hashlib`` loads OpenSSL's binding (``_hashlib``): about 2.5 ms, which ``guard
run`` would pay before its command starts, for the few small files the baseline's first
phase reads (git's own metadata, a handful of untracked files). The interpreter's own
SHA-256 and SHA-1 modules give the same digests at about a third of OpenSSL's speed:
quicker than the import for a few hundred kilobytes, slower for more. So a hasher comes
from the interpreter's modules until this process has asked for :data:`SWITCH` bytes of
hashing (each call names the bytes it is about to hash), and from hashlib from then on,
or at once when hashlib is loaded already. The digests are the same either way
(tests/monitor/test_hashes.py).
"""

# Lazy imports: hashlib (OpenSSL) once the monitor has hashed enough to pay for it.

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Protocol

from guard.sha import sha256 as _builtin_sha256

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

#: bytes hashed with the interpreter's own modules before hashlib is loaded (about 2 ms
#: more than OpenSSL takes for them: what loading it costs)
SWITCH = 1 << 20

_builtin_sha1: Callable[[bytes], Hasher] | None
if not TYPE_CHECKING:
    try:
        from _sha1 import sha1 as _builtin_sha1
    except ImportError:  # an interpreter built without it: hashlib from the start
        _builtin_sha1 = None

_asked = 0  # bytes asked for so far (a data race between threads only moves the switch)
_lib: ModuleType | None = None


class Hasher(Protocol):
    """What the monitor uses of a hash object (hashlib's, or the interpreter's)."""

    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...
    def hexdigest(self) -> str: ...


def _openssl(size: int) -> ModuleType | None:
    """hashlib once loaded or once :data:`SWITCH` bytes were asked for; None: the builtins."""
    global _asked, _lib
    if _lib is not None:
        return _lib
    lib = sys.modules.get("hashlib")
    if lib is None:
        _asked += size
        if _asked <= SWITCH and _builtin_sha1 is not None:
            return None
        import hashlib as lib
    _lib = lib
    return lib


def sha256(data: bytes = b"", *, size: int = 0) -> Hasher:
    """A SHA-256 hasher that has taken ``data``; ``size``: the bytes it will take after."""
    lib = _openssl(len(data) + size)
    if lib is not None:
        h: Hasher = lib.sha256(data)
        return h
    return _builtin_sha256(data)


def sha1(data: bytes = b"", *, size: int = 0) -> Hasher:
    """A SHA-1 hasher (git's blob ids; not used for security) that has taken ``data``."""
    lib = _openssl(len(data) + size)
    if lib is not None or _builtin_sha1 is None:
        import hashlib

        return hashlib.sha1(data, usedforsecurity=False)
    return _builtin_sha1(data)
