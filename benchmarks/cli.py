"""Benchmark: how soon each everyday ``guard`` command answers, as a multiple of a bare
``python -c pass`` (what a pre-commit hook, an editor or a shell prompt pays per call).

Measured in one run, in a fresh git repository with a small policy file, each a new
process, the commands interleaved round by round with ``python -c pass`` so that a busy
machine slows all of them alike:

- ``guard --help``, ``guard mode``, ``guard plan status``,
  ``guard check write src/a.py`` (exit 1: denied), ``guard explain write src/a.py``,
  ``guard lint .openoxide/policy.toml`` (one small file): goal ≤ 12x python's median;
- TAB completion (bash's protocol, as the script ``guard --install-completion`` installs
  runs it) of a host, an agent, a session and a rule code: goal ≤ 50 ms each;
- ``guard doctor`` (it probes every host and layer): goal ≤ 30x.

One unmeasured warm-up round first (it fills guard's validated-policy cache and Python's
bytecode cache, as any earlier command would have). ``--check`` makes a miss exit 1.
Printed last: each command's ratio to ``python -c pass``.

    python benchmarks/cli.py [--rounds 11] [--goal-x 12] [--doctor-x 30] [--tab-ms 50] [--check]
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

BASELINE = "python -c pass"
DOCTOR = "guard doctor"


def guard_command() -> list[str]:
    """The installed ``guard`` next to this interpreter (what users run), else ``-m guard``."""
    script = Path(sys.executable).parent / "guard"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "guard"]


def tab(words: str) -> dict[str, str]:
    """The environment bash's completion script gives guard for a TAB after ``words``."""
    return {"_GUARD_COMPLETE": "complete_bash", "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1)}


def once(argv: list[str], cwd: Path, expect: tuple[int, ...], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False, timeout=300)
    elapsed = time.perf_counter() - t0
    if r.returncode not in expect:
        raise SystemExit(
            f"{' '.join(argv)}: exit {r.returncode}, expected {expect}\n"
            + r.stderr.decode(errors="replace")
        )
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--goal-x", type=float, default=12.0,
                    help="goal for every everyday command: median / python's median")
    ap.add_argument("--doctor-x", type=float, default=30.0, help="goal for guard doctor")
    ap.add_argument("--tab-ms", type=float, default=50.0,
                    help="goal for each TAB completion: median in milliseconds")
    ap.add_argument("--check", action="store_true", help="exit 1 when a median misses its goal")
    args = ap.parse_args()
    git = shutil.which("git")
    if git is None:
        raise SystemExit("git is needed (the repository the commands run in)")
    guard = guard_command()
    with tempfile.TemporaryDirectory() as d:
        repo = Path(d) / "repo"
        home = Path(d) / "home"
        home.mkdir()
        subprocess.run([git, "init", "-q", str(repo)], check=True)
        (repo / ".openoxide").mkdir()
        (repo / ".openoxide/policy.toml").write_text(POLICY)
        # PYTHONDONTWRITEBYTECODE dropped: as for a user, the first run writes the bytecode
        # cache and later runs read it; HOME of its own: no session or install of the reader's
        drop = ("GUARD_POLICY", "GUARD_AGENT", "PYTHONDONTWRITEBYTECODE", "XDG_DATA_HOME")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["HOME"] = str(home)
        # a second worktree with a session: the name TAB offers after --session
        busy = Path(d) / "busy"
        subprocess.run([git, "init", "-q", str(busy)], check=True)
        subprocess.run([*guard, "session", "start", "--id", "s-1"], cwd=busy, env=env,
                       capture_output=True, check=True, timeout=300)
        Case = tuple[list[str], tuple[int, ...], dict[str, str]]
        cases: dict[str, Case] = {
            BASELINE: ([sys.executable, "-c", "pass"], (0,), {}),
            "guard --help": ([*guard, "--help"], (0,), {}),
            "guard mode": ([*guard, "mode"], (0,), {}),
            "guard plan status": ([*guard, "plan", "status"], (0, 1), {}),
            "guard check": ([*guard, "check", "write", "src/a.py"], (1,), {}),
            "guard explain": ([*guard, "explain", "write", "src/a.py"], (1,), {}),
            "guard lint": ([*guard, "lint", ".openoxide/policy.toml"], (0,), {}),
            "TAB install c": (guard, (0,), tab("guard install c")),
            "TAB --agent": (guard, (0,), tab("guard check --agent ")),
            "TAB --session": (guard, (0,), tab("guard mode --session ")),
            "TAB --explain GL1": (guard, (0,), tab("guard lint --explain GL1")),
            DOCTOR: ([*guard, "doctor"], (0, 1), {}),
        }
        def where(name: str) -> Path:
            return busy if name == "TAB --session" else repo

        for name, (argv, expect, extra) in cases.items():  # warm-up: not measured
            once(argv, where(name), expect, {**env, **extra})
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (argv, expect, extra) in cases.items():
                times[name].append(once(argv, where(name), expect, {**env, **extra}))
    print(f"{args.rounds} rounds, each command a new process; guard: {' '.join(guard)}")
    median = {name: statistics.median(t) * 1000 for name, t in times.items()}
    for name, t in times.items():
        print(f"  {name:18} median {median[name]:7.1f} ms   best {min(t) * 1000:7.1f} ms")
    base = median[BASELINE]
    # each goal as a multiple of python's median (a TAB's goal is in milliseconds)
    goal = {n: args.doctor_x if n == DOCTOR else args.tab_ms / base if n.startswith("TAB")
            else args.goal_x for n in cases if n != BASELINE}  # fmt: skip
    missed = [n for n, x in goal.items() if median[n] / base > x]
    verdict = "all met" if not missed else "missed by " + ", ".join(missed)
    print(f"goal: median <= {args.goal_x:g}x {BASELINE} ({DOCTOR}: {args.doctor_x:g}x;"
          f" each TAB: {args.tab_ms:g} ms): {verdict}")
    for name in goal:
        print(f"ratio {name:18} / {BASELINE}: {median[name] / base:5.1f}x"
              f" (goal {goal[name]:.3g}x)")
    sys.stdout.flush()
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
