"""Benchmark: what confining one shell command costs (the ``allow_confined`` rewrite).

Two measurements, each comparing the same command bare and confined, interleaved
run by run so that machine noise hits both alike:

1. **Added latency per command**: ``bash -c 'WRAPPED'`` vs ``bash -c 'true'``, where
   WRAPPED is :func:`guard.sandbox.confine.wrap_command` of ``true`` (the helper:
   Python start, Landlock, capability drop, seccomp filter, exec of ``bash -c true``).
   Prints the median and p95 of (confined - bare) over RUNS pairs.
2. **A real workload**: a 60-test pytest run in a fresh project, bare vs wrapped;
   prints the ratio of medians over ROUNDS pairs, last.

When ``bwrap`` (bubblewrap) is installed and can run here, its start-up is
measured too for comparison (read-only root, the plan directory writable).

CPU time (user + system, from ``getrusage(RUSAGE_CHILDREN)``) is reported beside
wall time: on a loaded machine wall time mostly measures waiting for a core.

    python benchmarks/confine.py [--runs 200] [--rounds 5]
    python benchmarks/confine.py --quick     # 60 pairs, 2 rounds: well under 2 minutes
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from guard.sandbox import confine, landlock  # noqa: E402

TEST_FILE = """
def test_add_{i}():
    assert {i} + 1 == {i} + 1

def test_join_{i}():
    assert "-".join(["a", "{i}"]) == "a-{i}"

def test_sorted_{i}():
    assert sorted([3, {i}, 1])[0] <= 3
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


CPU: list[float] = []  # CPU seconds of the last timed() call, set by timed()


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(argv: list[str], cwd: Path) -> float:
    cpu0 = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    CPU[:] = [_children_cpu() - cpu0]
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]}... failed ({proc.returncode}): {proc.stderr.decode()[-400:]}")
    return took


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


def make_project(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    tests = root / "tests"
    tests.mkdir()
    for i in range(20):
        (tests / f"test_m{i}.py").write_text(TEST_FILE.format(i=i))
    plans = root / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    return plans


def bwrap_argv(plans: Path) -> list[str] | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    argv = [bwrap, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--bind",
            str(plans), str(plans), "--cap-drop", "ALL", "--"]  # fmt: skip
    ok = subprocess.run([*argv, "true"], capture_output=True)
    return argv if ok.returncode == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="pairs for the per-command latency")
    ap.add_argument("--rounds", type=int, default=5, help="pairs for the pytest workload")
    ap.add_argument("--quick", action="store_true", help="60 pairs and 2 rounds (under ~2 min)")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.rounds = min(args.runs, 60), min(args.rounds, 2)
    load_start = os.getloadavg()
    why = confine.available()
    if why:
        raise SystemExit(f"cannot confine here: {why}")
    tmp = Path(tempfile.mkdtemp(prefix="guard-bench-confine-"))
    try:
        root = tmp / "project"
        plans = make_project(root)

        def wrap(command: str) -> list[str]:
            text = confine.wrap_command(command, plans=[str(plans)], cwd=str(root))
            return ["bash", "-c", text]

        bare_cmd, conf_cmd = ["bash", "-c", "true"], wrap("true")
        bw = bwrap_argv(plans)
        for _ in range(5):  # warm caches (.pyc, page cache)
            timed(bare_cmd, root), timed(conf_cmd, root)
        log(f"{args.runs} pairs of a short command ...")
        added: list[float] = []
        bare_t: list[float] = []
        bw_added: list[float] = []
        cpu_bare: list[float] = []
        cpu_added: list[float] = []
        for _ in range(args.runs):
            b = timed(bare_cmd, root)
            cb = CPU[0]
            c = timed(conf_cmd, root)
            bare_t.append(b)
            added.append(c - b)
            cpu_bare.append(cb)
            cpu_added.append(CPU[0] - cb)
            if bw is not None:
                bw_added.append(timed([*bw, "bash", "-c", "true"], root) - timed(bare_cmd, root))

        pytest_cmd = f"{shlex_quote(sys.executable)} -m pytest -q -p no:cacheprovider tests"
        bare_p, conf_p = ["bash", "-c", pytest_cmd], wrap(pytest_cmd)
        timed(bare_p, root), timed(conf_p, root)
        log(f"{args.rounds} pairs of a 60-test pytest run ...")
        walls: dict[str, list[float]] = {"bare": [], "confined": []}
        for _ in range(args.rounds):
            walls["bare"].append(timed(bare_p, root))
            walls["confined"].append(timed(conf_p, root))

        load = os.getloadavg()
        print(
            f"confinement: Landlock ABI {landlock.abi_version()}, capabilities dropped, seccomp"
            f" filter; {os.cpu_count()} CPUs, load average {load_start[0]:.2f} at the start,"
            f" {load[0]:.2f} at the end (1 min)"
        )
        print(
            f"bare `bash -c true`: wall median {statistics.median(bare_t) * 1000:.1f} ms,"
            f" CPU median {statistics.median(cpu_bare) * 1000:.1f} ms"
        )
        print(
            f"added per confined command, wall: median {statistics.median(added) * 1000:.1f} ms,"
            f" p95 {p95(added) * 1000:.1f} ms  (over {args.runs} pairs)"
        )
        print(
            f"added per confined command, CPU (user+sys): median"
            f" {statistics.median(cpu_added) * 1000:.1f} ms, p95 {p95(cpu_added) * 1000:.1f} ms"
            "  (goal: <= 25 ms added)"
        )
        if bw_added:
            print(
                f"for comparison, bubblewrap (ro root, no Landlock/seccomp) adds: median"
                f" {statistics.median(bw_added) * 1000:.1f} ms, p95 {p95(bw_added) * 1000:.1f} ms"
            )
        mb, mc = statistics.median(walls["bare"]), statistics.median(walls["confined"])
        print(f"pytest, 60 tests: bare {mb:.3f} s, confined {mc:.3f} s (median of {args.rounds})")
        print(f"ratio confined / bare, 60-test pytest run: x{mc / mb:.3f}  (goal: <= 1.1)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(confine.default_tmpdir(str(plans)), ignore_errors=True)
    return 0


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


if __name__ == "__main__":
    sys.exit(main())
