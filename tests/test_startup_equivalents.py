"""What ``guard run`` computes itself to start without importing a module (platformdirs,
tempfile, shutil) gives that module's answer, in the environments that matter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guard.paths import _user_data_dir
from guard.sandbox.supervise import _which

#: Run in a fresh interpreter: ``guard.paths.temp_dir`` defers to tempfile once it is loaded.
_COMPARE_TEMP = (
    "import sys, guard.paths as p; mine = p.temp_dir();"
    " assert 'tempfile' not in sys.modules, 'tempfile was imported';"
    " import tempfile; print(mine == tempfile.gettempdir(), mine)"
)


@pytest.mark.parametrize(
    "env",
    [
        {"HOME": "/home/u"},
        {"HOME": "/home/u/"},
        {"HOME": "/"},
        {"HOME": "/home/u", "XDG_DATA_HOME": "/srv/data"},
        {"HOME": "/home/u", "XDG_DATA_HOME": "relative/data"},
        {"HOME": "/home/u", "XDG_DATA_HOME": ""},
        {"HOME": "relative", "XDG_DATA_HOME": "/srv/data"},
        {"HOME": "/home/u", "ANDROID_DATA": "/data", "ANDROID_ROOT": "/system"},
    ],
)
def test_the_data_directory_is_platformdirs_own(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import platformdirs

    for name in ("HOME", "XDG_DATA_HOME", "ANDROID_DATA", "ANDROID_ROOT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _user_data_dir() == platformdirs.user_data_dir("openoxide", appauthor=False)


@pytest.mark.parametrize("which", ["TMPDIR", "TEMP", "TMP", None])
def test_the_temporary_directory_is_tempfiles_own(tmp_path: Path, which: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    if which is not None:
        env[which] = str(tmp_path)
    env["TMP"] = env.get("TMP", str(tmp_path / "missing"))  # not there: the next one
    out = subprocess.run(
        [sys.executable, "-c", _COMPARE_TEMP], env=env, capture_output=True, text=True,
        timeout=60, check=True,
    ).stdout.split()
    assert out[0] == "True", out
    if which is not None:
        assert out[1] == str(tmp_path)


def test_a_command_is_found_on_path_as_shutil_finds_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "tool").write_text("#!/bin/sh\n")  # not executable: skipped
    (tmp_path / "b" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "b" / "tool").chmod(0o755)
    (tmp_path / "a" / "dir").mkdir(mode=0o755)  # a directory is no command
    path = os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b"), str(tmp_path / "a")])
    for name in ("tool", "dir", "missing", "sh"):
        for p in (path, "", None, "/usr/bin:/bin"):
            assert _which(name, p) == shutil.which(name, path=p), (name, p)


@pytest.mark.parametrize("data", [b"", b"a", "guard-policy 1\0é".encode(), bytes(range(256)) * 300])
def test_the_start_up_sha256_is_hashlibs(data: bytes) -> None:
    import hashlib

    from guard.sha import sha256

    h = sha256(b"guard")
    h.update(data)
    assert h.hexdigest() == hashlib.sha256(b"guard" + data).hexdigest()
    assert sha256(data).digest() == hashlib.sha256(data).digest()


@pytest.mark.parametrize("key_len", [0, 1, 32, 64, 65, 200])
@pytest.mark.parametrize("message", [b"", b"1\n\n{}", bytes(range(256)) * 40])
def test_the_audit_chains_hmac_is_hmacs(key_len: int, message: bytes) -> None:
    """The audit chain's MAC (guard/sha.py, on the interpreter's SHA-256) is the hmac
    module's HMAC-SHA256, for keys shorter and longer than a block, twice (the padded
    key is kept)."""
    import hmac

    from guard.sha import hmac_sha256

    key = bytes(range(7, 7 + key_len % 256)) * (key_len // 256 + 1)
    key = key[:key_len]
    for _ in range(2):
        assert hmac_sha256(key, message) == hmac.digest(key, message, "sha256")


@pytest.mark.parametrize("ns", [0, 999, 1_700_000_000_123_456_789, 1_704_067_199_999_999_999,
                                253_402_300_799_999_999_000])
def test_a_records_timestamp_is_datetimes(ns: int) -> None:
    """A record's timestamp, written without datetime (guard/audit/logfile.py), is the text
    datetime gives, to the microsecond (truncated, never rounded up into the next second)."""
    from datetime import UTC, datetime

    from guard.audit.logfile import iso_of

    s, us = divmod(ns // 1000, 1_000_000)
    want = datetime.fromtimestamp(s, UTC).replace(microsecond=us)
    assert iso_of(ns) == want.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert iso_of(ns) == want.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
