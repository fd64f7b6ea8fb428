"""Helpers for the fault-injection tests: drivers killed at random moments, small full disks."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from components import CI_RULE, in_ci


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: every driver :func:`start` began; the ``_no_driver_outlives_its_test`` fixture kills them
STARTED: list[subprocess.Popen[str]] = []

# run first in each driver: SIGKILL when the test process dies (killed, timed out), and
# exit at once if it died before that was in place (PR_SET_PDEATHSIG = 1)
_DIE_WITH_THE_TEST = (
    "import ctypes as _c, os as _o, signal as _s, sys as _y\n"
    "_c.CDLL(None).prctl(1, _s.SIGKILL, 0, 0, 0)\n"
    "_o.getppid() == int(_y.argv.pop(1)) or _o._exit(1)\n"
)


def start(code: str, *args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """A Python process running ``code`` (guard's public API in a loop).

    It never outlives the test: killed at the test's end whatever happened, and by
    the kernel when the test process itself dies.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", _DIE_WITH_THE_TEST + code, str(os.getpid()), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    STARTED.append(proc)
    return proc


def kill_started() -> None:
    """SIGKILL and reap every driver :func:`start` began that still runs."""
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
            proc.communicate(timeout=60)


def wait_line(stream: IO[str], needle: str, timeout: float = 120.0) -> str:
    """Read lines until one contains ``needle`` (the process announced it is ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            raise AssertionError(f"the process ended before printing {needle!r}")
        if needle in line:
            return line
    raise AssertionError(f"no {needle!r} within {timeout} s")


def kill_after(proc: subprocess.Popen[str], rng: random.Random, lo: float, hi: float) -> None:
    """SIGKILL ``proc`` at a random moment in [lo, hi] seconds from now."""
    time.sleep(rng.uniform(lo, hi))
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)


def run_ok(code: str, *args: str, env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def parse_jsonl(path: Path) -> list[object]:
    """Every line of a JSONL file: whole, newline-terminated JSON (no torn record)."""
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"{path} ends inside a record"
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def leftovers(root: Path) -> list[Path]:
    """Temporary files of guard's atomic writes left under ``root``."""
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


@contextlib.contextmanager
def small_disk(where: Path, size: str = "1m") -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``where`` (needs root; skips otherwise)."""
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        why = f"cannot mount a small tmpfs here (needs root): {proc.stderr.strip()}"
        if in_ci():
            pytest.fail(f"{why} ({CI_RULE})", pytrace=False)
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, keep: int = 0) -> None:
    """Fill ``disk`` until fewer than ``keep`` bytes are free."""
    n = 0
    while True:
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        if free <= keep:
            return
        try:
            with open(disk / f"filler-{n}", "wb") as fh:
                fh.write(b"\0" * max(1, min(free - keep, 1 << 20)))
        except OSError:
            return
        n += 1
