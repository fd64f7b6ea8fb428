"""Benchmark: shipping audit records to rsyslog, and `guard review --fleet`, each against a
baseline measured in the same run.

1. **Shipping rate**: N real audit records (stamped as guard stamps them) are put in a
   spool and guard's shipper sends them to a real rsyslogd (imtcp -> omfile, its own
   configuration and work directory, 127.0.0.1); the clock stops when rsyslogd has
   written the last one. Baseline: the same N messages, framed, written by one
   ``sendall`` on one socket to the same rsyslogd. Goal: >= 20,000 records/s.
2. **Latency shipping adds to a hook decision**: the installed hook (hook client and the
   warm hook daemon, a Write payload, a real git worktree) with ``[audit] syslog`` set
   to that rsyslogd, interleaved with the same hook without it. Also shown: the time
   ``ship()`` itself takes per record inside the daemon's process (what a decision pays:
   an append to the spool and a lock probe). Goal: <= 2 % of the hook's time.
3. **guard review --fleet over M records** (default 1,000,000, ~1.3 GB of JSON lines,
   several machines and policy digests): wall time and peak memory of the report.
   Baseline: reading the same file line by line with the same JSON parser and nothing
   else, in one process. Goal: <= 10 s, memory bounded.

    python benchmarks/fleet.py [--records M] [--ship N] [--runs R] [--quick]

Needs rsyslogd (Debian rsyslog). The ratios are printed last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from guard.fleet import syslog
from guard.fleet.records import record_id
from guard.policy.valid import Audit
from guard.setup.install import hook_command


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(cond: object, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


class Lines:
    """Counts the lines of a growing file, reading only what is new (cheap to poll)."""

    def __init__(self, path: Path) -> None:
        self.path, self.pos, self.n = path, 0, 0

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return self.n
        self.pos += len(data)
        self.n += data.count(b"\n")
        return self.n


class Rsyslog:
    def __init__(self, home: Path, port: int) -> None:
        self.home = home
        (home / "work").mkdir(parents=True)
        self.conf = home / "rsyslog.conf"
        self.out = home / "out.jsonl"
        self.conf.write_text(
            f'global(workDirectory="{home / "work"}" maxMessageSize="64k")\n'
            'module(load="imtcp")\n'
            f'input(type="imtcp" address="127.0.0.1" port="{port}" ruleset="r")\n'
            'template(name="j" type="string" string="%msg%\\n")\n'
            f'ruleset(name="r") {{ action(type="omfile" file="{self.out}" template="j"'
            ' asyncWriting="on" ioBufferSize="1m" flushOnTXEnd="off") }\n'
        )
        self.proc = subprocess.Popen(
            [shutil.which("rsyslogd") or "/usr/sbin/rsyslogd", "-n", "-f", str(self.conf),
             "-i", str(home / "pid")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        wait(lambda: self._listening(port), "rsyslogd to listen", 60)

    @staticmethod
    def _listening(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    def reset(self) -> None:
        """Start a new output file (rsyslogd reopens it on HUP)."""
        with contextlib.suppress(FileNotFoundError):
            self.out.unlink()
        self.proc.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def sample_record(repo: Path) -> dict[str, object]:
    from guard.decide import Guard
    from guard.effects import Effect, ToolCall
    from guard.gate import Gate

    out: list[dict[str, object]] = []

    class Keep:
        def write(self, record: dict[str, object], roots: object = None) -> None:
            out.append(dict(record))

    g = Guard.load("builtin:default", worktree=repo)
    gate = Gate(guard=g, sink=Keep(), source="hook", agent="plan")  # type: ignore[arg-type]
    verdict = gate.decide(ToolCall("claude-code", "Write", {}, str(repo), session="bench"),
                          effects=[Effect.write("src/app.py")])
    gate.record(verdict, context={"host": "claude-code"})
    # the chain keys the audit writer gives every shipped record (values of their real size;
    # the key that would make them verify is not needed to measure shipping)
    return {**out[0], "chain_seq": 41, "chain": "ab" * 32, "chain_prev": "cd" * 32,
            "chain_log": "repo-0123456789.jsonl"}


# -- 1. shipping rate ---------------------------------------------------------------------


def ship_rate(home: Path, repo: Path, n: int) -> tuple[float, float, float]:
    port = free_port()
    rs = Rsyslog(home / "rsyslog", port)
    try:
        base = sample_record(repo)
        recs = []
        for i in range(n):
            r = dict(base, record_id=record_id(), hostname=f"m{i % 50}")
            recs.append(syslog.spool_line(r))
        data = b"".join(recs)
        facility = syslog.FACILITIES["auth"]
        # baseline: the same messages, framed, one sendall
        framed = b"".join(syslog.frame(syslog.message(line, facility), "tcp")
                          for line in data.split(b"\n") if line)
        rs.reset()
        start = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(framed)
            lines = Lines(rs.out)
            wait(lambda: lines() >= n, "the baseline's records")
        baseline = time.perf_counter() - start
        # guard: the shipper process waiting on an empty spool, then the records appended
        spool = home / "spool"
        spool.mkdir()
        (spool / "target").write_text(f"tcp://127.0.0.1:{port}\nauth\n0\n")
        (spool / "queue").write_bytes(b"")
        proc = subprocess.Popen([sys.executable, "-I", "-m", "guard.fleet.syslog", str(spool)],
                                env={**os.environ, "GUARD_SHIP_IDLE": "30"})
        wait(lambda: (spool / "shipper.pid").exists(), "the shipper to start")
        rs.reset()
        lines = Lines(rs.out)
        start = time.perf_counter()
        with open(spool / "queue", "ab") as q:
            q.write(data)
        wait(lambda: lines() >= n, "the shipped records")
        guard = time.perf_counter() - start
        proc.terminate()
        proc.wait()
        # the writer's side: appending records to a spool (what a decision pays)
        sp = syslog.Spool(syslog.Target.parse(f"tcp://127.0.0.1:{port}"), "auth", 0,
                          home / "spool2")
        one = [recs[0]]
        k = min(n, 20000)
        start = time.perf_counter()
        for _ in range(k):
            sp.append(one[0], 1)
        append_us = (time.perf_counter() - start) / k * 1e6
        return n / guard, n / baseline, append_us
    finally:
        rs.stop()


# -- 2. hook latency ------------------------------------------------------------------------


def hook_latency(home: Path, repo: Path, runs: int) -> tuple[float, float, float]:
    port = free_port()
    rs = Rsyslog(home / "rsyslog-hook", port)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
    env["HOME"] = str(home / "hookhome")
    (home / "hookhome").mkdir()
    plain, shipping = repo / "plain", repo / "shipping"
    for d, extra in ((plain, ""), (shipping, f'\n[audit]\nsyslog = "tcp://127.0.0.1:{port}"\n')):
        (d / "src").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(d)], check=True)
        (d / ".openoxide").mkdir()
        (d / ".openoxide" / "policy.toml").write_text(
            'version = 1\nextends = ["builtin:default"]\n' + extra)
    hook = ["/bin/sh", "-c", hook_command("claude-code", agent="plan")]

    def payload(d: Path) -> bytes:
        return json.dumps({"session_id": "bench", "cwd": str(d), "hook_event_name": "PreToolUse",
                           "permission_mode": "acceptEdits", "tool_name": "Write",
                           "tool_input": {"file_path": str(d / "src/app.py"), "content": "x"},
                           "tool_use_id": "t"}).encode()

    def timed(d: Path) -> float:
        start = time.perf_counter()
        proc = subprocess.run(hook, input=payload(d), capture_output=True, cwd=d, env=env,
                              check=False)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"hook failed: {proc.stderr.decode()[-400:]}")
        return elapsed

    try:
        for _ in range(5):  # warm-up: the daemon, the shipper, the caches
            timed(plain)
            timed(shipping)
        a, b = [], []
        for _ in range(runs):
            a.append(timed(plain))
            b.append(timed(shipping))
        # what ship() costs per record, in a process like the daemon's
        settings = Audit(syslog=f"tcp://127.0.0.1:{port}")
        rec = sample_record(repo / "plain")
        data = home / "shipdata"
        for _ in range(200):
            syslog.ship(settings, [rec], data)
        wait(lambda: any(data.glob("spool/*/shipper.pid")), "the shipper")
        k = 3000
        start = time.perf_counter()
        for _ in range(k):
            syslog.ship(settings, [rec], data)
        per_call = (time.perf_counter() - start) / k
        for pidfile in data.glob("spool/*/shipper.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pidfile.read_text()), signal.SIGTERM)
        return statistics.median(a), statistics.median(b), per_call
    finally:
        for pidfile in (home / "hookhome").rglob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pidfile.read_text()), signal.SIGTERM)
        rs.stop()


# -- 3. the fleet report ----------------------------------------------------------------------


def make_fleet(path: Path, repo: Path, m: int) -> None:
    base = sample_record(repo)
    digests = [f"sha256:{i:064x}" for i in range(1, 4)]
    t0 = time.time() - 7 * 86400
    with open(path, "wb") as f:
        batch = []
        for i in range(m):
            host = f"dev-{i % 400:03d}"
            digest = digests[2] if i % 400 < 380 else digests[i % 2]
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0 + i * 0.6)) + ".000000Z"
            r = dict(base, record_id=f"{i:032x}", hostname=host, policy_digest=digest, ts=ts,
                     session=f"{host}-s{i // 5000}",
                     decision=("deny", "allow", "allow", "ask")[i % 4])
            batch.append(syslog.body(r) + b"\n")
            if len(batch) >= 10000:
                f.write(b"".join(batch))
                batch = []
        f.write(b"".join(batch))


PEAK = (
    "import resource, subprocess, sys\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, check=False)\n"
    "sys.stdout.buffer.write(p.stdout)\n"
    "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "raise SystemExit(p.returncode)\n"
)


def fleet_report(home: Path, repo: Path, m: int) -> tuple[float, float, float, float]:
    path = home / "central.jsonl"
    make_fleet(path, repo, m)
    size = path.stat().st_size
    base_cmd = [sys.executable, "-c",
                "import sys\nfrom guard.fleet.report import _loads\n"
                "n = 0\nfor line in open(sys.argv[1], 'rb'):\n    _loads(line); n += 1\n"
                "print(n)", str(path)]
    start = time.perf_counter()
    subprocess.run(base_cmd, check=True, capture_output=True)
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "guard", "review",
                           "--fleet", str(path), "--format", "json"],
                          capture_output=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        raise SystemExit(proc.stderr.decode()[-500:])
    doc = json.loads(proc.stdout)
    assert doc["records"] == m, doc["records"]
    peak_kb = int(proc.stderr.decode().strip().splitlines()[-1])
    return took, baseline, size / 1e9, peak_kb / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of the report")
    parser.add_argument("--ship", type=int, default=200_000, help="records shipped")
    parser.add_argument("--runs", type=int, default=40, help="hook calls of each kind")
    parser.add_argument("--quick", action="store_true", help="100k / 50k / 15 runs")
    args = parser.parse_args()
    if args.quick:
        args.records, args.ship, args.runs = 100_000, 50_000, 15
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        repo = home / "repo"
        (repo / "src").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        rate, base_rate, append_us = ship_rate(home, repo, args.ship)
        print(f"shipping: {args.ship} records, guard's shipper {rate:,.0f}/s; one sendall"
              f" of the same messages {base_rate:,.0f}/s; a spool append {append_us:.1f} us")
        plain, shipping, per_call = hook_latency(home, repo, args.runs)
        print(f"installed hook (median of {args.runs}): {plain * 1e3:.2f} ms without"
              f" [audit] syslog, {shipping * 1e3:.2f} ms with it; ship() per record in"
              f" process {per_call * 1e6:.1f} us = {per_call / plain * 100:.2f} % of the hook")
        took, baseline, gb, peak = fleet_report(home, repo, args.records)
        print(f"guard review --fleet: {args.records:,} records ({gb:.2f} GB) in {took:.2f} s;"
              f" reading and parsing them alone {baseline:.2f} s; peak memory of a process"
              f" (the largest of the report's processes) {peak:.0f} MB")
        print(f"ratio shipping rate guard/sendall: {rate / base_rate:.2f}"
              f" ({rate:,.0f}/s, goal >= 20,000/s)")
        print(f"ratio hook with/without shipping: {shipping / plain:.3f} (ship() alone"
              f" {per_call / plain * 100:.2f} % of the hook, goal <= 2 %)")
        print(f"ratio review/parse-only: {took / baseline:.2f} ({took:.2f} s, goal <= 10 s)")


if __name__ == "__main__":
    main()
