"""No endless work: a huge sparse file is never read whole, by the baseline, a scan,
the settling restore or the quarantine's manifest.

The file is ~16 TiB of holes (the largest ext4 allows; other file systems take it too,
and the size used is checked, never skipped: below 1 TiB the test fails). Reading it
whole would take hours; everything here must finish within the usual generous waits.
Needs no privilege: it runs as root and as uid 65534 alike.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from guard.monitor import Monitor
from tests.monitor.conftest import wait_for

TIB = 1 << 40


def _huge_sparse(path: Path) -> int:
    """A sparse file as large as the file system allows (at least 1 TiB): its size."""
    for size in (16 * TIB - (1 << 20), 8 * TIB, 4 * TIB, 2 * TIB, TIB):
        try:
            with open(path, "wb") as f:
                f.truncate(size)
            return size
        except OSError as exc:
            if exc.errno != errno.EFBIG:
                raise
    raise AssertionError(f"the file system of {path} refuses a 1 TiB sparse file")


def test_a_huge_sparse_file_is_sampled_never_read_whole(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: a 16 TiB sparse file in src/ before the baseline, then a one-byte write
    at its end, then a second such file created under the monitor's eyes. The baseline
    and every scan compare it by a sampled digest (and say so); the new one is moved to
    quarantine with a sampled digest in its manifest; the monitor stops at once."""
    huge = wt / "src" / "huge.bin"
    size = _huge_sparse(huge)
    m = start_monitor(restore=True)
    assert m.baseline is not None
    entry = m.baseline.get(str(huge))
    assert entry is not None and entry.sha256 is not None
    assert entry.sha256.startswith("sampled:") and "sampled digest" in (entry.unrestorable or "")
    assert any(n.event == "not-restorable" and "huge.bin" in n.message for n in m.notices)
    with open(huge, "r+b") as f:  # the agent changes the last byte
        f.seek(size - 1)
        f.write(b"\x01")
    wait_for(lambda: any(v.path == str(huge) for v in m.violations), "the write reported")
    assert m.settle()  # a scan that compares the huge file ends
    v = next(v for v in m.violations if v.path == str(huge))
    assert v.action_taken.startswith("left in place: cannot restore it afterwards"), v
    second = wt / "src" / "second.bin"
    _huge_sparse(second)
    wait_for(lambda: any(v.path == str(second) for v in m.violations), "the new file reported")
    assert m.settle()
    v2 = next(v for v in m.violations if v.path == str(second))
    assert "moved to quarantine" in v2.action_taken, v2
    assert not second.exists()
    item = next(p for p in (wt / ".openoxide" / "quarantine").rglob("manifest.json"))
    assert '"sha256": "sampled:' in item.read_text()
    m.stop()
    assert os.path.getsize(huge) == size
