"""SHA-256 on guard's start-up path, without loading OpenSSL's binding where it can.

``import hashlib`` loads ``_hashlib`` (OpenSSL), a few milliseconds every ``guard run``
and hook call pays before its first digest. The interpreter's own SHA-256 module gives
the same digests of the few small inputs hashed there (policy texts, path names): it is
used where the interpreter has one, hashlib otherwise. Hashing of file contents (the
monitor) keeps hashlib.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import sha256 as sha256
else:
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:
            from hashlib import sha256

__all__ = ["sha256"]
