"""The fanotify backend, with the real kernel: what it sees, who it names, its overflow.

These need CAP_SYS_ADMIN (a filesystem mark). Without it they skip saying so; under
``CI=true`` (where the suite runs as root) that is a failure instead, so CI never
passes them by skipping. Writers are separate processes that stay alive until the
monitor has described them (a process that has exited leaves nothing in /proc).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guard.audit import logfile
from guard.monitor import Monitor
from guard.monitor.fanotify import FanotifyObserver, choose
from tests.components import CI_RULE, in_ci
from tests.monitor.conftest import WAIT, wait_for

PYTHON = os.path.realpath(sys.executable)

# Does what argv[2:] say in the worktree argv[1], prints its pid, then waits for stdin to
# close: it is alive while the monitor reads its events.
WRITER = r"""
import os, sys
os.chdir(sys.argv[1])
print(os.getpid(), flush=True)
for op in sys.argv[2:]:
    what, _, arg = op.partition(":")
    if what == "write":
        with open(arg, "a") as f:
            f.write("agent\n")
    elif what == "delete":
        os.unlink(arg)
    elif what == "rename":
        a, b = arg.split(">")
        os.rename(a, b)
    elif what == "chmod":
        os.chmod(arg, 0o700)
sys.stdin.read()
"""


def _fanotify_or_skip(root: Path) -> None:
    choice = choose([root], "fanotify")
    if choice.backend == "fanotify":
        return
    message = f"fanotify is not available to this test process: {choice.why}"
    if in_ci():
        pytest.fail(f"{message} ({CI_RULE})", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def fan(wt: Path, start_monitor: Callable[..., Monitor]) -> Callable[..., Monitor]:
    _fanotify_or_skip(wt)

    def start(**kw: object) -> Monitor:
        m = start_monitor(backend="fanotify", **kw)
        assert m.backend is not None and m.backend.backend == "fanotify", m.backend
        assert isinstance(m.state.observer, FanotifyObserver)
        return m

    return start


class Writer:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        self.pid = int(self.proc.stdout.readline())

    def finish(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT)


@pytest.fixture
def writers() -> Iterator[Callable[..., Writer]]:
    started: list[Writer] = []

    def run(wt: Path, *ops: str, parent: list[str] | None = None) -> Writer:
        w = Writer([*(parent or []), sys.executable, "-c", WRITER, str(wt), *ops])
        started.append(w)
        return w

    yield run
    for w in started:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()


def test_fanotify_sees_every_kind_of_change_and_names_the_writer(
    wt: Path, fan: Callable[..., Monitor], writers: Callable[..., Writer]
) -> None:
    """Create, modify, delete, rename and chmod by another process: each is a violation
    whose record names that process (pid and executable), in memory and in the log."""
    m = fan()
    assert any(n.event == "backend" and "fanotify (filesystem mark)" in n.message
               for n in m.notices)
    w = writers(wt, "write:new.txt", "write:src/app.py", "delete:docs/b.md",
                "rename:docs/a.md>docs/c.md", "chmod:src/tool.sh")
    want = {
        (str(wt / "new.txt"), "created"),
        (str(wt / "src" / "app.py"), "modified"),
        (str(wt / "docs" / "b.md"), "deleted"),
        (str(wt / "docs" / "a.md"), "moved-from"),
        (str(wt / "docs" / "c.md"), "moved-to"),
        (str(wt / "src" / "tool.sh"), "attrib"),
    }
    wait_for(lambda: want <= {(v.path, v.event) for v in m.violations},
             f"violations {sorted(want)}")
    w.finish()
    for v in m.violations:
        if (v.path, v.event) in want:
            assert (v.pid, v.exe) == (w.pid, PYTHON), v
            assert v.in_guarded_tree is None, v  # no guarded tree under guard watch

    def logged() -> dict[tuple[str, str], dict[str, object]]:
        return {(str(r["path"]), str(r["event"])): r for r in logfile.read(m.audit_path)
                if r.get("type") == "violation"}

    wait_for(lambda: want <= set(logged()), "the violations in the audit log")
    records = logged()
    for key in want:
        rec = records[key]
        assert (rec["pid"], rec["exe"], rec["in_guarded_tree"]) == (w.pid, PYTHON, None), rec


def test_fanotify_tells_the_guarded_tree_from_other_writers(
    wt: Path, fan: Callable[..., Monitor], writers: Callable[..., Writer]
) -> None:
    """A writer started by the guarded process (a grandchild through sh) is inside the
    guarded tree; an unrelated process writing at the same time (the user's editor) is not."""
    m = fan()
    ctl = wt.parent / "ctl"
    ctl.mkdir()
    (ctl / "writer.py").write_text(WRITER)
    os.mkfifo(ctl / "go")
    ready = ctl / "pid"
    # the guarded process is a shell; the writer is its child, started by it
    script = f'"{sys.executable}" "{ctl / "writer.py"}" "{wt}" write:inside.txt' \
        f' > "{ready}" < "{ctl / "go"}"; exit 0'  # two commands: sh forks, never execs
    guarded = subprocess.Popen(["sh", "-c", script])
    m.set_guarded_process(guarded.pid)
    go = open(ctl / "go", "w")  # noqa: SIM115 - closing it ends the writer
    try:
        outside = writers(wt, "write:outside.txt")
        wait_for(lambda: {str(wt / "inside.txt"), str(wt / "outside.txt")}
                 <= {v.path for v in m.violations}, "both writes reported")
        wait_for(lambda: ready.read_text().strip() != "", "the inside writer's pid")
        inside_pid = int(ready.read_text())
        outside.finish()
    finally:
        go.close()
        guarded.wait(timeout=WAIT)
    by_path = {v.path: v for v in m.violations}
    v_in, v_out = by_path[str(wt / "inside.txt")], by_path[str(wt / "outside.txt")]
    assert (v_in.pid, v_in.exe, v_in.in_guarded_tree) == (inside_pid, PYTHON, True), v_in
    assert (v_out.pid, v_out.exe, v_out.in_guarded_tree) == (outside.pid, PYTHON, False), v_out
    assert inside_pid != guarded.pid  # a descendant, not the root itself


def test_inotify_records_carry_null_attribution(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """inotify events do not say who wrote: the keys are there, with null values."""
    m = start_monitor(backend="inotify")
    assert m.backend is not None and m.backend.backend == "inotify"
    (wt / "src" / "app.py").write_text("changed\n")
    def logged() -> list[dict[str, object]]:
        # the record reaches the log just after m.violations (written outside the lock)
        return [r for r in logfile.read(m.audit_path) if r.get("type") == "violation"
                and r.get("path") == str(wt / "src" / "app.py")]

    wait_for(lambda: bool(logged()), "the write reported in the audit log")
    rec = logged()[0]
    assert {k: rec[k] for k in ("pid", "exe", "in_guarded_tree")} == {
        "pid": None, "exe": None, "in_guarded_tree": None}


def test_guard_run_names_the_supervisor_that_made_the_commands_chmod(
    wt: Path, tmp_path: Path
) -> None:
    """End to end: `guard run` (as root: fanotify) supervises a command that chmods a
    tracked file (Landlock does not cover chmod). With the walls up the kernel hands every
    chmod to guard's supervisor, the command's parent (guard/sandbox/attrs.py), which makes
    it for the command: the violation in the audit log names that process (the root of
    the guarded tree) and its executable, and says it is inside the guarded tree. The
    command stays alive until that record exists, so /proc still describes it when the
    monitor looks.

    `guard run` starts the command before phase 2 of the baseline is complete; a change
    made meanwhile is reported as `during-baseline:<event>` (docs/monitor.md). This test
    is about a change after the baseline, so the command first waits for the monitor's
    `start` notice, which is logged once the baseline is complete."""
    from guard.sandbox import landlock

    _fanotify_or_skip(wt)
    if landlock.abi_version() < 1:
        pytest.skip(f"no Landlock here: {landlock.unavailable_reason()}")
    log = tmp_path / "audit.jsonl"
    target = wt / "src" / "app.py"
    code = (
        "import json, os, sys, time\n"
        "def wait(pred):\n"
        f"    deadline = time.monotonic() + {WAIT}\n"
        "    while time.monotonic() < deadline:\n"
        "        try:\n"
        f"            recs = [json.loads(x) for x in open({str(log)!r})]\n"
        "        except (OSError, ValueError):\n"
        "            recs = []\n"
        "        if any(pred(r) for r in recs):\n"
        "            return\n"
        "        time.sleep(0.05)\n"
        "    sys.exit('timed out waiting for the audit log')\n"
        "wait(lambda r: r.get('type') == 'notice' and r.get('event') == 'start')\n"
        f"os.chmod({str(target)!r}, 0o600)\n"
        "wait(lambda r: r.get('type') == 'violation')\n"
        "print(os.getppid(), os.getpid())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARD_")}
    # without namespaces (the fallback), where chmod gets through to be attributed (in
    # them the read-only view refuses it, and the command's pid is not the host's)
    switched = Path(__file__).resolve().parent.parent / "switched.py"  # test-only entry point
    proc = subprocess.run(
        [sys.executable, str(switched), "--no-namespaces", "guard", "run", "--agent", "plan",
         "--audit", str(log),
         "--", sys.executable, "-c", code],
        cwd=wt, env=env, capture_output=True, text=True, timeout=WAIT * 2,
    )
    assert "monitor backend: fanotify (filesystem mark)" in proc.stderr, proc.stderr
    parent, pid = map(int, proc.stdout.strip().splitlines()[-1].split())
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    v = next(r for r in recs if r.get("type") == "violation" and r["path"] == str(target))
    assert v["event"] == "attrib", "\n".join(json.dumps(r) for r in recs)
    assert pid != parent
    assert (v["pid"], v["exe"], v["in_guarded_tree"]) == (parent, PYTHON, True), (pid, v)


def test_a_change_seen_by_a_scan_before_its_event_is_read_is_reported_by_its_event(
    wt: Path, fan: Callable[..., Monitor], writers: Callable[..., Writer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A busy machine: a reconciliation scan (woken by an overflow, by another process's
    directories removed during fanotify's walk, or by the clock) runs while another
    process creates one file and chmods another, and reaches both before their events
    are read (the reader is paused). The scan lets the queued events go first: each
    change is reported by its own event, naming the writer, and never as reconcile:*
    (a scan cannot know who made a change)."""
    m = fan()
    obs = m.state.observer
    assert isinstance(obs, FanotifyObserver)
    wait_for(obs.walked.is_set, "the directory walk ended")
    new, tool = wt / "new.txt", wt / "src" / "tool.sh"
    syncing = threading.Event()
    sync = m.sync

    def noted_sync(timeout: float = 60.0) -> bool:
        syncing.set()
        return sync(timeout)

    monkeypatch.setattr(m, "sync", noted_sync)
    scan = threading.Thread(target=m.reconcile, args=("test: mid-change",))
    with obs.paused:  # the writer's events wait in the kernel's queue
        w = writers(wt, "write:new.txt", "chmod:src/tool.sh")
        wait_for(lambda: new.exists() and stat.S_IMODE(tool.stat().st_mode) == 0o700,
                 "the writer's changes on disk")
        scan.start()
        wait_for(lambda: syncing.is_set() or not scan.is_alive(),
                 "the scan waiting for the queued events (or done without them)")
    scan.join(WAIT)
    assert not scan.is_alive()
    w.finish()
    mine = [v for v in m.violations if v.path in (str(new), str(tool))]
    assert not [v for v in mine if v.event.startswith("reconcile:")], mine
    assert {(v.path, v.event) for v in mine} >= {(str(new), "created"), (str(tool), "attrib")}
    for v in mine:
        assert (v.pid, v.exe) == (w.pid, PYTHON), v


def test_fanotify_queue_overflow_triggers_a_reconciliation_that_misses_nothing(
    wt: Path, fan: Callable[..., Monitor]
) -> None:
    """A real FAN_Q_OVERFLOW: the reader is paused (its lock held) while another process
    creates more files than the kernel queues for a group (fs.fanotify.max_queued_events),
    so the kernel drops events and says so. The monitor reports the overflow and its
    reconciliation scan reports every file exactly once."""
    limit = int(Path("/proc/sys/fs/fanotify/max_queued_events").read_text())
    n = limit + 2000
    if n > 200_000:
        pytest.skip(f"fs.fanotify.max_queued_events is {limit}: too many files to overflow it")
    m = fan()
    obs = m.state.observer
    assert isinstance(obs, FanotifyObserver)
    # once the walk has ended no event counts as lost (another process's removed
    # directories on this file system included): the next scan is the overflow's
    wait_for(obs.walked.is_set, "the directory walk ended")
    scans = m.reconciliations
    root = wt / "flood"
    root.mkdir()
    maker = ("import os, sys\nr, n = sys.argv[1], int(sys.argv[2])\n"
             "for i in range(n):\n    open(os.path.join(r, f'f{i:06d}'), 'w').close()\n")
    with obs.paused:
        subprocess.run([sys.executable, "-c", maker, str(root), str(n)], check=True)
    wait_for(lambda: m.overflows >= 1, "FAN_Q_OVERFLOW delivered",
             progress=lambda: (obs.events, len(m.violations)))
    wait_for(lambda: m.reconciliations > scans, "reconciliation after the overflow",
             progress=lambda: len(m.violations))
    m.reconcile("test: after the flood")
    expected = {str(root / f"f{i:06d}") for i in range(n)}
    counts = collections.Counter(v.path for v in m.violations if v.path in expected)
    assert set(counts) == expected, f"{len(expected - set(counts))} files never reported"
    assert not [p for p, c in counts.items() if c > 1], "a file reported twice"
    assert any(n.event == "fanotify-overflow" for n in m.notices)


def test_without_cap_sys_admin_the_monitor_uses_inotify_and_says_why(wt: Path) -> None:
    """The same probe from a process whose CAP_SYS_ADMIN is dropped (setpriv): inotify,
    with the reason in the one line guard doctor and the monitor print."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        message = "needs root and setpriv (util-linux) to drop CAP_SYS_ADMIN from a child"
        if in_ci():
            pytest.fail(f"{message} ({CI_RULE})", pytrace=False)
        pytest.skip(message)
    code = ("import sys; from pathlib import Path; from guard.monitor.fanotify import choose;"
            " print(choose([Path(sys.argv[1])]).line())")
    out = subprocess.run(
        [setpriv, "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--",
         sys.executable, "-c", code, str(wt)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert out.startswith("monitor backend: inotify (watchdog): no CAP_SYS_ADMIN"), out


def _fanotify_fds() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[fanotify]":
                out.append(fd)
        except OSError:
            continue
    return out


def test_stop_returns_with_the_fanotify_descriptor_closed(
    wt: Path, fan: Callable[..., Monitor]
) -> None:
    """The descriptor is closed on a thread of its own (releasing a fanotify group waits
    for the kernel) while the final reconciliation runs; stop() still returns only once
    it is closed, so no mark outlives the monitor and no descriptor leaks."""
    before = _fanotify_fds()
    m = fan()
    assert len(_fanotify_fds()) == len(before) + 1
    (wt / "src" / "app.py").write_text("changed\n")
    m.stop()
    assert _fanotify_fds() == before
    assert any(v.path == str(wt / "src" / "app.py") for v in m.violations)


def test_a_write_just_before_the_command_exits_is_reported_by_its_event(
    wt: Path, fan: Callable[..., Monitor], writers: Callable[..., Writer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attack: the last write. The command writes a file and exits, and the stop follows
    at once. The stop removes fanotify's marks early (the kernel frees them while the
    final reconciliation runs), but only after its sync has drained every event queued
    before it: the write was handled by its own event (its name, not reconcile:*) by the
    time the marks went, and the file is still there to see."""
    m = fan()
    at_unmark: list[tuple[str, str]] = []
    removed: list[bool] = []
    real = FanotifyObserver.unmark

    def unmark(self: FanotifyObserver) -> bool:
        at_unmark.extend((v.path, v.event) for v in m.violations)
        removed.append(real(self))
        return removed[-1]

    monkeypatch.setattr(FanotifyObserver, "unmark", unmark)
    w = writers(wt, "write:last.txt")
    w.finish()  # the writer has exited: nothing of it is left but its event
    m.stop()
    want = (str(wt / "last.txt"), "created")
    assert removed == [True]
    assert want in at_unmark, at_unmark
    assert want in {(v.path, v.event) for v in m.violations}
    assert (wt / "last.txt").read_text() == "agent\n"


def test_a_write_racing_the_stop_after_the_marks_are_gone_is_reported_by_the_final_scan(
    wt: Path, fan: Callable[..., Monitor], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: a process that outlives the command writes while the monitor stops, right
    after fanotify's marks were removed (no event is queued for it any more). The final
    reconciliation, whole as ever, still finds the change and reports it."""
    m = fan()
    target = wt / "src" / "app.py"
    removed: list[bool] = []
    real = FanotifyObserver.unmark

    def unmark(self: FanotifyObserver) -> bool:
        removed.append(real(self))
        target.write_text("raced the stop\n")
        return removed[-1]

    monkeypatch.setattr(FanotifyObserver, "unmark", unmark)
    m.stop()
    assert removed == [True]
    events = [v.event for v in m.violations if v.path == str(target)]
    assert events == ["reconcile:modified"], m.violations
    assert target.read_text() == "raced the stop\n"
