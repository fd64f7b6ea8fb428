"""The audit log (atomic appends across processes), the baseline's progress and start-up
report, and `guard watch` end to end as a subprocess."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from guard.audit import AuditError, logfile
from guard.decide import Guard
from guard.monitor import Monitor, phases
from guard.paths import Roots
from tests.monitor.conftest import wait_for

WRITERS, RECORDS = 4, 400


def _writer(path: str, n: int, who: int) -> None:
    big = "x" * 5000  # larger than PIPE_BUF: atomicity must come from the lock + one write
    for i in range(n):
        logfile.append({"who": who, "i": i, "pad": big}, Path(path))


def test_audit_appends_from_several_processes_never_interleave(tmp_path: Path) -> None:
    """Attack surface: concurrent writers (monitor + hook adapters) tearing records."""
    log = tmp_path / "audit" / "p.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(log), RECORDS, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    records = list(logfile.read(log))
    assert len(records) == WRITERS * RECORDS
    for w in range(WRITERS):
        assert [r["i"] for r in records if r["who"] == w] == list(range(RECORDS))
    assert all(r["ts"].endswith("Z") for r in records)


def test_default_log_path_is_under_the_data_dir_agents_cannot_write(wt: Path) -> None:
    g = Guard.load(worktree=wt)
    path = logfile.default_log_path(g.roots)
    assert path.parent == g.roots.data / "audit"
    assert path.name.startswith("wt-") and path.suffix == ".jsonl"
    for agent in g.agent_names:
        assert not g.decide(agent, [audit_write(path)]).allowed, agent


def audit_write(path: Path) -> object:
    from guard.effects import Effect

    return Effect.write(str(path))


def test_audit_append_to_an_unwritable_place_names_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AuditError, match=str(blocker)):
        logfile.append({"x": 1}, blocker / "log.jsonl")


def test_audit_read_reports_the_bad_line(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(AuditError, match=r"a\.jsonl:2"):
        list(logfile.read(log))


def test_append_uses_roots_when_no_path_given(wt: Path) -> None:
    roots = Roots.discover(worktree=wt)
    written = logfile.append({"type": "test"}, roots=roots)
    assert written == logfile.default_log_path(roots)
    assert [r["type"] for r in logfile.read(written)] == ["test"]


def test_baseline_progress_reaches_the_total_on_a_large_tree(wt: Path, tmp_path: Path) -> None:
    big = wt / "big"
    for d in range(10):
        (big / f"d{d}").mkdir(parents=True)
        for f in range(300):
            (big / f"d{d}" / f"{f}.txt").write_text(str(f))
    calls: list[tuple[str, int, int]] = []
    bl = phases.take(
        [wt],
        store=tmp_path / "store",
        worktree=wt,
        ignore=lambda p: False,
        progress=lambda *a: calls.append(a),
    )
    total = len(bl.entries)
    assert total > 3000
    assert calls[-1] == ("hashing", total, total)
    assert any(c[0] == "scanning" for c in calls)
    done = [c[1] for c in calls if c[0] == "hashing"]
    assert done == sorted(done)
    assert bl.stats.files >= 3000 and bl.stats.seconds > 0
    assert "took" in bl.stats.summary()


def test_start_reports_baseline_cost(wt: Path) -> None:
    m = Monitor(Guard.load(worktree=wt), "plan", reconcile_interval=None)
    with m:
        start = next(n for n in m.notices if n.event == "start")
        assert "baseline:" in start.message and "start-up" in start.message
        assert m.startup_seconds > 0


def test_monitor_records_go_to_syslog_when_the_policy_ships_them(
    wt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy with ``[audit] syslog``: every record the monitor logs (its notices, a
    violation) is handed to the shipper as well as written locally; without it, none is."""
    from guard.fleet import syslog

    shipped: list[dict[str, object]] = []

    def ship(settings: object, records: object, data: object = None) -> None:
        assert getattr(settings, "syslog", None) == "unix:///nonexistent/guard-test.sock"
        shipped.extend(records)  # type: ignore[call-overload]

    monkeypatch.setattr(syslog, "ship", ship)
    plain = Monitor(Guard.load(worktree=wt), "plan", reconcile_interval=None)
    with plain:
        (wt / "src" / "app.py").write_text("print('changed')\n")
        assert plain.settle()
    assert plain.violations and shipped == []
    (wt / ".openoxide" / "policy.toml").write_text(
        'version = 1\nextends = ["builtin:default"]\n\n[audit]\n'
        'syslog = "unix:///nonexistent/guard-test.sock"\n'
    )
    m = Monitor(Guard.load(worktree=wt), "plan", reconcile_interval=None)
    with m:
        (wt / "src" / "tool.sh").write_text("#!/bin/sh\necho changed\n")
        assert m.settle()
    events = [r.get("event") for r in shipped]
    assert "start" in events and "stop" in events
    assert any(r.get("path") == str(wt / "src" / "tool.sh") for r in shipped)
    local = list(logfile.read(m.audit_path))
    assert {r["record_id"] for r in shipped} <= {r.get("record_id") for r in local}


def _watch(wt: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "guard",
            "watch",
            "--agent",
            "plan",
            "--worktree",
            str(wt),
            "--json",
            "--reconcile-interval",
            "0",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _reader(proc: subprocess.Popen[str], into: list[dict[str, object]]) -> threading.Thread:
    def run() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            into.append(json.loads(line))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_guard_watch_restore_json_end_to_end(wt: Path) -> None:
    """`guard watch --restore --json`: a violation line at once, the file put back,
    the audit log written, exit status 1 after SIGTERM because there were violations."""
    target = wt / "src" / "app.py"
    original = target.read_bytes()
    proc = _watch(wt, "--restore", "--session", "cli-test")
    lines: list[dict[str, object]] = []
    reader = _reader(proc, lines)
    try:
        wait_for(lambda: any(r.get("event") == "start" for r in lines), "start notice")
        target.write_text("evil\n")
        wait_for(lambda: any(r.get("type") == "violation" for r in lines), "violation line")
        wait_for(lambda: target.read_bytes() == original, "file restored")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        reader.join(timeout=10)
    assert proc.returncode == 1, proc.stderr.read() if proc.stderr else ""
    v = next(r for r in lines if r.get("type") == "violation")
    assert v["path"] == str(target) and v["session"] == "cli-test"
    assert "quarantine" in str(v["action_taken"])
    log = logfile.default_log_path(Guard.load(worktree=wt).roots)
    assert any(r.get("path") == str(target) for r in logfile.read(log))
    assert any(r.get("event") == "stop" for r in lines)


def test_guard_watch_quiet_session_exits_0(wt: Path) -> None:
    proc = _watch(wt)
    lines: list[dict[str, object]] = []
    reader = _reader(proc, lines)
    wait_for(lambda: any(r.get("event") == "start" for r in lines), "start notice")
    (wt / ".openoxide" / "plans" / "ok.md").write_text("# plan\n")
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    assert proc.returncode == 0
    assert not [r for r in lines if r.get("type") == "violation"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size-cap", "lots"], "--size-cap 'lots'"),
        (["--agent", "nobody"], "no agent 'nobody'"),
        (["--session", "../escape"], "session id '../escape'"),
        (["--root", "/nonexistent/dir"], "cannot watch /nonexistent/dir"),
    ],
)
def test_guard_watch_bad_input_is_one_line_and_exit_2(
    wt: Path, args: list[str], message: str
) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "guard", "watch", "--worktree", str(wt), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("guard: error:") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (wt / ".openoxide" / "quarantine").exists()


def test_watch_help_teaches_with_examples() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "guard", "watch", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert r.returncode == 0
    assert "guard watch --agent plan --restore" in r.stdout


def test_guard_watch_text_output_shows_path_rule_and_action(wt: Path) -> None:
    """A file name that looks like rich markup is printed as is, never interpreted."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", "watch", "--worktree", str(wt),
         "--reconcile-interval", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    out: list[str] = []
    err: list[str] = []

    def pump(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line)

    threads = [threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err), daemon=True)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: any("Ctrl-C to stop" in line for line in err), "watching")
        (wt / "src" / "[bold]x.py").write_text("x\n")
        wait_for(lambda: any("action:" in line for line in out), "violation printed")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        for t in threads:
            t.join(timeout=10)
    text = "".join(out)
    assert "VIOLATION" in text and "{worktree}/src/[bold]x.py" in text
    assert "rule: agents.plan.write" in text and "action: reported" in text
    assert proc.returncode == 1
    assert "1 violations" in "".join(err)


def test_without_version_control_the_fallback_plan_dir_is_watched_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No VCS: the plan directory lives under the data dir; it is watched alongside the
    current directory, and the log and quarantine use the same project key."""
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.chdir(proj)
    g = Guard.load(cwd=proj)
    assert g.roots.worktree is None
    with Monitor(g, "plan", restore=True, reconcile_interval=None, session="nv") as m:
        assert g.roots.plans in m.roots
        (g.roots.plans / "plan.md").write_text("# plan\n")
        bad = g.roots.plans / "payload.sh"
        bad.write_text("echo\n")
        wait_for(lambda: any(v.path == str(bad) for v in m.violations), "fallback violation")
        assert [v.path for v in m.violations] == [str(bad)]
    assert logfile.default_log_path(g.roots).stem == g.roots.plans.name
    from guard.monitor import list_items, quarantine_root

    items = list_items(quarantine_root(g.roots))
    assert [i.manifest["original"] for i in items] == [str(bad)]
    assert quarantine_root(g.roots).parent == g.roots.data / "quarantine"
