"""Benchmark: what confining one shell command costs, guard against its peers, side by side.

Every configuration runs the same short command (``bash -c true``) in the same
rounds, one after the other in a rotating order, so machine noise hits all alike;
what is reported is each one's time *added* to the bare command measured in the
same round (median and p95), its CPU time (user + system of the whole process
tree, from ``wait4``) and the peak resident size of its largest process:

* ``guard``: :func:`guard.sandbox.confine.wrap_command` as the hook rewrites a
  plan-mode command: namespaces (user when not root, mount, network, PID, IPC), a
  read-only view, then Landlock, the capability drop and the seccomp filter (with the
  thread that answers the command's chmod and utime calls);
* ``guard, Landlock-only fallback``: the same without namespaces (where the kernel
  cannot make them);
* ``bubblewrap alone`` (the floor): Debian's ``bwrap`` with the same namespaces, a
  read-only ``/``, the plan directory bound writable, its own ``/proc``, nothing
  inside: what namespaces cost at the least;
* ``bubblewrap + guard's helper``: the other design guard measured for its first
  wall: ``bwrap`` makes the namespaces and guard's helper inside adds Landlock and
  seccomp (a second Python start where the egress proxy needs one outside);
* ``guard run --no-monitor`` and ``guard run (+ monitor)``: ``guard run --agent plan -q
  -- bash -c true``, the way Codex, Cursor and aider are confined (the policy load, the
  same namespaces and walls, guard's egress proxy, and the monitor's baseline and final
  check);
* ``codex sandbox`` (Codex 0.171, bwrap + seccomp inside) and ``srt`` (Anthropic's
  sandbox-runtime 0.0.78, bwrap + its proxies) when installed in
  ``~/.cache/openoxide-guard`` (``scripts/test.sh`` installs both).

Then a real workload: a 60-test pytest run in a fresh project, bare, as the hook
confines it and under ``guard run`` (with and without the monitor), interleaved; the
ratios of medians are printed. The ratios are printed last: the peers' time added per
command against guard's hook command and against ``guard run``.

    python benchmarks/confine.py [--runs 200] [--peer-runs 40] [--rounds 5]
    python benchmarks/confine.py --quick     # 60 runs, 20 of the peers, 2 rounds
    python benchmarks/confine.py --against DIR   # DIR's guard run rows too, then the ratios
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from guard.sandbox import confine, landlock  # noqa: E402

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "openoxide-guard"
CODEX = CACHE / "codex-0.171.0" / "node_modules" / ".bin" / "codex"
SRT = CACHE / "sandbox-runtime-0.0.78" / "node_modules" / ".bin" / "srt"

TRUE = ["bash", "-c", "true"]

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


@dataclass
class Sample:
    wall: float
    cpu: float


@dataclass
class Config:
    name: str
    argv: list[str]
    peer: bool = False  # measured fewer times (each run takes a tenth of a second or more)
    #: whether wait4 sees the whole tree's CPU time (bwrap's pid 1 in a PID namespace is
    #: never waited for by bwrap, so what runs inside it is not counted)
    counted: bool = True
    #: set in this configuration's environment (PYTHONPATH for ``--against``)
    env: dict[str, str] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    added: list[float] = field(default_factory=list)
    added_cpu: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)


def run_once(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Sample:
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv[:4])} ... failed ({proc.returncode}): {err[-600:]}")
    return Sample(took, usage.ru_utime + usage.ru_stime)


def peak_rss(argv: list[str], cwd: Path, env: dict[str, str], scratch: Path) -> int | None:
    """The peak resident size (KiB) of the largest process ``argv`` runs, measured by GNU
    time (a small parent: a child forked from this Python would count its size too)."""
    time_bin = "/usr/bin/time"
    if not os.access(time_bin, os.X_OK):
        return None
    out = scratch / "rss"
    proc = subprocess.run([time_bin, "-f", "%M", "-o", str(out), "--", *argv], cwd=cwd,
                          env=env, capture_output=True)  # fmt: skip
    try:
        return int(out.read_text().split()[-1]) if proc.returncode == 0 else None
    except (OSError, ValueError, IndexError):
        return None


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


def bwrap_prefix(*writable: Path) -> list[str] | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    argv = [
        bwrap, "--unshare-user-try", "--unshare-ipc", "--unshare-pid", "--unshare-net",
        "--die-with-parent", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev",
        "--proc", "/proc",
    ]  # fmt: skip
    for w in writable:
        argv += ["--bind", str(w), str(w)]
    argv.append("--")
    ok = subprocess.run([*argv, "true"], capture_output=True)
    return argv if ok.returncode == 0 else None


def peers(root: Path, plans: Path, scratch: Path) -> list[Config]:
    out = []
    if CODEX.exists():
        argv = [
            str(CODEX), "sandbox", "-P", "plan", "-c", 'permissions.plan.extends=":read-only"',
            "-c", f'permissions.plan.filesystem={{"{plans}"="write", "{scratch}"="write"}}',
            "--", "bash", "-c", "true",
        ]  # fmt: skip
        out.append(Config("codex sandbox", argv, peer=True))
    else:
        log(f"codex sandbox: not installed at {CODEX}; skipped")
    if SRT.exists() and shutil.which("bwrap") and shutil.which("socat"):
        settings = scratch / "srt-settings.json"
        settings.write_text(json.dumps({
            "filesystem": {"denyRead": [], "allowWrite": [str(plans)], "denyWrite": []},
            "network": {"allowedDomains": [], "deniedDomains": []},
        }))  # fmt: skip
        out.append(Config("srt", [str(SRT), "--settings", str(settings), "-c", "true"], peer=True))
    else:
        log(f"srt: not installed at {SRT} (or bwrap/socat missing); skipped")
    return out


def _rss(c: Config) -> str:
    return f"{statistics.median(c.rss_kib) / 1024:.1f} MiB" if c.rss_kib else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="rounds of the short command")
    ap.add_argument("--peer-runs", type=int, default=40, help="rounds that include the peers")
    ap.add_argument("--rounds", type=int, default=5, help="pairs for the pytest workload")
    ap.add_argument("--quick", action="store_true", help="60 rounds, 20 with peers, 2 pytest")
    ap.add_argument("--against", type=Path, metavar="DIR",
                    help="another guard source tree (e.g. `git archive main | tar -x -C DIR`):"
                         " its guard run rows are measured in the same rounds, and the ratios"
                         " of this tree's to its are printed last")  # fmt: skip
    args = ap.parse_args()
    if args.quick:
        args.runs, args.peer_runs, args.rounds = min(args.runs, 60), 20, min(args.rounds, 2)
    load_start = os.getloadavg()
    why = confine.available()
    if why:
        raise SystemExit(f"cannot confine here: {why}")
    spaces = confine.namespaces_unavailable()
    tmp = Path(tempfile.mkdtemp(prefix="guard-bench-confine-"))
    try:
        root = tmp / "project"
        plans = make_project(root)
        scratch = tmp / "scratch"
        scratch.mkdir()
        (Path("/tmp") / "claude").mkdir(exist_ok=True)  # srt's TMPDIR, which it does not make

        def wrap(command: str, isolate: bool = True) -> list[str]:
            text = confine.wrap_command(command, plans=[str(plans)], cwd=str(root), isolate=isolate)
            return ["bash", "-c", text]

        bare = Config("bare", ["bash", "-c", "true"])
        configs = [bare]
        if not spaces:
            configs.append(Config("guard", wrap("true")))
        else:
            log(f"guard in namespaces: unavailable here ({spaces}); only the fallback runs")
        configs.append(Config("guard, Landlock-only fallback", wrap("true", isolate=False)))
        bw = bwrap_prefix(plans, scratch)
        if bw is not None:
            configs.append(Config("bubblewrap alone", [*bw, "bash", "-c", "true"], counted=False))
            inner = confine.helper_argv(
                ["bash", "-c", "true"], plans=[str(plans)], private_tmp=True, walls=True
            )
            configs.append(Config("bubblewrap + guard's helper", [*bw, *inner], counted=False))
        else:
            log("bubblewrap: not installed or cannot run here; skipped")
        run = [sys.executable, "-m", "guard", "run", "--agent", "plan", "-q"]
        configs.append(Config("guard run --no-monitor", [*run, "--no-monitor", "--", *TRUE]))
        configs.append(Config("guard run (+ monitor)", [*run, "--", *TRUE]))
        against = {} if args.against is None else {"PYTHONPATH": str(args.against.resolve())}
        if against:
            configs.append(Config("guard run --no-monitor [against]",
                                  [*run, "--no-monitor", "--", *TRUE], env=against))
            configs.append(Config("guard run (+ monitor) [against]", [*run, "--", *TRUE],
                                  env=against))  # fmt: skip
        configs += peers(root, plans, scratch)
        # PYTHONDONTWRITEBYTECODE dropped: as for a user, guard's bytecode cache is written
        # (by the warm-up) and read, not every module compiled again in every run
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GUARD_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(TMPDIR=str(scratch), XDG_DATA_HOME=str(tmp / "data"))

        for c in configs:  # warm caches (.pyc, page cache, npm's module cache)
            for _ in range(3):
                run_once(c.argv, root, {**env, **c.env})
        log(f"{args.runs} rounds of a short command ({args.peer_runs} with the peers) ...")
        for i in range(args.runs):
            chosen = [c for c in configs if not c.peer or i < args.peer_runs]
            chosen = chosen[i % len(chosen) :] + chosen[: i % len(chosen)]  # rotate the order
            for c in chosen:
                c.samples.append(run_once(c.argv, root, {**env, **c.env}))
            base = bare.samples[-1]
            for c in chosen:
                if c is not bare:
                    c.added.append(c.samples[-1].wall - base.wall)
                    c.added_cpu.append(c.samples[-1].cpu - base.cpu)

        for c in configs:
            for _ in range(3):
                rss = peak_rss(c.argv, root, {**env, **c.env}, scratch)
                if rss is not None:
                    c.rss_kib.append(rss)

        # -B: the workload's pytest writes no bytecode in any configuration (a confined one
        # cannot write it into the project; guard's own interpreter caches its bytecode)
        pytest_cmd = f"{shlex.quote(sys.executable)} -B -m pytest -q -p no:cacheprovider tests"
        workloads = {
            "bare": ["bash", "-c", pytest_cmd],
            "confined": wrap(pytest_cmd, isolate=not spaces),
            "guard run --no-monitor": [*run, "--no-monitor", "--", "bash", "-c", pytest_cmd],
            "guard run (+ monitor)": [*run, "--", "bash", "-c", pytest_cmd],
        }
        if against:
            workloads["guard run (+ monitor) [against]"] = workloads["guard run (+ monitor)"]
        envs = {name: {**env, **(against if name.endswith("[against]") else {})}
                for name in workloads}  # fmt: skip
        for name, argv in workloads.items():
            run_once(argv, root, envs[name])
        log(f"{args.rounds} rounds of a 60-test pytest run ...")
        walls: dict[str, list[float]] = {name: [] for name in workloads}
        for r in range(args.rounds):
            names = list(workloads)
            names = names[r % len(names) :] + names[: r % len(names)]
            for name in names:
                walls[name].append(run_once(workloads[name], root, envs[name]).wall)

        load = os.getloadavg()
        print(
            f"guard: Landlock ABI {landlock.abi_version()}, namespaces"
            f" {'available' if not spaces else 'unavailable: ' + spaces}; {os.cpu_count()} CPUs,"
            f" load average {load_start[0]:.2f} at the start, {load[0]:.2f} at the end (1 min);"
            f" running as {'root' if os.geteuid() == 0 else 'uid ' + str(os.geteuid())}"
        )
        b = bare.samples
        print(
            f"bare `bash -c true`: wall median {statistics.median(s.wall for s in b) * 1e3:.1f} ms,"
            f" CPU {statistics.median(s.cpu for s in b) * 1e3:.1f} ms, peak RSS {_rss(bare)}"
        )
        print(f"{'added per command':34} {'wall median':>11} {'p95':>8} {'CPU median':>11}"
              f" {'peak RSS':>9} {'runs':>5}")  # fmt: skip
        medians: dict[str, float] = {}
        for c in configs[1:]:
            medians[c.name] = statistics.median(c.added)
            cpu = f"{statistics.median(c.added_cpu) * 1e3:8.1f} ms" if c.counted else "     n/a   "
            rss = _rss(c) if c.counted else "n/a"
            print(
                f"{c.name:34} {medians[c.name] * 1e3:8.1f} ms {p95(c.added) * 1e3:5.1f} ms"
                f" {cpu} {rss:>9} {len(c.added):5}"
            )
        print(
            "(peak RSS: the largest process of the configuration, median of 3, GNU time;"
            " n/a: bwrap does not wait for what runs in its PID namespace, so neither CPU nor"
            " memory of it is counted)"
        )
        mb = statistics.median(walls["bare"])
        print(f"pytest, 60 tests, median of {args.rounds}: bare {mb:.3f} s; " + "; ".join(
            f"{name} {statistics.median(w):.3f} s (x{statistics.median(w) / mb:.3f})"
            for name, w in walls.items() if name != "bare"))
        ours = medians.get("guard", medians["guard, Landlock-only fallback"])
        parts = [
            f"{name} / guard = x{medians[name] / ours:.1f}"
            for name in ("codex sandbox", "srt", "bubblewrap + guard's helper")
            if name in medians and ours > 0
        ]
        if "bubblewrap alone" in medians and medians["bubblewrap alone"] > 0:
            parts.append(f"guard / bubblewrap alone = x{ours / medians['bubblewrap alone']:.1f}")
        print(f"guard adds {ours * 1e3:.1f} ms per command (goal: <= 20 ms median)")
        print("ratios of the time added per command (median): " + "; ".join(parts))
        runs = [
            f"{name} / {peer} = x{medians[name] / medians[peer]:.2f}"
            for name in ("guard run --no-monitor", "guard run (+ monitor)")
            for peer in ("codex sandbox", "guard")
            if peer in medians and medians[peer] > 0
        ]
        print("guard run's time added per command against codex sandbox (goal: <= x1.00) and"
              " the hook's confined command: " + "; ".join(runs))
        mc = statistics.median(walls["confined"])
        mr = statistics.median(walls["guard run (+ monitor)"])
        print(f"ratio confined / bare, 60-test pytest run: x{mc / mb:.3f}  (goal: <= 1.1);"
              f" guard run (+ monitor) / bare: x{mr / mb:.3f}  (goal: <= 1.1)")
        if against:
            ra = statistics.median(walls["guard run (+ monitor) [against]"])
            old = {name: medians[name + " [against]"] for name in
                   ("guard run --no-monitor", "guard run (+ monitor)")}  # fmt: skip
            print(f"against {args.against}: " + "; ".join(
                f"{name}: {medians[name] * 1e3:.1f} ms added vs {old[name] * 1e3:.1f}"
                f" (x{medians[name] / old[name]:.2f})"
                for name in old if old[name] > 0
            ) + f"; pytest + monitor x{mr / mb:.3f} vs x{ra / mb:.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
