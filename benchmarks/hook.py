"""Benchmark: the wall time of one `guard hook claude-code` call, next to a bare interpreter start.

Runs the hook exactly as Claude Code runs it once `guard install` wired it
(the installed command: guard's hook client answered by the warm hook daemon,
a Write payload on stdin, the shipped policy, a real git worktree),
interleaved with ``python -c pass`` on the same interpreter, and prints the
medians and their ratio, last. Also shown, not compared: the in-process path
(``python -I -m guard.hooks``, what a call costs when no daemon runs)
``import guard`` alone, the standard modules the hook client imports (its
start-up beyond a bare interpreter), and the hook daemon's CPU time per call.

    python benchmarks/hook.py [--runs N] [--quick]

``--quick``: 10 runs of each command instead of 30 (the same figures, more noise).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from guard.setup.install import hook_command


def timed(cmd: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, cwd=cwd, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each command (default 30)")
    parser.add_argument("--quick", action="store_true", help="10 runs of each command")
    args = parser.parse_args()
    if args.quick:
        args.runs = 10

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "src").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
        env["HOME"] = str(Path(tmp) / "home")
        # Claude Code names its transcript: guard reads what was added since its last look
        # (guard.hooks.missed), so the figure includes that check
        transcript = Path(tmp) / "transcript.jsonl"
        transcript.write_text('{"type": "user", "message": {"content": "hi"}}\n')
        payload = json.dumps(
            {
                "session_id": "bench",
                "transcript_path": str(transcript),
                "cwd": str(repo),
                "permission_mode": "acceptEdits",
                "hook_event_name": "PreToolUse",
                "tool_name": "Write",
                "tool_input": {"file_path": str(repo / "src/app.py"), "content": "x = 1\n"},
                "tool_use_id": "toolu_bench",
            }
        ).encode()
        py = sys.executable
        hook = ["/bin/sh", "-c", hook_command("claude-code", agent="plan")]
        inproc = [py, "-I", "-m", "guard.hooks", "claude-code", "--agent", "plan"]
        bare = [py, "-c", "pass"]
        imp = [py, "-I", "-c", "import guard"]
        client_imports = [py, "-I", "-c", f"import {', '.join(CLIENT_IMPORTS)}"]
        try:
            # warm-up: byte-code caches, page cache, and the hook daemon
            for cmd in (hook, inproc, bare, imp, client_imports):
                timed(cmd, payload, repo, env)
            if not wait_for_daemon(hook, payload, repo, env):
                print("warning: the hook daemon did not come up; timing the in-process path")
            out = subprocess.run(hook, input=payload, capture_output=True, cwd=repo, env=env)
            answer = json.loads(out.stdout)["hookSpecificOutput"]["permissionDecision"]
            names = ("hook", "inproc", "bare", "import", "client_imports")
            times: dict[str, list[float]] = {name: [] for name in names}
            daemon_cpu = 0.0
            for _ in range(args.runs):
                times["bare"].append(timed(bare, b"", repo, env))
                before = hookd_cpu(Path(env["HOME"]))
                times["hook"].append(timed(hook, payload, repo, env))
                daemon_cpu += hookd_cpu(Path(env["HOME"])) - before
                times["inproc"].append(timed(inproc, payload, repo, env))
                times["import"].append(timed(imp, b"", repo, env))
                times["client_imports"].append(timed(client_imports, b"", repo, env))
        finally:
            stop_daemon(Path(env["HOME"]))
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"runs per command: {args.runs}; hook answered: {answer}; load average"
          f" {os.getloadavg()[0]:.1f}")
    print(f"in-process `python -I -m guard.hooks`: median {med['inproc']:.1f} ms")
    print(f"`python -I -c 'import guard'`:                median {med['import']:.1f} ms")
    print(f"the hook client's standard imports alone:     median {med['client_imports']:.1f} ms")
    per_call = daemon_cpu / args.runs * 1000
    print(f"hook daemon CPU per call (user + system):     mean {per_call:.1f} ms")
    print(f"bare `python -c pass`:                        median {med['bare']:.1f} ms")
    print(f"installed hook (client + hookd), Write:       median {med['hook']:.1f} ms")
    print(
        f"ratio installed hook / bare interpreter: {med['hook'] / med['bare']:.2f}x"
        " (target <= 1.5x)"
    )


# what the hook client (guard/hooks/hookclient.py) imports on the daemon path:
# C modules, besides what the interpreter has loaded anyway (every call pays for them)
CLIENT_IMPORTS = (
    "_json",
    "_socket",
    "_sha256" if sys.version_info < (3, 12) else "_sha2",
    "os",
    "stat",
    "sys",
)


def hookd_cpu(home: Path) -> float:
    """CPU seconds (user + system) the benchmark's hook daemon has used so far (0 if none)."""
    for pidfile in (home / ".local/share/openoxide/run").glob("hookd-*.pid"):
        try:
            pid = int(pidfile.read_text().strip())
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def wait_for_daemon(hook: list[str], payload: bytes, repo: Path, env: dict[str, str]) -> bool:
    traced = {**env, "GUARD_HOOK_TRACE": "1"}
    for _ in range(100):
        proc = subprocess.run(hook, input=payload, capture_output=True, cwd=repo, env=traced)
        if b"answered by hookd" in proc.stderr:
            return True
        time.sleep(0.2)
    return False


def stop_daemon(home: Path) -> None:
    """Stop the hook daemon this benchmark started (by the pid it recorded)."""
    for pidfile in (home / ".local/share/openoxide/run").glob("hookd-*.pid"):
        try:
            pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            continue
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


if __name__ == "__main__":
    main()
