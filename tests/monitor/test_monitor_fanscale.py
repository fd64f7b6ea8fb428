"""The monitor at monorepo scale: fanotify is watching once its mark is placed (the
directory walk runs behind it, nothing lost meanwhile), and inotify refuses at once,
naming the limit and the fixes, when it cannot watch every directory.

The fanotify tests hold the real directory walk at its start (its thread waits on an
event the test sets), so that every change they make lands before the walk could
reach it, every time; the reader is paused while a directory is removed, so its
events are read only once the directory is gone (they cannot be named: the case the
walk exists for). No timing is asserted anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.decide import Guard
from guard.monitor import Monitor, phases
from guard.monitor.fanotify import FanotifyObserver
from tests.components import CI_RULE, in_ci
from tests.monitor.conftest import WAIT, git, wait_for
from tests.monitor.test_monitor_background import _held_progress
from tests.monitor.test_monitor_fanotify import _fanotify_or_skip


@pytest.fixture
def held_walk(wt: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """fanotify's directory walk waits (the real walk, started late) until the event is set."""
    _fanotify_or_skip(wt)
    go = threading.Event()
    walk = FanotifyObserver._walk

    def held(self: FanotifyObserver) -> None:
        go.wait(WAIT * 2)
        walk(self)

    monkeypatch.setattr(FanotifyObserver, "_walk", held)
    yield go
    go.set()


def _observer(m: Monitor) -> FanotifyObserver:
    assert m.backend is not None and m.backend.backend == "fanotify", m.backend
    obs = m.state.observer
    assert isinstance(obs, FanotifyObserver)
    return obs


def test_fanotify_monitor_is_ready_before_its_directory_walk_and_restores_a_write_made_during_it(
    wt: Path, start_monitor: Callable[..., Monitor], held_walk: threading.Event
) -> None:
    """The attack: another process rewrites a tracked file while the monitor's directory
    walk has not even begun. The monitor started without waiting for the walk, the write
    is a violation, and --restore puts the committed bytes back."""
    m = start_monitor(backend="fanotify", restore=True)
    obs = _observer(m)
    assert m.watching.is_set() and not obs.walked.is_set()
    target = wt / "src" / "app.py"
    before = target.read_bytes()
    subprocess.run([sys.executable, "-c",
                    f"open({str(target)!r}, 'w').write('import os  # agent\\n')"], check=True)
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the write reported")
    assert not obs.walked.is_set()  # caught while the walk still waited
    assert m.settle(WAIT)
    assert target.read_bytes() == before
    v = next(v for v in m.violations if v.path == str(target))
    assert "restored" in v.action_taken, v
    held_walk.set()
    wait_for(obs.walked.is_set, "the directory walk ended")


def _rm_rf_docs_before_the_walk(
    wt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walk: threading.Event,
    elsewhere: Path | None,
) -> None:
    """`rm -rf docs` while fanotify's walk (``walk``) and phase 2 are held; with ``elsewhere``,
    another process removes that tree (outside the worktree, on the same file system)
    while phase 1 runs, its events read once it is gone: lost events before the command
    starts, which must not hide the ones from docs/ after it."""
    docs = wt / "docs"
    before = {p.name: p.read_bytes() for p in docs.iterdir()}
    (docs / "deep").mkdir()
    (docs / "deep" / "c.md").write_text("# c\n")
    git(wt, "add", "-A")
    git(wt, "commit", "-qm", "deep")
    before_deep = (docs / "deep" / "c.md").read_bytes()
    marker = tmp_path / "damage-done"
    reached = threading.Event()
    g = Guard.load(worktree=wt)
    m = Monitor(g, "plan", restore=True, background=True, reconcile_interval=None,
                session="test-session", audit_path=tmp_path / "a.jsonl",
                progress=_held_progress(marker, reached), backend="fanotify")
    if elsewhere is not None:
        prepare = phases.prepare

        def busy_prepare(*args: Any, **kw: Any) -> Any:
            with _observer(m).paused:  # read once the other tree is gone: unnamed
                subprocess.run(["rm", "-rf", str(elsewhere)], check=True)
            return prepare(*args, **kw)

        monkeypatch.setattr(phases, "prepare", busy_prepare)
    m.start()
    try:
        obs = _observer(m)
        assert not obs.walked.is_set()
        if elsewhere is not None:
            assert not elsewhere.exists()
            assert m.events_lost >= 1, "the other tree's events counted before phase 1 ended"
        wait_for(reached.is_set, "phase 2 held at its start")
        lost = m.events_lost
        with obs.paused:  # the events are read once docs/ is gone
            subprocess.run(["rm", "-rf", str(docs)], check=True)
        # every event of the rm -rf is read (not only some other process's lost ones)
        assert m.sync(WAIT), "the rm -rf's events handled"
        assert m.events_lost > lost, "the events inside docs/ could not be named"
        marker.touch()  # phase 2 walks on: docs/ is not there
        assert m.baseline_done.wait(WAIT)
        assert m.settle(WAIT)
        assert docs.is_dir(), m.violations
        assert {p.name: p.read_bytes() for p in docs.iterdir() if p.is_file()} == before
        assert (docs / "deep" / "c.md").read_bytes() == before_deep
        assert any(n.event == "fanotify-lost" for n in m.notices), m.notices
        deleted = {v.path for v in m.violations if v.effect == "delete"}
        assert str(docs) in deleted, m.violations
    finally:
        walk.set()
        m.stop()
    assert git(wt, "status", "--porcelain", "--", "docs") == ""


def test_rm_rf_before_the_walk_and_the_baseline_reach_it_is_restored_exactly(
    wt: Path, tmp_path: Path, held_walk: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: `rm -rf docs` the moment the command starts, before fanotify's
    directory walk cached docs/ and before phase 2 of the baseline listed it. The events
    inside docs/ cannot be named (the directory is gone when they are read); the monitor
    says events were lost, takes git's blobs for the tracked files the walk did not
    find, and --restore brings docs/ back byte for byte."""
    _rm_rf_docs_before_the_walk(wt, tmp_path, monkeypatch, held_walk, None)


def test_a_directory_removed_elsewhere_before_the_command_does_not_hide_an_rm_rf_of_docs(
    wt: Path, tmp_path: Path, held_walk: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy machine: another process removes a tree elsewhere on the same file system
    while the monitor starts, so fanotify's walk cannot name its events either (a removed
    directory cannot be told apart from one under the worktree) and events count as lost
    before the command starts. Then the command runs `rm -rf docs` as above: its lost
    events come after phase 1 all the same, and --restore brings docs/ back byte for byte
    (the monitor told of the first lost event only, and used to compare that count)."""
    elsewhere = tmp_path / "elsewhere"
    for sub in ("sub/deeper", "sub/other"):
        (elsewhere / sub).mkdir(parents=True)
        for i in range(3):
            (elsewhere / sub / f"f{i}").write_text(f"{i}\n")
    _rm_rf_docs_before_the_walk(wt, tmp_path, monkeypatch, held_walk, elsewhere)


def test_a_directory_moved_during_the_walk_keeps_its_events_named(
    wt: Path, start_monitor: Callable[..., Monitor], held_walk: threading.Event
) -> None:
    """A directory renamed before the walk reached it, then emptied and removed once the
    walk is over: every file in it is still reported under its new name (the walk covered
    the new place; the rename moved what the cache knew)."""
    m = start_monitor(backend="fanotify")
    obs = _observer(m)
    (wt / "docs").rename(wt / "moved")
    wait_for(lambda: any(v.path == str(wt / "moved") for v in m.violations), "the move")
    held_walk.set()
    wait_for(obs.walked.is_set, "the directory walk ended")
    with obs.paused:  # read only once moved/ is gone: named from the cache or not at all
        subprocess.run(["rm", "-rf", str(wt / "moved")], check=True)
    want = {str(wt / "moved" / "a.md"), str(wt / "moved" / "b.md")}
    wait_for(lambda: want <= {v.path for v in m.violations if v.event == "deleted"},
             f"deletions of {sorted(want)}")


def test_inotify_refuses_at_once_when_the_watch_limit_cannot_cover_the_tree(
    wt: Path, tmp_path: Path
) -> None:
    """A tree with more directories than the inotify watch limit (set low in a user
    namespace of its own, so no other process is affected): `guard watch` refuses with
    one line naming the limit, the count it reached and both fixes, exits non-zero,
    prints no traceback, and leaves no watch behind."""
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "--user", "--map-root-user", "true"],
                           capture_output=True) if unshare else None
    if probe is None or probe.returncode != 0:
        message = "needs unshare(1) and unprivileged user namespaces to set a watch limit"
        if in_ci():
            pytest.fail(f"{message} ({CI_RULE})", pytrace=False)
        pytest.skip(message)
    for i in range(120):
        (wt / "many" / f"d{i:03d}").mkdir(parents=True)
    script = 'echo 60 > /proc/sys/user/max_inotify_watches && exec "$@"'
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARD_")}
    proc = subprocess.run(
        [unshare or "unshare", "--user", "--map-root-user", "sh", "-c", script, "sh",
         sys.executable, "-m", "guard", "watch", "--backend", "inotify", "--worktree", str(wt),
         "--audit-log", str(tmp_path / "a.jsonl")],
        cwd=wt, env=env, capture_output=True, text=True, timeout=WAIT * 2,
    )
    assert proc.returncode != 0, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if "inotify cannot watch" in x)
    assert "user.max_inotify_watches = 60" in line, line
    assert "fanotify" in line and "sysctl fs.inotify.max_user_watches=" in line, line
    assert "ran out after" in line, line


def damage_script(app: Path, tool: Path, new: Path) -> str:
    """Python lines an agent runs once its events are drowned: ``app`` rewritten keeping
    its size and mtime, ``tool``'s executable bit cleared, ``new`` created."""
    return f"""
app = {str(app)!r}
st = os.stat(app)
data = open(app, "rb").read()
open(app, "wb").write(data.upper() if data.upper() != data else data[::-1])
os.utime(app, ns=(st.st_atime_ns, st.st_mtime_ns))
os.chmod({str(tool)!r}, 0o644)
open({str(new)!r}, "w").write("import os  # agent\\n")
"""


def test_attack_events_drowned_in_an_overflow_while_phase_two_waits_changes_still_undone(
    wt: Path, tmp_path: Path
) -> None:
    """The attack: while phase 2 has not read the tree yet, the agent floods the file
    system's event queue (20,000 creates outside the worktree, the reader held so that the
    kernel's queue overflows), then, its own events lost, rewrites a clean tracked file
    (same size, its mtime set back), clears a tracked script's executable bit and creates
    a file. The walk finds all three as the agent left them; none of them may become the
    baseline. Checked on the disk after --restore: bytes and modes back, the new file
    gone into quarantine."""
    _fanotify_or_skip(wt)
    app, tool, new = wt / "src" / "app.py", wt / "src" / "tool.sh", wt / "src" / "new.py"
    old = app.stat().st_mtime - 60
    for f in (app, tool):
        os.utime(f, (old, old))
    git(wt, "update-index", "--refresh")  # trusted index entries (not racily clean)
    before = {f: (f.read_bytes(), f.stat().st_mode & 0o777) for f in (app, tool)}
    marker = tmp_path / "damage-done"
    reached = threading.Event()
    m = Monitor(Guard.load(worktree=wt), "plan", restore=True, background=True,
                reconcile_interval=None, audit_path=tmp_path / "a.jsonl",
                progress=_held_progress(marker, reached), backend="fanotify")
    m.start()
    try:
        wait_for(reached.is_set, "phase 2 held at its start")
        flood = tmp_path / "flood"
        agent = f"""
import os
os.mkdir({str(flood)!r})
for i in range(20000):
    os.close(os.open({str(flood)!r} + "/f%d" % i, os.O_CREAT | os.O_WRONLY))
""" + damage_script(app, tool, new)
        with _observer(m).paused:  # nothing read until the queue has overflowed
            subprocess.run([sys.executable, "-c", agent], check=True)
        marker.touch()
        assert m.baseline_done.wait(WAIT)
        assert m.settle(WAIT)
    finally:
        m.stop()
    assert m.overflows >= 1, "the flood did not overflow the queue: the test proves nothing"
    assert {f: (f.read_bytes(), f.stat().st_mode & 0o777) for f in (app, tool)} == before
    assert not new.exists()
    hit = {v.path for v in m.violations}
    assert {str(app), str(tool), str(new)} <= hit, m.violations
