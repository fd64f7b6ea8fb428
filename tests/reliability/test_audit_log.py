"""The audit log: whole records only, rotation without loss or duplicates, killed writers.

Real processes append concurrently (``spawn``ed, each its own interpreter);
the log on disk is then read back byte by byte.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guard.audit import AuditError, logfile
from guard.audit.logfile import MAX_BYTES_ENV

from .conftest import all_lines

WRITERS, RECORDS = 4, 250
LIMIT = 20_000


def _writer(path: str, n: int, who: int, limit: int) -> None:
    os.environ[MAX_BYTES_ENV] = str(limit)
    rng = random.Random(who)
    for i in range(n):
        logfile.append({"who": who, "i": i, "pad": "x" * rng.randrange(10, 900)}, Path(path))


def _reader(path: str, rounds: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    bad = []
    for _ in range(rounds):
        seen: dict[int, list[int]] = {}
        for r in logfile.read(Path(path)):
            seen.setdefault(r["who"], []).append(r["i"])
        for who, got in seen.items():
            if got != list(range(len(got))):  # every snapshot: a gap-free, repeat-free prefix
                bad.append((who, got[:10]))
    out.put(bad)


def test_rotation_under_concurrent_writers_loses_and_repeats_nothing(tmp_path: Path) -> None:
    log = tmp_path / "audit" / "p.jsonl"
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [
        ctx.Process(target=_writer, args=(str(log), RECORDS, w, LIMIT)) for w in range(WRITERS)
    ]
    reader = ctx.Process(target=_reader, args=(str(log), 40, results))
    for p in [*procs, reader]:
        p.start()
    for p in [*procs, reader]:
        p.join(timeout=600)
        assert p.exitcode == 0
    assert results.get(timeout=10) == []
    parts = logfile.rotated(log)
    assert len(parts) >= 10, "the test must rotate many times"
    assert [p.name for p in parts] == [f"p.jsonl.{n}" for n in range(1, len(parts) + 1)]
    for part in [*parts, log]:
        assert part.stat().st_size <= LIMIT
    records = list(logfile.read(log))
    assert len(records) == WRITERS * RECORDS
    assert len(all_lines(log)) == WRITERS * RECORDS
    for w in range(WRITERS):
        assert [r["i"] for r in records if r["who"] == w] == list(range(RECORDS))


def test_rotation_size_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "a.jsonl"
    monkeypatch.setenv(MAX_BYTES_ENV, "0")
    for i in range(50):
        logfile.append({"i": i, "pad": "y" * 1000}, log)
    assert logfile.rotated(log) == []  # 0: never
    monkeypatch.setenv(MAX_BYTES_ENV, "10k")
    with pytest.raises(AuditError, match="GUARD_AUDIT_MAX_BYTES"):
        logfile.append({"i": 50}, log)
    monkeypatch.setenv(MAX_BYTES_ENV, "5000")
    logfile.append({"i": 50}, log)
    assert [p.name for p in logfile.rotated(log)] == ["a.jsonl.1"]
    assert [r["i"] for r in logfile.read(log)] == list(range(51))


def test_a_hook_decision_fails_closed_when_the_audit_log_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from guard.hooks.front_door import decide

    repo = tmp_path / "r"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.setenv(MAX_BYTES_ENV, "not a size")
    payload = {
        "session_id": "s",
        "cwd": str(repo),
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": str(repo / "src" / "a.py")},
    }
    answer = decide("claude-code", json.dumps(payload), agent="build")
    assert answer.exit_code == 2 and "GUARD_AUDIT_MAX_BYTES" in answer.stderr


KILLED_WRITER = """
import sys
from pathlib import Path
from guard.audit import logfile
i = 0
pad = "z" * 50000  # a dozen pages: a SIGKILL can stop the kernel's copy between pages
while True:
    logfile.append({"who": int(sys.argv[2]), "i": i, "pad": pad}, Path(sys.argv[1]))
    i += 1
"""


def test_writers_killed_mid_append_leave_no_torn_record(tmp_path: Path) -> None:
    """SIGKILL writers at random moments; after each round a fresh append, then read it all."""
    log = tmp_path / "audit" / "k.jsonl"
    rng = random.Random(16)
    env = {**os.environ, MAX_BYTES_ENV: "2000000"}
    for round_ in range(12):
        procs = [
            subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(log), str(w)], env=env)
            for w in range(3)
        ]
        time.sleep(rng.uniform(0.3, 1.5))
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait()
        logfile.append({"who": "restart", "i": round_}, log)  # guard starting again
        records = list(logfile.read(log))  # raises on any torn line
        assert records[-1] == {**records[-1], "who": "restart", "i": round_}
        for line in all_lines(log):
            json.loads(line)
    for who in range(3):
        got = [r["i"] for r in logfile.read(log) if r["who"] == who]
        # each round's writer starts at 0 again: within a round, whole and in order
        for a, b in itertools.pairwise(got):
            assert b in (a + 1, 0)


def test_the_next_append_removes_a_dead_writers_torn_tail(tmp_path: Path) -> None:
    """What a writer killed inside write(2) leaves: part of a record and no newline."""
    log = tmp_path / "t.jsonl"
    logfile.append({"i": 0}, log)
    with log.open("ab") as fh:
        fh.write(logfile.encode({"i": "torn", "pad": "p" * 9000})[:4096])
    logfile.append({"i": 1}, log)
    assert log.read_bytes().endswith(b"\n")
    assert [r["i"] for r in logfile.read(log)] == [0, 1]


def test_a_sinks_batch_lands_whole_in_order_and_chained(tmp_path: Path) -> None:
    """AuditLog.write_many (the monitor's flush): the records of a batch follow what was
    there, in order, each with its place in the chain, as one write would put them."""
    from guard.audit import verify
    from guard.audit.chain import load_key
    from guard.audit.sinks import AuditLog

    log = tmp_path / "audit.jsonl"
    sink = AuditLog(log)
    sink.write({"type": "notice", "n": 0})
    batch = [{"type": "notice", "n": i} for i in range(1, 5)]
    sink.write_many(batch)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["n"] for r in lines] == [0, 1, 2, 3, 4]
    assert [r["chain_seq"] for r in batch] == [r["chain_seq"] for r in lines[1:]]
    assert verify.verify(log, load_key()).intact
