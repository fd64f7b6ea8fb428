"""Benchmark and fault test: installed-hook calls under load while hookd is SIGKILLed.

Runs N hook calls (default 1,000), P at a time (default 16), each exactly as
Claude Code runs the installed hook (guard's hook client, a PreToolUse payload
on stdin, the shipped policy's plan agent, a real git worktree). Meanwhile
the hook daemon is SIGKILLed at random moments (one kill per 50 calls by
default); the clients start a new daemon, or decide in-process. Every payload is distinct (its
path carries the call's number), and every answer is checked: a block (exit
2) or exactly the decision the policy gives for *that* payload, naming that
payload's path. Prints the latency p50/p99 of all calls, last.

    python benchmarks/hook_chaos.py [--calls N] [--parallel P] [--seed S] [--kills K]

Exits 1 when any call got a wrong, missing or foreign answer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).resolve().parents[1] / "guard" /  "hooks"/ "_client.py"


@dataclass
class Call:
    index: int
    kind: str  # write-src | write-plan | read
    expected: str  # the decision the plan agent gives
    token: str  # unique to this payload, appears in the path and so in the reason
    seconds: float = 0.0
    exit_code: int = -1
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None

    @property
    def by_daemon(self) -> bool:
        return "answered by hookd" in self.stderr

    @property
    def daemon_pid(self) -> int | None:
        for line in self.stderr.splitlines():
            if line.startswith("guard hook: answered by hookd pid "):
                return int(line.rsplit(" ", 1)[1])
        return None


@dataclass
class Report:
    calls: list[Call]
    kills: int
    seconds: float
    audit_records: int = 0
    problems: list[str] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        times = sorted(c.seconds for c in self.calls)
        return times[min(len(times) - 1, round(q * (len(times) - 1)))]

    def summary(self) -> str:
        n = len(self.calls)
        by_daemon = sum(c.by_daemon for c in self.calls)
        blocked = sum(c.exit_code == 2 for c in self.calls)
        daemons = len({c.daemon_pid for c in self.calls} - {None})
        return (
            f"{n} calls in {self.seconds:.1f}s with {self.kills} SIGKILLs of hookd: "
            f"{by_daemon} answered by hookd ({daemons} daemons in turn), "
            f"{n - by_daemon} in-process, {blocked} blocked, "
            f"{len(self.problems)} wrong or lost\n"
            f"latency p50 {self.percentile(0.5) * 1000:.0f} ms, "
            f"p99 {self.percentile(0.99) * 1000:.0f} ms "
            f"(median {statistics.median(c.seconds for c in self.calls) * 1000:.0f} ms)"
        )


def payload_for(index: int, repo: Path) -> tuple[dict[str, Any], Call]:
    token = f"n{index:05d}x"
    kind = ("write-src", "write-plan", "read")[index % 3]
    if kind == "write-src":
        tool, tool_input, expected = "Write", {"file_path": f"{repo}/src/{token}.py"}, "deny"
        tool_input["content"] = token
    elif kind == "write-plan":
        path = f"{repo}/.openoxide/plans/{token}.md"
        tool, tool_input, expected = "Write", {"file_path": path, "content": token}, "allow"
    else:
        tool, tool_input, expected = "Read", {"file_path": f"{repo}/src/{token}.py"}, "allow"
    payload = {
        "session_id": f"chaos-{index}",
        "transcript_path": str(repo / "transcript.jsonl"),
        "cwd": str(repo),
        "permission_mode": "acceptEdits",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": f"toolu_{token}",
    }
    return payload, Call(index, kind, expected, token)


def check(call: Call) -> str | None:
    """Why this call's answer is wrong, or None when it is a block or the right decision."""
    if call.exit_code == 2:
        return None if "guard" in call.stderr else f"exit 2 without guard's reason: {call.stderr!r}"
    if call.exit_code != 0:
        return f"exit {call.exit_code}: {call.stderr[-300:]!r}"
    try:
        out = json.loads(call.stdout)["hookSpecificOutput"]
        decision, reason = out["permissionDecision"], out["permissionDecisionReason"]
    except (ValueError, KeyError, TypeError):
        return f"exit 0 without a hook answer: {call.stdout[:300]!r}"
    if decision != call.expected:
        return f"{decision} where the policy says {call.expected}: {reason}"
    if call.token not in reason:
        return f"answered for another payload: {reason}"
    return None


def daemon_pids(home: Path) -> list[int]:
    pids = []
    for pidfile in (home / ".local/share/openoxide/run").glob("hookd-*.pid"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(pidfile.read_text().strip())
            if b"guard.hooks.hookd" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)  # never a recycled pid of something else
    return pids


def chaos(
    home: Path,
    repo: Path,
    env: dict[str, str],
    *,
    calls: int = 1000,
    parallel: int = 16,
    seed: int = 20261203,
    kills: int | None = None,
) -> Report:
    """Run the calls while hookd is SIGKILLed at random moments; check every answer.

    The kills (default: one per 50 calls) are tied to calls, not to the clock,
    so a slow machine gets as many faults as a fast one: when a chosen call
    starts, a timer SIGKILLs every daemon 0-200 ms later, while other calls
    are in flight.
    """
    rng = random.Random(seed)
    run_env = {**env, "HOME": str(home), "GUARD_AGENT": "plan", "GUARD_HOOK_DAEMON": "1"}
    run_env["GUARD_HOOK_TRACE"] = "1"
    wanted = max(3, calls // 50) if kills is None else kills
    triggers = set(rng.sample(range(calls), min(wanted, calls)))
    delays = {i: rng.uniform(0.0, 0.2) for i in sorted(triggers)}
    killed: list[int] = []
    timers: list[threading.Timer] = []

    def kill_all() -> None:
        for pid in daemon_pids(home):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    def one(index: int) -> Call:
        if index in triggers:
            timer = threading.Timer(delays[index], kill_all)
            timers.append(timer)
            timer.start()
        payload, call = payload_for(index, repo)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-I", str(CLIENT), "claude-code"],
                input=json.dumps(payload).encode(),
                capture_output=True,
                cwd=repo,
                env=run_env,
                timeout=300,
                check=False,
            )
        except subprocess.TimeoutExpired:
            call.problem = "no answer within 300 s"
            return call
        call.seconds = time.perf_counter() - start
        call.exit_code = proc.returncode
        call.stdout = proc.stdout.decode("utf-8", "replace")
        call.stderr = proc.stderr.decode("utf-8", "replace")
        call.problem = check(call)
        return call

    start = time.perf_counter()
    try:
        with ThreadPoolExecutor(parallel) as pool:
            results = list(pool.map(one, range(calls)))
    finally:
        for timer in timers:
            timer.join()
    report = Report(results, len(killed), time.perf_counter() - start)
    report.problems = [f"call {c.index} ({c.kind}): {c.problem}" for c in results if c.problem]
    report.audit_records = audit_check(home, results, report.problems)
    return report


def audit_check(home: Path, calls: list[Call], problems: list[str]) -> int:
    """Every line of the audit logs is a whole record; every decided call is recorded."""
    logs = sorted((home / ".local/share/openoxide/audit").glob("*.jsonl*"))
    seen: set[str] = set()
    count = 0
    for log in logs:
        for number, raw in enumerate(log.read_bytes().splitlines(keepends=True), start=1):
            if not raw.endswith(b"\n"):
                problems.append(f"{log}:{number}: torn record (no newline): {raw[:80]!r}")
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                problems.append(f"{log}:{number}: torn record: {raw[:80]!r}")
                continue
            count += 1
            seen.add(json.dumps(record, sort_keys=True))
    text = "\n".join(seen)
    for call in calls:
        if call.exit_code == 0 and call.token not in text:
            problems.append(f"call {call.index}: decided but not in the audit log")
    return count


def stop(home: Path) -> None:
    for pid in daemon_pids(home):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / ".openoxide" / "plans").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hello')\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo.resolve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--kills", type=int, default=None, help="default: one per 50 calls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        repo = make_repo(Path(tmp))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
        try:
            report = chaos(
                home,
                repo,
                env,
                calls=args.calls,
                parallel=args.parallel,
                seed=args.seed,
                kills=args.kills,
            )
        finally:
            stop(home)
    for problem in report.problems[:20]:
        print("PROBLEM", problem)
    print(f"audit: {report.audit_records} whole records, no torn line")
    print(report.summary())
    sys.exit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
