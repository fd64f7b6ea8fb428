"""Monitor benchmark: detection latency, a burst with nothing missed, baseline cost.

    python benchmarks/monitor.py                 # the full run (1,000 writes, 20,000-file
                                                 # burst, 50,000-file tree)
    python benchmarks/monitor.py --quick         # a smaller run for a smoke check

What it measures, all in one run on this machine, in temporary git repositories:

1. Detection latency: the time from just before a write of a new file in src/ to the
   monitor's violation callback, over N writes (median and p95).
2. The burst: M files written by another process as fast as it can; after the
   monitor's final reconciliation every file must have been reported exactly once
   (missed must be 0). Says how many came from inotify events and how many from
   reconciliation (after an overflow, or at the end).
3. Baseline time on a committed tree of F files next to `git status --porcelain` on the
   same tree (index already refreshed, so git status is at its fastest), interleaved
   round by round: the first phase (what a command started by `guard run` waits for:
   git status, copies of what git does not hold) and the whole baseline (the walk that
   finishes alongside the command). The ratio first phase / git status is printed last.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from guard.decide import Guard
from guard.monitor import Baseline, Monitor, Violation

WRITER = """
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for d in range((n + 999) // 1000):
    os.makedirs(os.path.join(root, f"d{d:03d}"), exist_ok=True)
for i in range(n):
    with open(os.path.join(root, f"d{i // 1000:03d}", f"f{i:06d}.txt"), "w") as f:
        f.write(f"file {i}\\n")
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def make_repo(base: Path, name: str) -> Path:
    root = base / name
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "bench@guard.invalid")
    git(root, "config", "user.name", "bench")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    (root / ".openoxide" / "plans").mkdir(parents=True)
    return Path(os.path.realpath(root))


def latency(base: Path, writes: int) -> list[float]:
    root = make_repo(base, "latency")
    seen: dict[str, float] = {}
    cond = threading.Condition()

    def on_violation(v: Violation) -> None:
        with cond:
            seen.setdefault(v.path, time.perf_counter())
            cond.notify_all()

    out: list[float] = []
    g = Guard.load(worktree=root)
    with Monitor(g, "plan", reconcile_interval=None, on_violation=on_violation,
                 final_reconcile=False):
        for i in range(writes):
            path = root / "src" / f"lat{i:05d}.py"
            t0 = time.perf_counter()
            path.write_text("x = 1\n")
            with cond:
                if not cond.wait_for(lambda p=str(path): p in seen, timeout=30):
                    raise SystemExit(f"no violation for {path} within 30 s")
            out.append(seen[str(path)] - t0)
    return out


def burst(base: Path, files: int) -> dict[str, int | float]:
    root = make_repo(base, "burst")
    g = Guard.load(worktree=root)
    m = Monitor(g, "plan", reconcile_interval=None)
    m.start()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", WRITER, str(root / "burst"), str(files)], check=True)
    written = time.perf_counter() - t0
    expected = {
        str(root / "burst" / f"d{i // 1000:03d}" / f"f{i:06d}.txt") for i in range(files)
    }
    # let inotify deliver what it can, then the final reconciliation catches the rest
    deadline = time.monotonic() + 600
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        n = len(m.violations)
        if n != last:
            last, quiet_since = n, time.monotonic()
        elif time.monotonic() - quiet_since > 2.0:
            break
        time.sleep(0.1)
    drained = time.perf_counter() - t0
    m.stop()
    counts = collections.Counter(v.path for v in m.violations if v.path in expected)
    return {
        "files": files,
        "reported": len(counts),
        "missed": len(expected - set(counts)),
        "duplicates": sum(1 for c in counts.values() if c > 1),
        "from_events": sum(1 for v in m.violations
                           if v.path in expected and not v.event.startswith("reconcile:")),
        "from_reconcile": sum(1 for v in m.violations
                              if v.path in expected and v.event.startswith("reconcile:")),
        "overflows": m.overflows,
        "write_seconds": written,
        "drain_seconds": drained,
    }


def baseline_vs_git_status(
    base: Path, files: int, rounds: int
) -> tuple[float, float, float, str]:
    """(first phase, whole baseline, git status) medians in seconds, and the summary."""
    from guard.monitor import phases

    root = make_repo(base, "tree")
    subprocess.run([sys.executable, "-c", WRITER, str(root / "tree"), str(files)], check=True)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tree")
    git(root, "status", "--porcelain")  # refresh the index: git status at its fastest
    git_dir = str(root / ".git") + "/"

    def ignore(p: str) -> bool:  # what the monitor ignores in .git
        rest = p[len(git_dir):] if p.startswith(git_dir) else None
        return rest is not None and (rest in ("index", "index.lock") or rest == "objects"
                                     or rest.startswith("objects/"))

    runs_git, runs_first, runs_all = [], [], []
    summary = ""
    for i in range(rounds):
        t0 = time.perf_counter()
        git(root, "status", "--porcelain")
        runs_git.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        bl = phases.prepare(Baseline, [root], store=base / f"store{i}", worktree=root,
                            ignore=ignore)
        runs_first.append(time.perf_counter() - t0)
        phases.complete(bl, set)
        runs_all.append(time.perf_counter() - t0)
        summary = bl.stats.summary()
        bl.discard()
    return (statistics.median(runs_first), statistics.median(runs_all),
            statistics.median(runs_git), summary)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=1000)
    ap.add_argument("--burst", type=int, default=20_000)
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument(
        "--quick", action="store_true",
        help="100 writes, 2,000-file burst; the 50,000-file tree stays (it is the figure)",
    )
    ap.add_argument("--rounds", type=int, default=5, help="baseline / git status rounds")
    args = ap.parse_args()
    if args.quick:
        args.writes, args.burst, args.rounds = 100, 2_000, 3
    with tempfile.TemporaryDirectory(prefix="guard-bench-") as tmp:
        base = Path(tmp)
        os.environ["XDG_DATA_HOME"] = str(base / "data")  # keep the user's data dir clean

        lat = sorted(latency(base, args.writes))
        p95 = lat[min(len(lat) - 1, round(0.95 * len(lat)) - 1)]
        print(f"detection latency over {len(lat):,} writes: median"
              f" {statistics.median(lat) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms,"
              f" max {lat[-1] * 1000:.2f} ms")

        b = burst(base, args.burst)
        print(f"burst of {b['files']:,} files: reported {b['reported']:,}, missed"
              f" {b['missed']}, duplicates {b['duplicates']}; {b['from_events']:,} from inotify"
              f" events, {b['from_reconcile']:,} from reconciliation; {b['overflows']}"
              f" overflows; written in {b['write_seconds']:.1f} s, all reported"
              f" {b['drain_seconds']:.1f} s after the first write")

        first, whole, gs, summary = baseline_vs_git_status(base, args.files, args.rounds)
        print(f"baseline of a {args.files:,}-file committed tree, median of {args.rounds}:"
              f" {first:.3f} s before a command may start, {whole:.3f} s in all ({summary})")
        print(f"git status --porcelain on the same tree: {gs:.3f} s;"
              f" load average {os.getloadavg()[0]:.1f}")
        print(f"whole baseline / git status = {whole / gs:.2f}x")
        print(f"baseline before the command starts / git status = {first / gs:.2f}x"
              f" (missed in burst: {b['missed']})")
        if b["missed"] or b["duplicates"]:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
