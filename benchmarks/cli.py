"""Benchmark: how soon the ``guard`` command answers (what a pre-commit hook or an
editor pays per file).

Measured in one run, in a fresh git repository with a small policy file, each a
new process, the commands interleaved round by round so that a busy machine
slows all of them alike:

- ``guard --version``
- ``guard check write src/a.py`` (the repository's policy; exit 1: denied)
- ``guard lint .openoxide/policy.toml`` (one small file)

against two baselines: ``python -c pass`` (this interpreter's own start-up) and
``git --version``. One unmeasured warm-up round first (it fills guard's validated
policy cache and Python's bytecode cache, as any earlier command would have). The
goal is a median of at most 150 ms for each guard command; ``--check`` makes a miss
exit 1. Printed last: the ratios guard / python and guard / git.

    python benchmarks/cli.py [--rounds 15] [--goal-ms 150] [--check]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICY = """\
version = 1

[agents.plan]
mode = "plan"
default = "deny"

[agents.plan.read]
allow = ["**"]

[agents.plan.write]
deny = ["**", "!{plans}/*.md"]
allow = ["{plans}/*.md"]

[agents.build]
mode = "build"
default = "allow"
"""


def guard_command() -> list[str]:
    """The installed ``guard`` next to this interpreter (what users run), else ``-m guard``."""
    script = Path(sys.executable).parent / "guard"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "guard"]


def once(argv: list[str], cwd: Path, expect: int) -> float:
    # PYTHONDONTWRITEBYTECODE dropped: as for a user, the first run writes the bytecode
    # cache and later runs read it (compiling guard's sources would be measured otherwise)
    drop = ("GUARD_POLICY", "GUARD_AGENT", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - t0
    if r.returncode != expect:
        raise SystemExit(
            f"{' '.join(argv)}: exit {r.returncode}, expected {expect}\n"
            + r.stderr.decode(errors="replace")
        )
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--goal-ms", type=float, default=150.0)
    ap.add_argument("--check", action="store_true", help="exit 1 when a median misses the goal")
    args = ap.parse_args()
    git = shutil.which("git")
    if git is None:
        raise SystemExit("git is needed (a baseline, and the repository the commands run in)")
    guard = guard_command()
    with tempfile.TemporaryDirectory() as d:
        repo = Path(d)
        subprocess.run([git, "init", "-q", str(repo)], check=True)
        (repo / ".openoxide").mkdir()
        (repo / ".openoxide/policy.toml").write_text(POLICY)
        cases: dict[str, tuple[list[str], int]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], 0),
            "git --version": ([git, "--version"], 0),
            "guard --version": ([*guard, "--version"], 0),
            "guard check": ([*guard, "check", "write", "src/a.py"], 1),
            "guard lint": ([*guard, "lint", ".openoxide/policy.toml"], 0),
        }
        for argv, expect in cases.values():  # warm-up: not measured
            once(argv, repo, expect)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (argv, expect) in cases.items():
                times[name].append(once(argv, repo, expect))
    print(f"{args.rounds} rounds, each command a new process; guard: {' '.join(guard)}")
    median = {name: statistics.median(t) * 1000 for name, t in times.items()}
    for name, t in times.items():
        print(f"  {name:16} median {median[name]:7.1f} ms   best {min(t) * 1000:7.1f} ms")
    missed = [n for n in cases if n.startswith("guard") and median[n] > args.goal_ms]
    verdict = "all met" if not missed else "missed by " + ", ".join(missed)
    print(f"goal: each guard command's median <= {args.goal_ms:.0f} ms: {verdict}")
    base_py, base_git = median["python -c pass"], median["git --version"]
    for name in ("guard --version", "guard check", "guard lint"):
        print(f"ratio {name:16} / python -c pass: {median[name] / base_py:5.1f}x;"
              f" / git --version: {median[name] / base_git:5.1f}x")
    sys.stdout.flush()
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
