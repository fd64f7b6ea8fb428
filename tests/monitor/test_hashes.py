"""The monitor's digests (guard/monitor/hashes.py) are hashlib's, before and after the
switch from the interpreter's own SHA-256 and SHA-1 modules to OpenSSL's; the switch
happens once the process has asked for SWITCH bytes of hashing, and not before."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from guard.monitor import hashes

DATA = [b"", b"a", b"blob 3\0abc", bytes(range(256)) * 300]


@pytest.mark.parametrize("data", DATA, ids=["empty", "one", "blob", "76800"])
def test_the_monitors_digests_are_hashlibs(data: bytes) -> None:
    for make, want in ((hashes.sha256, hashlib.sha256), (hashes.sha1, hashlib.sha1)):
        h = make(data[:7], size=len(data) - len(data[:7]))
        h.update(data[7:])
        assert h.hexdigest() == want(data).hexdigest()
        assert make(data).digest() == want(data).digest()


#: in a new interpreter: a few small digests load no hashlib; past SWITCH bytes it is loaded
#: and the digests stay the same
_SWITCH = """
import sys
from guard.monitor import hashes
small = [hashes.sha256(b"x" * 1000).hexdigest(), hashes.sha1(b"y", size=10).hexdigest()]
print("before", "hashlib" in sys.modules, "_hashlib" in sys.modules)
big = hashes.sha256(size=hashes.SWITCH)  # a file of SWITCH bytes is about to be hashed
big.update(b"z")
print("after", "hashlib" in sys.modules, type(big).__module__ != "_sha256")
import hashlib
assert small == [hashlib.sha256(b"x" * 1000).hexdigest(), hashlib.sha1(b"y").hexdigest()]
assert big.hexdigest() == hashlib.sha256(b"z").hexdigest()
assert hashes.sha1(b"q").hexdigest() == hashlib.sha1(b"q").hexdigest()
"""


def test_openssl_is_loaded_only_once_the_bytes_hashed_pay_for_it() -> None:
    out = subprocess.run([sys.executable, "-c", _SWITCH], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split("\n")
    assert out[0] == "before False False", out
    assert out[1] == "after True True", out
