"""Benchmark `guard replay`: a generated Claude Code transcript of 10,000 tool calls.

Prints calls per second of the replay (every call decided through the gate) and of
just parsing the transcript (the reader alone), and, last, the ratio replay time /
parsing time (goal <= 3x). Both are measured in the same run, on the same file, so
the ratio holds on a loaded machine. ``--quick``: 2,000 calls, one round each.

    .venv/bin/python benchmarks/replay.py [--quick] [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from guard.replay.engine import replay
from guard.replay.readers import READERS

TOOLS = [
    ("Read", lambda r, i: {"file_path": f"{r}/src/m{i % 50}.py"}),
    ("Write", lambda r, i: {"file_path": f"{r}/src/new{i % 50}.py", "content": "x = 1\n"}),
    ("Bash", lambda r, i: {"command": f"sed -i 's/a/b/' src/m{i % 50}.py", "description": "e"}),
    ("Bash", lambda r, i: {"command": "ls src && git status --short", "description": "l"}),
    ("Edit", lambda r, i: {"file_path": f"{r}/src/m{i % 50}.py", "old_string": "a",
                           "new_string": "b"}),
    ("Write", lambda r, i: {"file_path": f"{r}/.openoxide/plans/p.md", "content": "# Plan\n"}),
    ("Grep", lambda r, i: {"pattern": "def ", "path": f"{r}/src"}),
]  # fmt: skip


def make_transcript(path: Path, repo: str, calls: int) -> None:
    """A transcript shaped like Claude Code's: an assistant tool_use, then its tool_result."""
    with path.open("w") as f:
        for i in range(calls):
            name, make = TOOLS[i % len(TOOLS)]
            base = {"isSidechain": False, "cwd": repo, "sessionId": "bench",
                    "timestamp": "2026-12-03T12:00:00.000Z", "version": "2.1.332"}
            f.write(json.dumps({**base, "type": "assistant", "message": {
                "role": "assistant", "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": name,
                     "input": make(repo, i)}]}}) + "\n")
            f.write(json.dumps({**base, "type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "ok"}]}}) + "\n")


def timed(run: Callable[[], int], rounds: int) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(rounds):
        t = time.perf_counter()
        n = run()
        best = min(best, time.perf_counter() - t)
    return best, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 calls, one round")
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args()
    calls = args.calls or (2_000 if args.quick else 10_000)
    rounds = args.rounds or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "src").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        os.environ.setdefault("XDG_DATA_HOME", str(Path(tmp) / "data"))
        path = Path(tmp) / "session.jsonl"
        make_transcript(path, str(repo.resolve()), calls)
        reader = READERS["claude-code"]

        def parse() -> int:
            return sum(1 for _ in reader.read(path))

        def decide() -> int:
            return sum(1 for _ in replay([path], host="claude-code"))

        def uncached() -> int:
            return sum(1 for _ in replay([path], host="claude-code", cache_size=0))

        distinct = len({json.dumps(c.input, sort_keys=True) for c in reader.read(path)})
        decide()  # warm: policy load, imports
        t_parse, n1 = timed(parse, rounds)
        t_replay, n2 = timed(decide, rounds)
        t_cold, n3 = timed(uncached, 1) if not args.quick else (float("nan"), calls)
    assert n1 == n2 == n3 == calls, (n1, n2, n3, calls)
    print(f"transcript: {calls} tool calls ({distinct} distinct), {path.name};"
          f" best of {rounds} round(s)")
    print(f"parse only: {t_parse:.3f} s  ({calls / t_parse:,.0f} calls/s)")
    if not args.quick:
        print(f"replay, every call decided afresh (no verdict cache): {t_cold:.3f} s"
              f"  ({calls / t_cold:,.0f} calls/s, {t_cold / t_parse:.2f}x parse)")
    print(f"replay:     {t_replay:.3f} s  ({calls / t_replay:,.0f} calls/s)")
    print(f"ratio replay/parse: {t_replay / t_parse:.2f}x (goal <= 3x)")


if __name__ == "__main__":
    main()
