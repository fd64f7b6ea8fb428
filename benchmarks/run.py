"""Benchmark: a real workload under ``guard run`` and bare, measured in the same run.

The workload, in a fresh git repository of FILES committed files with a small
pytest suite: ``git status`` (STATUSES times, a 10,000-file status each) then
the test suite once, all from one shell, i.e. one agent session's worth of
commands under one ``guard run``.

Configurations, interleaved round by round so that machine noise hits all alike:

* bare:          sh -c WORKLOAD
* helper only:   the confinement helper (guard/sandbox/helper.py: Landlock, capability
                 drop, seccomp filter) -- WORKLOAD
* guard run:     guard run --agent plan --no-monitor -- WORKLOAD (policy load, roots, helper)
* guard run + monitor: guard run --agent plan -- WORKLOAD (when the monitor is installed)

Each configuration runs once before the rounds (a warm-up: the page cache, and guard's
cache of validated policies, which any earlier ``guard run`` with the same policy
would have filled; see guard/policy/valid.py). Prints the median of each and its
ratio to bare, what the monitor's final reconciliation (the full check after the
command exits) took, and, last, the end-to-end ratio of ``guard run`` (with the
monitor when available) to bare.

    python benchmarks/run.py [--files 10000] [--rounds 5] [--statuses 5] [--quick]
    python benchmarks/run.py --against DIR   # DIR's guard run rows too (another checkout)

``--quick``: 3 rounds (the same workload, so the same figure, with more noise).
``--against DIR``: the guard run configurations again with DIR's guard (``PYTHONPATH``,
its own home, so its monitor's notices are its own), in the same rounds; its figures are
printed after this checkout's, its ratios last.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
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
import json, re

def test_roundtrip_{i}():
    data = {{"n": {i}, "items": list(range(50))}}
    assert json.loads(json.dumps(data)) == data

def test_regex_{i}():
    assert re.fullmatch(r"[a-z]+_{i}", "name_{i}")

def test_sum_{i}():
    assert sum(range({i} + 100)) == ({i} + 100) * ({i} + 99) // 2
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_repo(root: Path, files: int) -> None:
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@invalid"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    log(f"creating {files} files ...")
    per_dir = 100
    for i in range(files):
        d = root / "src" / f"pkg{i // per_dir:03d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        (d / f"mod{i % per_dir:03d}.py").write_text(f"VALUE = {i}\n")
    tests = root / "tests"
    tests.mkdir()
    for i in range(20):
        (tests / f"test_m{i:02d}.py").write_text(TEST_FILE.format(i=i))
    log("committing ...")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)
    subprocess.run([*git, "status", "--porcelain"], check=True, capture_output=True)


def workload(statuses: int) -> list[str]:
    py = sys.executable
    # -B: the workload's pytest writes no bytecode in any configuration (a confined one
    # cannot write it into the worktree; guard's own interpreter caches its bytecode)
    script = (
        f"for i in $(seq {statuses}); do git status --porcelain >/dev/null || exit 1; done; "
        f"{py} -B -m pytest -q -p no:cacheprovider tests >/dev/null || exit 1"
    )
    return ["sh", "-c", script]


FINAL = re.compile(r"reconciliation \(final\) scanned ([\d,]+) paths in ([\d.]+) s")
BASELINE = re.compile(r"took ([\d.]+) s \(([\d.]+) s before the command could start\)")


def notices(home: Path, event: str, pattern: re.Pattern[str]) -> list[re.Match[str]]:
    """The monitor's ``event`` notices matching ``pattern`` so far, from the audit logs
    (under -q guard run prints neither the start nor the reconciliation notice)."""
    out = []
    for log_file in sorted((home / ".local/share/openoxide/audit").glob("*.jsonl")):
        for line in log_file.read_text().splitlines():
            if f'"event": "{event}"' in line and (m := pattern.search(line)):
                out.append(m)
    return out


def baseline_notices(home: Path) -> list[tuple[float, float]]:
    """(whole baseline, part the command waited for) of every monitor start so far."""
    return [(float(m.group(1)), float(m.group(2))) for m in notices(home, "start", BASELINE)]


def timed(
    argv: list[str], cwd: Path, env: dict[str, str], stderr: list[str] | None = None
) -> tuple[float, float]:
    """Wall time, and CPU time (user + system) of the command and all it waited for.

    ``stderr``, when given, receives what the command wrote there."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(
                f"benchmark command failed ({proc.returncode}): {argv}\n{err.read().decode()}"
            )
        if stderr is not None:
            err.seek(0)
            stderr.append(err.read().decode("utf-8", "replace"))
    return elapsed, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--statuses", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="another checkout of guard: its guard run rows too, then the ratios")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 3
    if landlock.abi_version() < 1:
        raise SystemExit(f"no Landlock here: {landlock.unavailable_reason()}")
    if importlib.util.find_spec("pytest") is None:
        raise SystemExit("pytest is needed for the workload: pip install -e '.[dev]'")

    tmp = Path(tempfile.mkdtemp(prefix="guard-bench-run-"))
    try:
        root = tmp / "repo"
        root.mkdir()
        make_repo(root, args.files)
        home = tmp / "home"
        home.mkdir()
        # PYTHONDONTWRITEBYTECODE dropped: as for a user, guard's bytecode cache is written
        # (by the warm-up) and read, not every module compiled again in every run
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GUARD_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local/share"))
        plans = root / ".openoxide" / "plans"
        plans.mkdir(parents=True)
        (root / ".gitignore").write_text(".openoxide/\n")

        work = workload(args.statuses)
        scratch = tmp / "scratch"  # what guard run's private TMPDIR is to the helper
        scratch.mkdir()
        helper = [
            "env", f"TMPDIR={scratch}",
            sys.executable, "-E", "-s", "-S", confine.HELPER,
            "--write", str(plans), "--write", "/dev/null", "--write", str(scratch), "--",
        ]  # fmt: skip
        guard = [sys.executable, "-m", "guard", "run", "--agent", "plan", "-q"]
        configs: dict[str, list[str]] = {
            "bare": work,
            "helper only": [*helper, *work],
            "guard run --no-monitor": [*guard, "--no-monitor", "--", *work],
        }
        has_monitor = importlib.util.find_spec("guard.monitor") is not None
        if has_monitor:
            configs["guard run (+ monitor)"] = [*guard, "--", *work]
        envs = {name: env for name in configs}
        other = tmp / "home-against"
        if args.against is not None:
            other.mkdir()
            against = {**env, "PYTHONPATH": str(args.against.resolve()), "HOME": str(other),
                       "XDG_DATA_HOME": str(other / ".local/share")}
            for name in [n for n in configs if n.startswith("guard run")]:
                configs[f"{name} [against]"] = configs[name]
                envs[f"{name} [against]"] = against

        log(f"warming up, then {args.rounds} rounds of {len(configs)} configurations ...")
        for name, argv in configs.items():
            timed(argv, root, envs[name])
        warm = {h: (len(baseline_notices(h)), len(notices(h, "reconcile", FINAL)))
                for h in (home, other)}
        wall: dict[str, list[float]] = {name: [] for name in configs}
        cpu: dict[str, list[float]] = {name: [] for name in configs}
        for r in range(args.rounds):
            for name, argv in configs.items():
                w, c = timed(argv, root, envs[name])
                wall[name].append(w)
                cpu[name].append(c)
            log(f"  round {r + 1}/{args.rounds} done")

        load = os.getloadavg()[0]
        print(
            f"workload: {args.statuses} x git status on {args.files} files + a 60-test pytest"
            f" run; median of {args.rounds} interleaved rounds; Landlock ABI"
            f" {landlock.abi_version()}; {os.cpu_count()} CPUs, load average {load:.1f}"
        )
        bare_w, bare_c = statistics.median(wall["bare"]), statistics.median(cpu["bare"])
        width = max(24, *map(len, configs))
        print(f"  {'configuration':<{width}} {'wall':>9} {'ratio':>7}   {'cpu':>9} {'ratio':>7}")
        for name in configs:
            mw, mc = statistics.median(wall[name]), statistics.median(cpu[name])
            print(f"  {name:<{width}} {mw:8.3f}s x{mw / bare_w:6.3f}   {mc:8.3f}s"
                  f" x{mc / bare_c:6.3f}")
        last = "guard run (+ monitor)" if has_monitor else "guard run --no-monitor"
        kernel = statistics.median(wall["helper only"]) / bare_w
        print(f"kernel layer alone (helper + Landlock) vs bare, wall: x{kernel:.3f}")
        for h, tag in ((home, ""), (other, " [against]")):
            if tag and args.against is None:
                break
            finals = notices(h, "reconcile", FINAL)[warm[h][1]:]
            if finals:
                took = statistics.median(float(m.group(2)) for m in finals)
                share = took / statistics.median(wall[f"guard run (+ monitor){tag}"])
                print(
                    f"monitor's final reconciliation{tag} (after the command exits): median"
                    f" {took:.3f}s for {finals[0].group(1)} paths, {share:.1%} of guard run"
                    f" (+ monitor)'s wall"
                )
            starts = baseline_notices(h)[warm[h][0]:]
            if starts:
                whole = statistics.median(a for a, _ in starts)
                before = statistics.median(b for _, b in starts)
                print(
                    f"monitor's baseline{tag}: median {before:.3f}s before the command could"
                    f" start; all of it (phase 2 runs with the command) took median"
                    f" {whole:.3f}s, the bare workload {bare_w:.3f}s"
                )
        if args.against is not None:
            for name in [n for n in configs if n.endswith(" [against]")]:
                mine = statistics.median(wall[name[: -len(" [against]")]]) / bare_w
                theirs = statistics.median(wall[name]) / bare_w
                print(f"against {args.against}: {name[: -len(' [against]')]} / bare:"
                      f" x{mine:.3f} vs x{theirs:.3f}")
        ratio = statistics.median(wall[last]) / bare_w
        print(f"ratio {last} / bare, wall: x{ratio:.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
