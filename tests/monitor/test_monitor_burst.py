"""No missed events: bursts, a real inotify queue overflow, watch-limit errors, and
changes inotify cannot see at all (caught by the periodic reconciliation)."""

from __future__ import annotations

import collections
import errno
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guard.audit import logfile
from guard.monitor import Monitor
from tests.monitor.conftest import wait_for

BURST = 20_000
QUEUE_SYSCTL = Path("/proc/sys/fs/inotify/max_queued_events")

WRITER = """
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for d in range(n // 1000):
    os.makedirs(os.path.join(root, f"d{d:02d}"), exist_ok=True)
for i in range(n):
    with open(os.path.join(root, f"d{i // 1000:02d}", f"f{i:05d}.txt"), "w") as f:
        f.write(f"file {i}\\n")
"""


def burst(root: Path, n: int) -> set[str]:
    """Write ``n`` files under ``root`` from another process, as fast as it can."""
    subprocess.run([sys.executable, "-c", WRITER, str(root), str(n)], check=True)
    return {str(root / f"d{i // 1000:02d}" / f"f{i:05d}.txt") for i in range(n)}


def assert_each_once(m: Monitor, expected: set[str]) -> None:
    counts = collections.Counter(v.path for v in m.violations if v.path in expected)
    missed = expected - set(counts)
    twice = [p for p, c in counts.items() if c > 1]
    assert not missed, f"{len(missed)} files never reported, e.g. {sorted(missed)[:3]}"
    assert not twice, f"{len(twice)} files reported more than once, e.g. {twice[:3]}"


def test_burst_of_20000_files_every_violation_reported_exactly_once(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: hide one bad write among 20,000 (or flood inotify so some are dropped).

    Whatever inotify delivers or drops, the events plus the reconciliation that an
    overflow triggers (and the one run here at the end) report each file exactly once.
    """
    m = start_monitor()
    root = wt / "burst"
    root.mkdir()
    expected = burst(root, BURST)
    # 20,000 files and 21 directories; cheap to poll (the burst is CPU-bound)
    wait_for(
        lambda: len(m.violations) >= BURST + 21 or m.overflows > 0,
        "every burst file reported (or an overflow)",
        timeout=300,
    )
    m.reconcile("test: end of burst")
    assert_each_once(m, expected)
    if m.overflows:
        assert m.backend is not None
        assert any(n.event == f"{m.backend.backend}-overflow" for n in m.notices)


@pytest.fixture
def tiny_queue() -> Iterator[None]:
    """Lower the kernel's per-instance inotify queue for instances created meanwhile."""
    if not os.access(QUEUE_SYSCTL, os.W_OK):
        pytest.skip(f"{QUEUE_SYSCTL} is not writable here (needs root)")
    old = QUEUE_SYSCTL.read_text()
    QUEUE_SYSCTL.write_text("256\n")
    try:
        yield
    finally:
        QUEUE_SYSCTL.write_text(old)


def test_real_inotify_overflow_triggers_a_reconciliation_that_misses_nothing(
    wt: Path, guard_for: object, tiny_queue: None
) -> None:
    """Simulated overflow, with the real kernel: the queue limit is lowered to 256 through
    /proc/sys/fs/inotify/max_queued_events just while the monitor creates its inotify
    instance (restored at once; other instances keep their own limit), and watchdog's
    reader is paused by holding its lock so the queue truly overflows. The kernel then
    delivers IN_Q_OVERFLOW; the monitor says so (screen and audit log) and reconciles."""
    m = Monitor(guard_for, "plan", reconcile_interval=None, session="overflow",  # type: ignore[arg-type]
                backend="inotify")
    m.start()
    QUEUE_SYSCTL.write_text("16384\n")  # the instance above keeps its 256
    try:
        assert m.state.observer is not None
        fd = m.state.observer.inotify_fd
        root = wt / "flood"
        for d in ("d00", "d01"):
            (root / d).mkdir(parents=True)
        # once these are reported, their inotify watches exist
        wait_for(
            lambda: {str(root / "d00"), str(root / "d01")} <= {v.path for v in m.violations},
            "the flood directories reported (and so watched)",
        )
        with fd._lock:  # the reader cannot take another batch while we hold this
            expected = burst(root, 2000)
        wait_for(lambda: m.overflows >= 1, "IN_Q_OVERFLOW delivered")
        wait_for(lambda: m.reconciliations >= 1, "reconciliation after the overflow")
        assert_each_once(m, expected)

        def notices_logged() -> bool:
            # notices reach the log after they are known, outside the monitor's lock
            records = list(logfile.read(m.audit_path))
            return any(r.get("event") == "inotify-overflow" for r in records) and any(
                r.get("event") == "reconcile" and "overflow" in r.get("message", "")
                for r in records
            )

        wait_for(notices_logged, "the overflow and reconcile notices in the audit log")
    finally:
        m.stop()


def test_watch_limit_error_falls_back_to_reconciliation(
    wt: Path, guard_for: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulated watch-limit error, injected: adding the inotify watch for a new
    directory fails with ENOSPC (as when fs.inotify.max_user_watches is exhausted — not
    lowered for real because that limit is shared by every process of the user). The
    monitor must report it and find files in the unwatched directory by scanning."""
    from watchdog.observers import inotify_c

    m = Monitor(guard_for, "plan", reconcile_interval=None, session="limit",  # type: ignore[arg-type]
                backend="inotify")
    m.start()
    try:
        real = inotify_c.InotifyFD._get_or_create_watch

        def refuse(self: inotify_c.InotifyFD, path: bytes, mask: inotify_c.Mask) -> object:
            if b"unwatched" in path:
                raise OSError(errno.ENOSPC, "inotify watch limit reached")
            return real(self, path, mask)

        monkeypatch.setattr(inotify_c.InotifyFD, "_get_or_create_watch", refuse)
        d = wt / "unwatched"
        d.mkdir()
        wait_for(lambda: m.watch_errors >= 1, "watch-limit error reported")
        assert m.degraded and m.reconcile_interval is not None
        (d / "inside.txt").write_text("not seen by inotify\n")
        wait_for(
            lambda: any(v.path == str(d / "inside.txt") for v in m.violations),
            "file in the unwatched directory found by a scan",
        )
        assert any(n.event == "watch-limit" for n in m.notices)
    finally:
        m.stop()


def test_periodic_reconciliation_catches_a_write_through_an_outside_hard_link(
    wt: Path, start_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    """Attack: a hard link outside the worktree to a worktree file. inotify reports a
    write only to watches on the directory it went through, so the worktree sees
    nothing; the periodic stat-then-hash scan does."""
    inside = wt / "docs" / "a.md"
    outside = tmp_path / "outside-link"
    os.link(inside, outside)
    m = start_monitor(reconcile_interval=0.2)
    with open(outside, "a") as f:
        f.write("changed through the outside name\n")
    wait_for(lambda: any(v.path == str(inside) for v in m.violations), "scan finds it")
    v = next(v for v in m.violations if v.path == str(inside))
    assert v.event == "reconcile:modified"


def test_reconcile_tells_attribute_changes_from_content_changes(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Stat, then hash: same bytes with another mode is an attribute change."""
    m = start_monitor(final_reconcile=False)
    assert m.state.observer is not None
    m.stop_observer()  # scans only, so the scan is what classifies
    (wt / "src" / "tool.sh").chmod(0o700)
    (wt / "src" / "app.py").write_text("different\n")
    (wt / "docs" / "b.md").unlink()
    found = {v.path: v.event for v in m.reconcile("test")}
    assert found == {
        str(wt / "src" / "tool.sh"): "reconcile:attrib",
        str(wt / "src" / "app.py"): "reconcile:modified",
        str(wt / "docs" / "b.md"): "reconcile:deleted",
    }
    assert m.reconcile("again") == []  # each violation once
