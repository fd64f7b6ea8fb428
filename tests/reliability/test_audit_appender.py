"""logfile.Appender (the MCP proxy's kept-open logs): rotation, torn tails, removed files.

The appender keeps its descriptor open between batches, so each test makes the
path name another file behind its back, for real (other processes rotating the
log, a dead writer's torn tail, a removed event log), and reads the disk back.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import threading
from pathlib import Path

import pytest

from guard.audit import chain, logfile, verify
from guard.audit.buffered import BufferedWriter
from guard.audit.logfile import MAX_BYTES_ENV, Appender

from .conftest import all_lines

WRITERS, RECORDS = 4, 250
LIMIT = 20_000


def _appending_writer(path: str, n: int, who: int, limit: int) -> None:
    os.environ[MAX_BYTES_ENV] = str(limit)
    rng = random.Random(who)
    log = Appender(Path(path))
    for i in range(n):
        log.append(logfile.encode_many([{"who": who, "i": i, "pad": "x" * rng.randrange(10, 900)}]))
    log.close()




def test_appenders_that_keep_the_log_open_lose_and_repeat_nothing_across_rotations(
    tmp_path: Path,
) -> None:
    """Attack: writers rotate the log while others hold the old file open; a record
    written to the renamed file after a rotation would land out of order or twice."""
    log = tmp_path / "audit.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_appending_writer, args=(str(log), RECORDS, w, LIMIT))
        for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    assert len(logfile.rotated(log)) > 5, "the test must have rotated the log several times"
    seen: dict[int, list[int]] = {}
    for line in all_lines(log):
        record = json.loads(line)
        seen.setdefault(record["who"], []).append(record["i"])
    assert {w: seen.get(w) for w in range(WRITERS)} == {
        w: list(range(RECORDS)) for w in range(WRITERS)
    }
    chained = verify.verify(log, chain.load_key(create=False))  # one chain, every writer's
    assert chained.intact and chained.records == WRITERS * RECORDS, chained.findings[:3]


def test_an_appender_writes_to_the_new_file_after_another_writer_rotated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.jsonl"
    first = logfile.encode_many([{"n": 1, "pad": "x" * 200}])
    mine = Appender(log)
    mine.append(first)
    # the limit: one and a half chained records of this size
    monkeypatch.setenv(MAX_BYTES_ENV, str(log.stat().st_size * 3 // 2))
    logfile.append_many([{"n": 2, "pad": "x" * 200}], log)  # another writer: rotates first
    mine.append(logfile.encode_many([{"n": 3}]))
    mine.close()
    parts = [
        [json.loads(x)["n"] for x in p.read_bytes().splitlines()] for p in logfile.rotated(log)
    ]
    assert parts == [[1]]
    assert [json.loads(x)["n"] for x in log.read_bytes().splitlines()] == [2, 3]


def test_an_appender_removes_a_dead_writers_torn_tail_before_its_record(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    mine = Appender(log)
    mine.append(logfile.encode_many([{"n": 1}]))
    with open(log, "ab") as other:  # what a writer killed inside its write(2) leaves
        other.write(b'{"n": 2, "pad": "half a rec')
    mine.append(logfile.encode_many([{"n": 3}]))
    mine.close()
    assert [json.loads(x)["n"] for x in log.read_bytes().splitlines()] == [1, 3]


def test_an_event_log_removed_under_an_appender_is_written_again_at_its_path(
    tmp_path: Path,
) -> None:
    """A record written to the open descriptor of a removed file would be lost."""
    events = tmp_path / "s.events.jsonl"
    mine = Appender(events, audit=False)
    mine.append(b'{"n":1}\n')
    events.unlink()
    mine.append(b'{"n":2}\n')
    mine.close()
    assert events.read_bytes() == b'{"n":2}\n'
    assert oct(events.stat().st_mode & 0o777) == "0o644"


def test_drain_on_the_owners_thread_and_the_writer_thread_keep_the_order(tmp_path: Path) -> None:
    """Attack: the owner drains the queue while the writer thread writes a batch; a batch
    written out of turn would put records out of order (and mark later ones written)."""
    log = tmp_path / "a.jsonl"
    appender = Appender(log)

    def persist(batch: list[dict[str, object]]) -> tuple[list[str | None], set[Path]]:
        appender.append(logfile.encode_many(batch))
        return [None] * len(batch), {log}

    writer: BufferedWriter[dict[str, object]] = BufferedWriter(persist)
    writer.start()
    stop = threading.Event()

    def drainer() -> None:
        while not stop.is_set():
            writer.drain()

    other = threading.Thread(target=drainer)
    other.start()
    try:
        for i in range(3000):
            writer.submit({"i": i}, wake=i % 3 == 0)
            if i % 7 == 0:
                writer.drain()
    finally:
        stop.set()
        other.join()
    assert writer.close()
    assert [r["i"] for r in logfile.read(log)] == list(range(3000))


def test_an_audit_log_replaced_under_an_appender_gets_the_record_after_its_own_last(
    tmp_path: Path,
) -> None:
    """Another file renamed over the log (longer than the one the appender had open): the
    appender's batch goes to the file now at the path, after its last record, chained to
    it (the size comes from the path's lstat once it names the open file)."""
    log = tmp_path / "audit.jsonl"
    mine = Appender(log)
    mine.append(logfile.encode_many([{"n": 1}]))
    other = tmp_path / "other.jsonl"
    logfile.append_many([{"n": 10, "pad": "x" * 300}, {"n": 11}], other)
    os.rename(other, log)
    mine.append(logfile.encode_many([{"n": 12}]))
    mine.append(logfile.encode_many([{"n": 13}]))
    mine.close()
    assert [json.loads(x)["n"] for x in log.read_bytes().splitlines()] == [10, 11, 12, 13]
    chained = verify.verify(log, chain.load_key(create=False))
    assert chained.intact and chained.records == 4, chained.findings[:3]
