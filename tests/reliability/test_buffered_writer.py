"""buffered.BufferedWriter: order, batches, flush on close and at exit, failures reported.

Real files, a real writer thread; a full disk is a real small tmpfs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from guard.audit import AuditError, logfile
from guard.audit.buffered import BufferedWriter

from .faults import fill, small_disk


def log_writer(path: Path) -> BufferedWriter[dict[str, object]]:
    def persist(batch: list[dict[str, object]]) -> tuple[list[str | None], set[Path]]:
        try:
            logfile.append_many(batch, path)
        except AuditError as exc:
            return [str(exc)] * len(batch), set()
        return [None] * len(batch), {path}

    return BufferedWriter(persist)


def test_records_are_written_in_order_and_close_writes_them_all(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    writer = log_writer(log)
    writer.start()
    seqs = [writer.submit({"i": i}) for i in range(500)]
    assert seqs == list(range(1, 501))
    assert writer.close()
    assert [r["i"] for r in logfile.read(log)] == list(range(500))
    assert writer.written == 500 and writer.failure(1) is None


def test_ready_wakes_the_owner_once_the_record_is_written(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    woken = threading.Event()
    writer = log_writer(log)
    writer.start(woken.set)
    seq = writer.submit({"i": 1}, wake=False)  # the writer sleeps until kicked or asked
    if not writer.ready(seq):
        assert woken.wait(30)
    assert writer.ready(seq)
    assert [r["i"] for r in logfile.read(log)] == [1]
    writer.close()


def test_a_record_that_cannot_be_written_is_reported_and_the_writer_goes_on(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        log = disk / "a.jsonl"
        writer = log_writer(log)
        writer.start()
        first = writer.submit({"i": 0})
        assert writer.flush(30)
        fill(disk)
        big = writer.submit({"i": 1, "pad": "x" * 40000})
        assert writer.flush(30)
        failed = writer.failure(big)
        assert failed is not None and "No space left on device" in failed
        assert writer.broken is not None and writer.failure(first) is None
        for filler in disk.glob("filler-*"):
            filler.unlink()
        writer.write_now({"i": 2})  # on the caller's path; a success clears the failure
        assert writer.broken is None
        writer.close()
        assert [r["i"] for r in logfile.read(log)] == [0, 2]
        assert log.read_bytes().endswith(b"\n")


EXITS = """
import sys
from pathlib import Path
from guard.audit import logfile
from guard.audit.buffered import BufferedWriter
log = Path(sys.argv[1])
def persist(batch):
    logfile.append_many(batch, log)
    return [None] * len(batch), {log}
writer = BufferedWriter(persist)
writer.start()
for i in range(2000):
    writer.submit({"i": i}, wake=False)
sys.exit(0)  # no close(): the atexit hook must write them
"""


def test_records_queued_at_exit_are_written_by_the_atexit_hook(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    subprocess.run([sys.executable, "-c", EXITS, str(log)], check=True, timeout=120)
    lines = log.read_text().splitlines()
    assert [json.loads(line)["i"] for line in lines] == list(range(2000))
