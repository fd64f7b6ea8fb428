"""Shipping to real rsyslog: guard -> edge rsyslogd (TCP or Unix socket) -> RELP with a
disk-assisted queue -> central rsyslogd writing JSON lines (docs/fleet.md).

Every wait is on a condition (a file's content, a port, the spool), never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.audit import logfile
from guard.audit.sinks import AuditLog
from guard.effects import Effect, ToolCall
from guard.fleet.records import missing
from guard.fleet.syslog import Target, spool_dir
from guard.gate import Gate
from guard.setup.install import hook_command

from .rsyslog import Rsyslogd, central_config, edge_config, free_port, listening, omrelp, wait_for


def stop_shippers(data: Path) -> None:
    """Stop the shippers of the test: those this process started (they may not have
    written their pid file yet), then any other (started by hookd) by its pid file."""
    from guard.fleet import syslog

    for sp in list(syslog._spools.values()):
        proc = sp._started
        if proc is not None and proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
    import fcntl
    import time

    for spool in (data / "openoxide" / "spool").glob("*"):
        # a shipper another writer started may take the lock once the first is gone:
        # stop whoever holds it until nobody does
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            fd = os.open(spool / "lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int((spool / "shipper.pid").read_text()), signal.SIGTERM)
                time.sleep(0.1)
                continue
            finally:
                os.close(fd)
            time.sleep(1.2)  # a shipper still waiting for the lock gives up after 1 s
            fd = os.open(spool / "lock", os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                continue
            finally:
                os.close(fd)


@pytest.fixture
def data(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """guard's data directory for the test (HOME is already private); shippers idle out
    quickly and are stopped at teardown, as are hook daemons."""
    base = Path(os.environ["XDG_DATA_HOME"])
    monkeypatch.setenv("GUARD_SHIP_IDLE", "60")
    monkeypatch.setenv("GUARD_HOOKD_IDLE", "60")
    yield base
    stop_shippers(base)
    run = base / "openoxide" / "run"
    for pidfile in run.glob("hookd-*.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGTERM)


class Pipeline:
    """Edge and central rsyslogd on loopback ports, and guard pointed at the edge."""

    def __init__(self, home: Path, unix: bool = False) -> None:
        omrelp()
        self.tcp, self.relp = free_port(), free_port()
        self.socket = home / "edge.sock" if unix else None
        self.out = home / "central" / "decisions.jsonl"
        self.edge = Rsyslogd(home, "edge", edge_config(self.tcp, self.relp, self.socket))
        self.central = Rsyslogd(home, "central", central_config(self.relp, self.out))

    @property
    def url(self) -> str:
        return f"unix:{self.socket}" if self.socket else f"tcp://127.0.0.1:{self.tcp}"

    def start(self) -> None:
        self.central.start()
        self.edge.start()
        wait_for("the central rsyslogd", lambda: listening(self.relp))
        wait_for("the edge rsyslogd", lambda: listening(self.tcp))
        if self.socket is not None:
            wait_for("the edge's socket", self.socket.exists)

    def stop(self) -> None:
        self.edge.stop()
        self.central.stop()

    def central_records(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def central_ids(self) -> set[str]:
        return {r["record_id"] for r in self.central_records()}


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    p = Pipeline(tmp_path)
    p.start()
    try:
        yield p
    finally:
        p.stop()


def policy_repo(repo: Path, url: str, extra: str = "") -> Path:
    (repo / ".openoxide" / "policy.toml").write_text(
        f'version = 1\nextends = ["builtin:default"]\n\n[audit]\nsyslog = "{url}"\n{extra}'
    )
    return repo


def local_records(repo: Path) -> list[dict[str, Any]]:
    from guard.paths import Roots

    path = logfile.default_log_path(Roots.discover(repo))
    return list(logfile.read(path)) if path.exists() else []


def emit_hooks(repo: Path, n: int, start: int = 0) -> None:
    """``n`` decisions through the installed hook (hookd answers: the real hot path)."""
    env = {**os.environ, "GUARD_HOOK_DAEMON": "1", "GUARD_AGENT": "plan"}
    for i in range(start, start + n):
        target = f"src/app{i}.py" if i % 2 else f"src/app.py#{i}"
        tool = "Write" if i % 2 else "Read"
        payload = {"session_id": "fleet-s1", "cwd": str(repo), "hook_event_name": "PreToolUse",
                   "permission_mode": "acceptEdits", "tool_name": tool,
                   "tool_input": {"file_path": str(repo / target), "content": "x"},
                   "tool_use_id": f"toolu_{i}", "transcript_path": str(repo / "t.jsonl")}
        proc = subprocess.run(["/bin/sh", "-c", hook_command("claude-code")],
                              input=json.dumps(payload), capture_output=True, text=True,
                              cwd=repo, env=env, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr


def spool_empty(url: str, data: Path) -> bool:
    d = spool_dir(Target.parse(url), data / "openoxide")
    try:
        return (d / "queue").stat().st_size == 0
    except FileNotFoundError:
        return False


def assert_unaltered(p: Pipeline, local: list[dict[str, Any]]) -> None:
    """Every local record arrived, equal to the local one, with the local line's chain keys
    (and the MAC it continues from, and the log's name); duplicates are identical."""
    by_id = {r["record_id"]: r for r in local}
    prev = {(r["chain_seq"]): r["chain"] for r in local}
    central = p.central_records()
    assert {r["record_id"] for r in central} == set(by_id)
    for r in central:
        mine = by_id[r["record_id"]]
        shipped = {k: v for k, v in r.items() if k not in ("chain_prev", "chain_log")}
        assert shipped == mine
        assert r["chain_prev"] == prev.get(r["chain_seq"] - 1, "")
        assert r["chain_log"].endswith(".jsonl")
        assert not missing(r)


def verify_shipped(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`guard audit verify --shipped PATH --json` (this installation's key)."""
    return subprocess.run([sys.executable, "-m", "guard", "audit", "verify", "--shipped",
                           str(path), "--json", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def test_outage_of_the_central_collector_loses_nothing(
    pipeline: Pipeline, repo: Path, data: Path
) -> None:
    """N decisions, the central rsyslogd stopped, M more, restarted: all N+M arrive
    unaltered, and duplicates (RELP resends) carry the same record id."""
    policy_repo(repo, pipeline.url)
    n, m = 20, 20
    emit_hooks(repo, n)
    wait_for("N records at the central", lambda: len(pipeline.central_ids()) == n)
    pipeline.central.stop()
    emit_hooks(repo, m, start=n)
    wait_for("guard's spool handed to the edge", lambda: spool_empty(pipeline.url, data))
    assert len(pipeline.central_ids()) == n  # the central was down
    pipeline.central.start()
    wait_for("N+M records at the central", lambda: len(pipeline.central_ids()) == n + m)
    local = local_records(repo)
    assert len(local) == n + m
    assert_unaltered(pipeline, local)
    assert {r["host_agent"] for r in local} == {"claude-code"}
    assert {r["decision"] for r in local} == {"allow", "deny"}
    # the collector's copy verifies on its own (resends, if any, are a note)
    proc = verify_shipped(pipeline.out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["intact"] and result["records"] >= n + m


def send_to_edge(p: Pipeline, record: dict[str, Any]) -> None:
    """What any local process can do: hand the machine's rsyslog a message that claims
    to be guard's (RFC 5424, octet-counted, app-name openoxide-guard)."""
    from guard.fleet.syslog import body, frame

    msg = (b"<38>1 " + record["ts"].encode() + b" " + record["hostname"].encode()
           + b" openoxide-guard - verdict - " + body(record))
    with socket.create_connection(("127.0.0.1", p.tcp), timeout=30) as s:
        s.sendall(frame(msg, "tcp"))


def test_records_forged_edited_or_dropped_at_the_collector_are_named(
    pipeline: Pipeline, repo: Path, data: Path
) -> None:
    """Attack on the central trail: a local process forges records into the machine's
    rsyslog (an "allow" that reuses a real record's chain keys, and one with none), and
    the collector's file is edited (a deny turned into an allow) and cut (a record
    removed). `guard audit verify --shipped` names each; the genuine stream verifies."""
    policy_repo(repo, pipeline.url)
    gate = Gate(sink=AuditLog(), source="check", agent="plan")
    call = ToolCall("effect", "write", {}, str(repo))
    for i in range(8):
        gate.record(gate.decide(call, effects=[Effect.write(f"src/v{i}.py")]))
    wait_for("8 records at the central", lambda: len(pipeline.central_ids()) == 8)
    clean = verify_shipped(pipeline.out)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert json.loads(clean.stdout)["records"] == 8

    real = pipeline.central_records()
    forged = {**real[3], "decision": "allow", "reason": "allowed", "record_id": "forged-1"}
    bare = {k: v for k, v in forged.items() if not k.startswith("chain")}
    bare["record_id"] = "forged-2"
    send_to_edge(pipeline, forged)
    send_to_edge(pipeline, bare)
    wait_for("the forged records at the central", lambda: len(pipeline.central_ids()) == 10)

    lines = pipeline.out.read_text().splitlines()
    edited = json.loads(lines[1])
    assert edited["decision"] == "deny"
    edited["decision"] = "allow"
    lines[1] = json.dumps(edited)
    del lines[5]  # the sixth record never reached the central copy
    tampered = pipeline.out.with_name("tampered.jsonl")
    tampered.write_text("\n".join(lines) + "\n")

    proc = verify_shipped(tampered)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = {(f["line"], f["problem"].split(":")[0]) for f in json.loads(proc.stdout)["findings"]}
    assert (2, "the MAC does not match") in found  # the edit
    assert (6, "record 6 of " + real[0]["chain_log"] + " on " + real[0]["hostname"]
            + " (uid " + str(real[0]["uid"]) + ") missing before this line") in found
    assert (8, "the MAC does not match") in found  # the forged allow (lines shift by one)
    assert (9, "no chain keys") in found  # the forged record without a chain
    assert len(found) == 4
    # the local log itself is untouched and intact
    from guard.paths import Roots

    log = logfile.default_log_path(Roots.discover(repo))
    local = subprocess.run([sys.executable, "-m", "guard", "audit", "verify", "--json", str(log)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert local.returncode == 0, local.stdout


def test_edge_down_then_shipper_killed_records_arrive_in_order(
    tmp_path: Path, repo: Path, data: Path
) -> None:
    """The machine's rsyslog is not running and the shipper is killed: records wait in the
    spool and arrive, in order, once the edge is up and a writer restarts the shipper."""
    p = Pipeline(tmp_path)
    policy_repo(repo, p.url)
    gate = Gate(sink=AuditLog(), source="check", agent="plan")
    call = ToolCall("effect", "write", {}, str(repo))
    for i in range(30):
        gate.record(gate.decide(call, effects=[Effect.write(f"src/f{i}.py")]))
    d = spool_dir(Target.parse(p.url), data / "openoxide")
    wait_for("a shipper", lambda: (d / "shipper.pid").exists())
    os.kill(int((d / "shipper.pid").read_text()), signal.SIGKILL)
    try:
        p.start()
        for i in range(30, 40):  # the next writer starts a shipper again
            gate.record(gate.decide(call, effects=[Effect.write(f"src/f{i}.py")]))
        wait_for("40 records at the central", lambda: len(p.central_ids()) == 40)
        local = local_records(repo)
        assert_unaltered(p, local)
        firsts = list(dict.fromkeys(r["record_id"] for r in p.central_records()))
        assert firsts == [r["record_id"] for r in local]  # in order
    finally:
        p.stop()


def test_unix_socket_to_the_local_rsyslog(tmp_path: Path, repo: Path, data: Path) -> None:
    p = Pipeline(tmp_path, unix=True)
    p.start()
    try:
        policy_repo(repo, p.url)
        gate = Gate(sink=AuditLog(), source="check", agent="build")
        for i in range(10):
            gate.record(gate.decide(ToolCall("effect", "write", {}, str(repo)),
                                    effects=[Effect.write(f"src/u{i}.py")]))
        wait_for("10 records at the central", lambda: len(p.central_ids()) == 10)
        assert_unaltered(p, local_records(repo))
    finally:
        p.stop()


def test_a_collector_that_never_reads_never_holds_a_decision(
    repo: Path, data: Path
) -> None:
    """Attack on availability: the collector accepts and never reads. Every decision
    returns (none waits on the network); the spool stays within spool_max_bytes, and
    what did not fit is counted and said in a notice once the collector reads again."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    limit = 256 * 1024
    policy_repo(repo, url, f"spool_max_bytes = {limit}\n")
    gate = Gate(sink=AuditLog(), source="check", agent="plan")
    call = ToolCall("effect", "write", {}, str(repo))
    d = spool_dir(Target.parse(url), data / "openoxide")
    big = "x" * 2000
    done = 0
    for i in range(1500):  # ~4 MB of records: far more than socket buffers and the spool
        v = gate.record(gate.decide(call, effects=[Effect.write(f"src/{big}{i}.py")]))
        assert v.action.value == "deny" and not v.failed
        done += 1
        assert (d / "queue").stat().st_size <= limit
    assert done == 1500 and len(local_records(repo)) == 1500
    dropped = (d / "dropped").stat().st_size
    assert dropped > 0
    # now read everything the collector is sent: the notice about the dropped ones comes
    conn, _ = server.accept()
    got = bytearray()
    stop = threading.Event()

    def reader() -> None:
        conn.settimeout(1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                got.extend(chunk)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        wait_for("the not-shipped notice", lambda: b'"not_shipped"' in got)
    finally:
        stop.set()
        t.join()
        conn.close()
        server.close()
    assert f'"count": {dropped}'.encode() in got
    # the notice is guard's own: signed with the installation's key, it verifies
    from guard.audit.chain import key_path, load_key
    from guard.audit.verify import check_notice

    at = got.rfind(b" - {", 0, got.index(b'"not_shipped"')) + 3
    notice, _ = json.JSONDecoder().raw_decode(got[at:].decode())
    assert check_notice(notice, [load_key(key_path(data / "openoxide"), create=False)]) is None
    assert check_notice({**notice, "count": 0}, [load_key(key_path(data / "openoxide"))])


class Collector:
    """A TCP syslog collector in the test: octet-counted RFC 5424 frames, JSON bodies."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.port = self.server.getsockname()[1]
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.server.settimeout(0.5)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        buf = b""
        conn.settimeout(0.5)
        while not self.stop.is_set():
            try:
                chunk = conn.recv(1 << 16)
            except TimeoutError:
                continue
            if not chunk:
                return
            buf += chunk
            while b" " in buf:
                size, _, rest = buf.partition(b" ")
                if len(rest) < int(size):
                    break
                msg, buf = rest[: int(size)], rest[int(size):]
                parts = msg.split(b" ", 7)
                assert parts[0].endswith(b">1") and parts[3] == b"openoxide-guard", msg[:80]
                with self.lock:
                    self.records.append(json.loads(parts[7]))

    def ids(self) -> set[str]:
        with self.lock:
            return {r["record_id"] for r in self.records}

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.server.close()


WRITER = """\
import sys
from pathlib import Path
from guard.fleet.records import stamp
from guard.fleet.syslog import ship
from guard.policy.valid import Audit
settings = Audit(syslog=sys.argv[1])
for i in range(int(sys.argv[2])):
    ship(settings, [stamp({"type": "verdict", "decision": "deny", "n": i,
                           "writer": sys.argv[3]}, None)], Path(sys.argv[4]))
"""


def test_concurrent_writers_and_the_shipper_lose_no_record(data: Path, tmp_path: Path) -> None:
    """Four processes spool records at once while the shipper sends and empties the spool
    under them: every record arrives, each writer's in its order."""
    c = Collector()
    url = f"tcp://127.0.0.1:{c.port}"
    base = data / "openoxide"
    try:
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, "400", str(w), str(base)])
                 for w in range(4)]
        for p in procs:
            assert p.wait(timeout=300) == 0
        wait_for("1600 records at the collector", lambda: len(c.ids()) == 1600)
        wait_for("the spool emptied", lambda: spool_empty(url, data))
        with c.lock:
            got = list(c.records)
        for w in range(4):
            order = [r["n"] for r in got if r["writer"] == str(w)]
            assert list(dict.fromkeys(order)) == list(range(400))
    finally:
        c.close()
