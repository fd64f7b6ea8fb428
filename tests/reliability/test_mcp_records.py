"""The MCP proxy's verdict records: written off the request path, never lost.

The proxy queues each verdict record for a writer thread
(:class:`guard.audit.buffered.BufferedWriter`) and holds the answer of a checked call
until its record is written. These tests run the real `guard mcp` with the real
filesystem server and check the disk afterwards:

* SIGKILL at a random moment while calls stream in: every answer the client got
  has its record in the audit log and in the session's event log, and no log
  line is torn;
* SIGTERM (and SIGINT) in the middle of a stream: every call the proxy decided
  is recorded before it exits;
* a full disk: the answer whose record cannot be written is withheld, the next
  call is refused before it reaches the server, and calls go through again once
  there is room;
* a mode change (an approved plan exit from another process) applies from the
  very next call, although the proxy keeps the agent choice.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from guard.audit import logfile
from guard.paths import Roots
from guard.planning.session import Session

from .faults import fill, small_disk

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "mcp"))

from fsserver import served_project  # noqa: E402
from rawclient import RawClient  # noqa: E402


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return served_project(tmp_path)


def call(msg_id: int, name: str, arguments: dict[str, Any]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(message).encode() + b"\n"


def missing(project: Path, i: int) -> str:
    """A path unique to call ``i`` (a read the plan agent allows; the server says ENOENT)."""
    return str(project / "src" / f"missing-{i}.txt")


def whole_lines(path: Path) -> list[dict[str, Any]]:
    """The log's records; a torn last line (a writer killed inside write(2)) is not one."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    return [json.loads(line) for line in lines[:-1] if line.strip()]


def audit_targets(project: Path) -> set[str]:
    log = logfile.default_log_path(Roots.discover(project))
    out = set()
    for record in whole_lines(log):
        effect = record.get("effect")
        if record.get("source") == "mcp" and isinstance(effect, dict):
            out.add(str(effect.get("target")))
    return out


def event_targets(project: Path) -> set[str]:
    out = set()
    for session in Session.list_all(project):
        for event in whole_lines(session.events_path):
            effect = event.get("effect")
            if event.get("type") == "decision" and isinstance(effect, dict):
                out.add(str(effect.get("target")))
    return out


def finish(client: RawClient) -> None:
    """Close a client whose proxy may be dead already (its stdin pipe broken)."""
    with contextlib.suppress(OSError):
        if client.proc.stdin is not None:
            client.proc.stdin.close()
    client.close()


class Stream:
    """A client that keeps :data:`WINDOW` read calls in flight and collects the answers."""

    WINDOW = 8

    def __init__(self, client: RawClient, project: Path) -> None:
        self.client = client
        self.project = project
        self.answered: list[int] = []
        self.sent = 0
        self._stop = threading.Event()
        self._window = threading.Semaphore(self.WINDOW)
        self._sender = threading.Thread(target=self._send, daemon=True)
        self._reader = threading.Thread(target=self._read, daemon=True)

    def start(self) -> None:
        self._sender.start()
        self._reader.start()

    def _send(self) -> None:
        i = 100
        while not self._stop.is_set():
            if not self._window.acquire(timeout=0.1):
                continue
            try:
                self.client.send_raw(call(i, "read_text_file", {"path": missing(self.project, i)}))
            except (OSError, ValueError):
                return
            self.sent += 1
            i += 1

    def _read(self) -> None:
        while True:
            line = self.client.lines.get()
            if line is None:
                return
            message = json.loads(line)
            if isinstance(message.get("id"), int) and "result" in message:
                self.answered.append(message["id"])
                self._window.release()

    def wait_for_answers(self, count: int, timeout: float = 60) -> None:
        """Until ``count`` answers came back: calls are streaming (a loaded machine may take
        seconds to start the proxy and the server)."""
        deadline = time.monotonic() + timeout
        while len(self.answered) < count:
            assert time.monotonic() < deadline, f"{len(self.answered)} answers in {timeout} s"
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._sender.join(30)
        self._reader.join(60)


def test_sigkill_never_leaves_an_answered_call_unrecorded(
    fs_server: Path, project: Path
) -> None:
    """Crash: SIGKILL the proxy at random moments while calls stream in. The guarantee: the
    client never holds an answer whose verdict is missing from the audit log or the session's
    event log (records not yet written die with the process, and so do their answers)."""
    rng = random.Random(17)
    total = 0
    for _ in range(3):
        client = RawClient([], project, [str(fs_server), str(project)])
        client.initialize()
        stream = Stream(client, project)
        stream.start()
        stream.wait_for_answers(1)
        time.sleep(rng.uniform(0, 1.2))  # then a random moment of the stream
        client.proc.send_signal(signal.SIGKILL)
        client.proc.wait(30)
        stream.stop()
        finish(client)
        assert stream.answered, client.stderr()
        total += len(stream.answered)
        in_audit, in_events = audit_targets(project), event_targets(project)
        for i in stream.answered:
            assert missing(project, i) in in_audit, f"answered call {i} has no audit record"
            assert missing(project, i) in in_events, f"answered call {i} has no decision event"
    assert total > 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_terminated_proxy_writes_every_record_before_it_exits(
    fs_server: Path, project: Path, signum: int
) -> None:
    """Every call the proxy decided before SIGTERM/SIGINT is recorded when it has exited."""
    client = RawClient([], project, [str(fs_server), str(project)])
    client.initialize()
    stream = Stream(client, project)
    stream.start()
    stream.wait_for_answers(Stream.WINDOW)  # mid-stream: calls answered, more in flight
    client.proc.send_signal(signum)
    code = client.proc.wait(60)
    stream.stop()
    err = client.stderr()
    finish(client)
    assert code == 128 + signum, err
    assert "Traceback" not in err, err
    assert f"{signal.Signals(signum).name}: shutting down" in err
    decided = [line for line in err.splitlines() if "calls allowed" in line]
    assert decided, err
    allowed = int(decided[-1].split(" calls allowed")[0].rsplit(" ", 1)[1])
    assert allowed >= len(stream.answered) > 0
    in_audit, in_events = audit_targets(project), event_targets(project)
    reads = {t for t in in_audit if "/missing-" in t}
    assert len(reads) == allowed  # each decided call once, none lost, none doubled
    assert reads <= in_events


def test_full_disk_withholds_the_answer_then_refuses_until_there_is_room(
    fs_server: Path, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault: the disk holding the audit log fills up mid-session."""
    with small_disk(tmp_path / "data", "1m") as disk:
        monkeypatch.setenv("XDG_DATA_HOME", str(disk))
        client = RawClient([], project, [str(fs_server), str(project)])
        try:
            client.initialize()
            first = client.call("read_text_file", {"path": str(project / "src/app.py")}, 1)
            assert first["result"].get("isError") is not True, first
            fill(disk)
            # a record longer than a page: it cannot go into the log's last, partly used page
            deep = str(project / "src" / "/".join(["d" * 200] * 15) / "x.py")
            second = client.call("read_text_file", {"path": deep}, 2)
            text = second["result"]["content"][0]["text"]
            assert second["result"]["isError"] is True
            assert "could not record its verdict" in text and "withheld" in text, text
            assert "ENOENT" not in text  # the server's answer never reached the client
            third = client.call("read_text_file", {"path": deep}, 3)
            text = third["result"]["content"][0]["text"]
            assert third["result"]["isError"] is True
            assert "audit log could not record the verdict" in text, text
            for filler in disk.glob("filler-*"):
                filler.unlink()
            fourth = client.call("read_text_file", {"path": str(project / "src/app.py")}, 4)
            assert fourth["result"].get("isError") is not True, fourth
            assert "hello" in fourth["result"]["content"][0]["text"]
        finally:
            client.close()
        log = logfile.default_log_path(Roots.discover(project))
        records = whole_lines(log)
        assert log.read_bytes().endswith(b"\n")
        assert [r["decision"] for r in records if r.get("source") == "mcp"] == [
            "allow",
            "allow",
        ]  # the first call and the fourth; nothing half-written in between


def test_a_mode_change_applies_from_the_next_call(fs_server: Path, project: Path) -> None:
    """The proxy keeps its agent choice between calls; an approved plan exit made by another
    process must still change the verdict of the very next call."""
    target = project / "src" / "new.py"
    client = RawClient([], project, [str(fs_server), str(project)])
    try:
        client.initialize()
        refused = client.call("write_file", {"path": str(target), "content": "x = 1\n"}, 1)
        assert refused["result"]["isError"] is True
        assert not target.exists()
        [session] = Session.list_all(project)
        assert session.mode.value == "plan" and session.plan_path
        Path(session.plan_path).write_text("# plan\n\nAdd src/new.py.\n")
        approve = subprocess.run(
            [sys.executable, "-m", "guard", "plan", "exit", "--approve", "--session", session.id],
            cwd=project,
            capture_output=True,
            text=True,
            env=os.environ.copy(),
            timeout=120,
            check=False,
        )
        assert approve.returncode == 0, approve.stderr
        allowed = client.call("write_file", {"path": str(target), "content": "x = 1\n"}, 2)
        assert allowed["result"].get("isError") is not True, allowed
        assert target.read_text() == "x = 1\n"
    finally:
        client.close()
