"""The monitor's watch at monorepo scale: inotify (watchdog) next to fanotify (filesystem mark).

    python benchmarks/monitor_scale.py            # 1,000,000 files in 100,000 directories
    python benchmarks/monitor_scale.py --quick    # 100,000 files in 10,000 directories

One generated tree (in a temporary directory on the file system of --dir, default the
system's temporary directory; generation time is printed separately) serves both
backends in the same run. For each backend, the watch the monitor starts (no policy
and no baseline: those cost the same whichever backend watches):

1. set-up seconds: from creating the observer until a marker file's event arrives
   (inotify has added one watch per directory by then; fanotify one mark: its walk
   caching every directory's handle runs behind, and its own time is printed);
2. resident memory: the process's RSS after set-up minus before (inotify's kernel-side
   watches are not in RSS; /proc/slabinfo would show them);
3. detection latency: from just before an append to an existing file deep in the tree
   to its event reaching the monitor's entry point, over --writes writes (p50, p95);
4. a burst: --burst new files written by another process as fast as it can; events
   missed (files with no event) must be 0, and overflows are counted.

inotify needs one watch per directory: fs.inotify.max_user_watches must exceed the
directory count (plus what other processes of the user hold). As root, the benchmark
raises it for the run when it is too low, says so, and puts it back; otherwise the
inotify row shows the monitor's refusal (the limit and the fixes) and how fast it
came. fanotify needs CAP_SYS_ADMIN; without it that row says why and no ratio is
printed. The ratio fanotify set-up / inotify set-up is printed last.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from watchdog.events import FileSystemEvent

from guard.monitor.backends import watch_limit_message
from guard.monitor.events import WANTED_EVENTS, WatchLimit, _Handler, _Observer, _Sink
from guard.monitor.fanotify import FanotifyObserver, choose

WATCHES = Path("/proc/sys/fs/inotify/max_user_watches")

GEN = """
import os, sys
root, dirs, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per_top = 100
for d in range(dirs):
    os.makedirs(os.path.join(root, f"t{d // per_top:04d}", f"d{d % per_top:02d}"))
for i in range(files):
    d = i % dirs
    p = os.path.join(root, f"t{d // per_top:04d}", f"d{d % per_top:02d}", f"f{i:07d}.txt")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x\\n")
    os.close(fd)
"""

BURST = """
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    fd = os.open(os.path.join(root, f"b{i:06d}"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"burst\\n")
    os.close(fd)
"""


def rss_kib() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sink(_Sink):
    """Counts events per path and wakes whoever waits for one."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.cv = threading.Condition()
        self.overflows = 0
        self.lost = 0
        self.walk: threading.Event | None = None  # fanotify's background directory walk
        self.walk_seconds = 0.0
        self.walk_rss = 0

    def _on_fs_event(self, ev: FileSystemEvent) -> None:
        with self.cv:
            for p in (ev.src_path, ev.dest_path):
                if p:
                    self.seen.add(os.fsdecode(p))
            self.cv.notify_all()

    def fan(self, ev: FileSystemEvent, _origin: Any) -> None:
        self._on_fs_event(ev)

    def trouble(self, kind: str, message: str) -> None:
        if kind == "overflow":
            self.overflows += 1
        elif kind == "lost":
            self.lost += 1
        else:
            print(f"  {kind}: {message}", flush=True)

    def wait(self, path: str, timeout: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.cv:
            while path not in self.seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(left)
            return True


class Refused(Exception):
    """The backend refused to start (the monitor's own message)."""


def start_inotify(root: Path, sink: Sink) -> Callable[[], None]:
    """As the monitor does (guard/monitor/backends.py): only the events it acts on, and a
    refusal at the first ENOSPC while the watches are added."""
    obs = _Observer(sink.trouble)
    obs.start()
    obs._inotify_fd.starting = True
    try:
        obs.schedule(_Handler(sink), str(root), recursive=True, event_filter=WANTED_EVENTS)
    except WatchLimit as exc:
        obs.stop()
        obs.join()
        raise Refused(watch_limit_message(root, exc)) from None
    finally:
        obs._inotify_fd.starting = False

    def stop() -> None:
        obs.stop()
        obs.join()

    return stop


def start_fanotify(root: Path, sink: Sink) -> Callable[[], None]:
    """The mark only: the directory walk runs on its own thread (sink.walk_done says when)."""
    obs = FanotifyObserver([root], sink.fan, sink.trouble)
    t0 = time.perf_counter()
    obs.start()

    def walked() -> None:
        obs.walked.wait()
        sink.walk_seconds = time.perf_counter() - t0
        sink.walk_rss = rss_kib()

    threading.Thread(target=walked, daemon=True).start()
    sink.walk = obs.walked

    def stop() -> None:
        obs.stop()
        obs.join()

    return stop


def measure(name: str, start: Callable[[Path, Sink], Callable[[], None]], root: Path,
            targets: list[Path], burst: int) -> dict[str, float] | None:
    sink = Sink()
    rss0 = rss_kib()
    t0 = time.perf_counter()
    try:
        stop = start(root, sink)
    except Refused as exc:
        print(f"{name:9} REFUSED after {time.perf_counter() - t0:.2f} s: {exc}", flush=True)
        return None
    marker = root / f".ready-{name}"
    marker.write_bytes(b"")
    if not sink.wait(str(marker)):
        stop()
        marker.unlink(missing_ok=True)
        print(f"{name:9} NOT READY: the marker's event did not arrive within 120 s"
              f" ({sink.overflows} overflows while setting up)", flush=True)
        return None
    setup = time.perf_counter() - t0
    rss = (rss_kib() - rss0) / 1024
    lat: list[float] = []
    try:
        for t in targets:
            with sink.cv:
                sink.seen.discard(str(t))
            t1 = time.perf_counter()
            with open(t, "a") as fh:
                fh.write("w\n")
            if not sink.wait(str(t), 60):
                raise SystemExit(f"{name}: no event for {t} within 60 s")
            lat.append(time.perf_counter() - t1)
        bdir = root / f"burst-{name}"
        bdir.mkdir()
        subprocess.run([sys.executable, "-c", BURST, str(bdir), str(burst)], check=True)
        last = bdir / f"b{burst - 1:06d}"
        sink.wait(str(last), 120)
        deadline = time.monotonic() + 30  # the rest of the queue, in order, before the last
        expected = {str(bdir / f"b{i:06d}") for i in range(burst)}
        while time.monotonic() < deadline:
            with sink.cv:
                missed = len(expected - sink.seen)
            if missed == 0:
                break
            time.sleep(0.1)
    finally:
        stop()
        marker.unlink(missing_ok=True)
        shutil.rmtree(root / f"burst-{name}", ignore_errors=True)
    lat.sort()
    p50 = statistics.median(lat) * 1000
    p95 = lat[max(0, int(len(lat) * 0.95) - 1)] * 1000
    print(f"{name:9} set-up {setup:8.3f} s   RSS +{rss:7.1f} MiB   latency p50 {p50:6.2f} ms"
          f"  p95 {p95:6.2f} ms   burst {burst}: missed {missed}, overflows {sink.overflows}",
          flush=True)
    if sink.walk is not None:
        print(f"{'':9} directory walk (background, after ready) "
              + (f"ended after {sink.walk_seconds:.2f} s, RSS then"
                 f" +{(sink.walk_rss - rss0) / 1024:.1f} MiB" if sink.walk_seconds
                 else "still running when measured")
              + f"; lost-event reports {sink.lost}", flush=True)
    walk_rss = (sink.walk_rss - rss0) / 1024 if sink.walk_seconds else rss
    return {"setup": setup, "rss": max(rss, walk_rss), "p50": p50, "p95": p95,
            "missed": missed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 files, 10,000 directories")
    ap.add_argument("--files", type=int)
    ap.add_argument("--dirs", type=int)
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--burst", type=int, default=20_000)
    ap.add_argument("--backends", default="inotify,fanotify", help="which to measure")
    ap.add_argument("--dir", default=None, help="where to make the tree (its file system)")
    ap.add_argument("--tree", default=None,
                    help="reuse a tree an earlier run generated with the same --files/--dirs"
                    " (kept afterwards; generation skipped)")
    args = ap.parse_args()
    files = args.files or (100_000 if args.quick else 1_000_000)
    dirs = args.dirs or max(1, files // 10)
    print(f"load average {os.getloadavg()[0]:.2f}; {files:,} files in {dirs:,} directories",
          flush=True)
    base = Path(tempfile.mkdtemp(prefix="guard-scale-", dir=args.dir))
    old_watches: str | None = None
    try:
        root = base / "tree"
        if args.tree:
            root = Path(args.tree).resolve()
            print(f"reusing the tree at {root} (not generated in this run)", flush=True)
        else:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", GEN, str(root), str(dirs), str(files)],
                           check=True)
            print(f"generated the tree in {time.perf_counter() - t0:.1f} s", flush=True)
        targets = [root / f"t{(d * 7919 % dirs) // 100:04d}" / f"d{(d * 7919 % dirs) % 100:02d}"
                   / f"f{d * 7919 % dirs:07d}.txt" for d in range(args.writes)]
        have = int(WATCHES.read_text())
        if have < dirs + 50_000:
            if os.access(WATCHES, os.W_OK):
                old_watches = WATCHES.read_text()
                WATCHES.write_text(f"{dirs + 100_000}\n")
                print(f"raised fs.inotify.max_user_watches from {have} to {dirs + 100_000}"
                      " for this run (root); put back at the end", flush=True)
            else:
                print(f"fs.inotify.max_user_watches is {have}: inotify will not cover"
                      f" {dirs} directories (raise it as root)", flush=True)
        wanted = args.backends.split(",")
        ino = fan = None
        if "inotify" in wanted:
            ino = measure("inotify", start_inotify, root, targets, args.burst)
        choice = choose([root], "fanotify")
        if choice.backend != "fanotify":
            print(f"fanotify: not measured: {choice.why}")
            return
        if "fanotify" in wanted:
            fan = measure("fanotify", start_fanotify, root, targets, args.burst)
        if ino is None or fan is None:
            print("ratio: not printed (a backend was not measured or never became ready)")
            return
        print(f"memory fanotify (after its walk)/inotify: {fan['rss']:.1f}/{ino['rss']:.1f} MiB;"
              f" latency p50 ratio {fan['p50'] / ino['p50']:.2f}x")
        print(f"ratio fanotify set-up / inotify set-up: {fan['setup'] / ino['setup']:.2g}x")
    finally:
        if old_watches is not None:
            WATCHES.write_text(old_watches)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
