"""A hostile file system: the monitor never follows, never blocks, never adopts.

Each test is named after the attack it runs for real, with `--restore` on (the
mode that acts on the disk), and checks the disk afterwards.
"""

from __future__ import annotations

import hashlib
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from watchdog.events import FileOpenedEvent, FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from guard.monitor import Monitor, get_item, list_items, quarantine_root
from tests.monitor.conftest import WAIT, exchange, git, wait_for


class _Opens(FileSystemEventHandler):
    """Every open(2) inotify sees under a tree (to prove something was never opened)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def dispatch(self, event: FileSystemEvent) -> None:
        if isinstance(event, FileOpenedEvent):
            self.paths.append(os.fsdecode(event.src_path))


@pytest.fixture
def opens(wt: Path) -> Iterator[_Opens]:
    handler = _Opens()
    obs = Observer()
    obs.schedule(handler, str(wt), recursive=True)
    obs.start()
    yield handler
    obs.stop()
    obs.join()


def stops(m: Monitor) -> None:
    """m.stop() returns (run on a thread so that a hang fails the test instead of CI)."""
    t = threading.Thread(target=m.stop, daemon=True)
    t.start()
    t.join(WAIT)
    assert not t.is_alive(), "the monitor did not stop: it is blocked"


def keeps_reporting(m: Monitor, wt: Path, name: str) -> None:
    marker = wt / name
    marker.write_text("after the attack\n")
    wait_for(lambda: any(v.path == str(marker) for v in m.violations),
             f"a later violation ({name}) is still reported")


def item_for(m: Monitor, path: Path) -> dict[str, object]:
    # the violation is recorded once the move and its manifest are done
    wait_for(lambda: any(v.path == str(path) for v in m.violations), f"violation for {path}")
    items = [i for i in list_items(quarantine_root(m.guard.roots)) if i.original == str(path)]
    assert items, f"nothing quarantined for {path}: {m.violations}"
    return items[0].manifest


def test_attack_fifo_in_the_plan_dir_never_blocks_the_monitor(
    wt: Path, start_monitor: Callable[..., Monitor], opens: _Opens
) -> None:
    """A FIFO named like a plan file: reading it would block forever. It is moved to
    quarantine without being opened, and later violations are still reported."""
    m = start_monitor(restore=True)
    fifo = wt / ".openoxide" / "plans" / "trap.md"
    other = wt / "src" / "trap.fifo"
    os.mkfifo(fifo)
    os.mkfifo(other)
    wait_for(lambda: not os.path.lexists(fifo) and not os.path.lexists(other),
             "both FIFOs moved aside")
    keeps_reporting(m, wt, "after-fifo.txt")
    for path in (fifo, other):
        manifest = item_for(m, path)
        assert manifest["kind"] == "fifo" and "sha256" not in manifest
    v = next(v for v in m.violations if v.path == str(fifo))
    assert v.rule == "monitor:special-file"
    stops(m)
    assert not [p for p in opens.paths if "trap" in os.path.basename(p)], opens.paths


def test_attack_fifo_in_the_plan_dir_then_guard_run_stops_on_sigterm(
    wt: Path, tmp_path: Path
) -> None:
    """`guard run --restore` while FIFOs appear in the plan directory: SIGTERM still stops guard.

    The confined command itself cannot plant one (the kernel grants the plan directory
    regular files only), so an unconfined process of the same agent plants them while the
    run is live: the monitor quarantines them without opening them and keeps answering.
    """
    from guard.sandbox import landlock

    if landlock.abi_version() < 1:
        pytest.skip(f"no Landlock here: {landlock.unavailable_reason()}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARD_")}
    script = (
        "if mkfifo .openoxide/plans/k.md 2>/dev/null; then echo planted; else echo refused; fi;"
        " exec sleep 120"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "guard", "run", "--agent", "plan", "--restore",
         "--audit", str(tmp_path / "a.jsonl"), "--", "sh", "-c", script],
        cwd=wt, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], WAIT)
        assert ready and proc.stdout.readline().strip() == "refused"
        plans = wt / ".openoxide" / "plans"
        os.mkfifo(plans / "p.md")
        os.mkfifo(plans / "q.fifo")
        wait_for(lambda: not (plans / "q.fifo").exists() and not (plans / "p.md").exists(),
                 "the FIFOs moved to quarantine")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "VIOLATION" in err and "p.md" in err, err
    assert proc.returncode != 0


def test_attack_unix_socket_is_quarantined_not_connected(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    m = start_monitor(restore=True)
    path = wt / "src" / "agent.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(path))
        s.listen(1)
        wait_for(lambda: not os.path.lexists(path), "socket moved aside")
        s.setblocking(False)
        with pytest.raises(BlockingIOError):
            s.accept()  # nobody connected to it
    finally:
        s.close()
    assert item_for(m, path)["kind"] == "socket"
    keeps_reporting(m, wt, "after-socket.txt")


def test_attack_device_node_is_quarantined_never_opened(
    wt: Path, start_monitor: Callable[..., Monitor], opens: _Opens
) -> None:
    """As root: a character device (here the null device) in the worktree."""
    if os.geteuid() != 0:
        pytest.skip("mknod of a device needs root")
    m = start_monitor(restore=True)
    dev = wt / "src" / "disk"
    os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    wait_for(lambda: not os.path.lexists(dev), "device node moved aside")
    manifest = item_for(m, dev)
    assert manifest["kind"] == "char-device" and "sha256" not in manifest
    keeps_reporting(m, wt, "after-device.txt")
    stops(m)
    assert not [p for p in opens.paths if os.path.basename(p) == "disk"], opens.paths


def test_attack_directory_swapped_for_a_symlink_to_outside_moves_nothing_outside(
    wt: Path, start_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    """While the monitor waits for a written file to settle, src/ is exchanged in one
    step (renameat2 RENAME_EXCHANGE) for a symlink to a directory outside the worktree
    holding a file of the same name. Nothing outside the worktree is ever moved or
    changed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "evil.txt"
    victim.write_bytes(b"outside, must stay\n")
    (outside / "app.py").write_bytes(b"outside app\n")
    before_src = {p.name: p.read_bytes() for p in (wt / "src").iterdir()}
    m = start_monitor(restore=True)
    fd = os.open(wt / "src" / "evil.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"agent bytes\n")
        moved = tmp_path / "moved-src"
        os.symlink(outside, moved)
        exchange(wt / "src", moved)  # one step: src/ is the link, moved the directory
    finally:
        os.close(fd)
    wait_for(lambda: (wt / "src").is_dir() and not (wt / "src").is_symlink()
             and len(list((wt / "src").iterdir())) == len(before_src), "src/ restored")
    assert m.settle()
    stops(m)
    assert victim.read_bytes() == b"outside, must stay\n"
    assert (outside / "app.py").read_bytes() == b"outside app\n"
    assert sorted(p.name for p in outside.iterdir()) == ["app.py", "evil.txt"]
    assert (moved / "evil.txt").read_bytes() == b"agent bytes\n"  # left where the agent put it
    assert {p.name: p.read_bytes() for p in (wt / "src").iterdir()} == before_src
    for item in list_items(quarantine_root(m.guard.roots)):
        assert item.original.startswith(str(wt) + "/"), item.manifest
        if item.stored.is_file() and not item.stored.is_symlink():
            assert item.stored.read_bytes() != b"outside, must stay\n"
    links = [i for i in list_items(quarantine_root(m.guard.roots)) if i.original == str(wt / "src")]
    assert links and links[0].manifest["kind"] == "symlink"
    assert links[0].manifest["target"] == str(outside)


def test_attack_writes_during_the_baseline_never_lose_the_original(
    wt: Path, guard_for: object, tmp_path: Path
) -> None:
    """An agent already running rewrites files while the baseline is taken.

    Every version is whole (written beside the worktree and renamed in). Afterwards:
    the committed file's original is in git and back in place or the change is
    reported; the untracked
    file's baseline is one whole version and, if it is not the original, the change
    is reported as made during the baseline; the last version written after the
    baseline is in quarantine; every manifest matches its stored bytes.
    """
    bulk = wt / "bulk"
    for d in range(10):
        (bulk / f"d{d}").mkdir(parents=True)
        for f in range(100):
            (bulk / f"d{d}" / f"{f}.txt").write_text(f"{d}/{f}\n" * 20)
    tracked, untracked = wt / "src" / "app.py", wt / "notes.txt"
    originals = {tracked: tracked.read_bytes(), untracked: untracked.read_bytes()}
    versions: dict[Path, list[bytes]] = {p: [b] for p, b in originals.items()}
    m = Monitor(guard_for, "plan", restore=True, reconcile_interval=None,  # type: ignore[arg-type]
                session="baseline-race", audit_path=tmp_path / "a.jsonl")
    starter = threading.Thread(target=m.start)
    starter.start()
    assert m.watching.wait(WAIT)  # what changed before watching began is the original
    n = 0

    def rewrite(p: Path, data: bytes) -> None:
        # written beside the worktree, then renamed in: a temporary file inside it would
        # itself be a violation, which the monitor may move to quarantine before the rename
        tmp = tmp_path / (p.name + ".tmp")
        tmp.write_bytes(data)
        os.rename(tmp, p)
        versions[p].append(data)

    while starter.is_alive():
        n += 1
        for p in originals:
            rewrite(p, b"agent version %d of %s\n" % (n, p.name.encode()))
    starter.join()
    try:
        for p in originals:
            rewrite(p, b"after the baseline: " + p.name.encode())
        assert m.settle()
        assert m.baseline is not None
        for p, original in originals.items():
            entry = m.baseline.get(str(p))
            assert entry is not None
            base = m.baseline.content(entry)
            assert base in versions[p], f"{p.name}: the baseline is not a whole version"
            assert p.read_bytes() == base, f"{p.name}: the baseline is not back in place"
            if base != original:
                assert any(v.path == str(p) and v.event.startswith("during-baseline")
                           for v in m.violations), f"{p.name}: change during baseline adopted"
            kept = [i.stored.read_bytes() for i in list_items(quarantine_root(m.guard.roots))
                    if i.original == str(p)]
            assert versions[p][-1] in kept, f"{p.name}: the last version is not in quarantine"
        assert originals[tracked] == git(wt, "show", "HEAD:src/app.py").encode()
    finally:
        m.stop()
    for item in list_items(quarantine_root(m.guard.roots)):
        if item.manifest["kind"] == "file":
            data = item.stored.read_bytes()
            assert item.manifest["size"] == len(data)
            assert item.manifest["sha256"] == hashlib.sha256(data).hexdigest()
    print(f"{n} rewrites while the baseline ran")
    assert n > 0


def test_manifest_describes_exactly_what_is_stored_even_while_a_writer_holds_it(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """A writer keeps the file open and writes slowly; whatever is quarantined, its
    manifest's size and SHA-256 are those of the stored bytes."""
    m = start_monitor(restore=True)
    target = wt / "src" / "slow.bin"
    with target.open("wb") as f:
        for i in range(20):
            f.write(bytes([i]) * 1000)
            f.flush()
    wait_for(lambda: not target.exists(), "moved to quarantine")
    assert m.settle()
    item = get_item(quarantine_root(m.guard.roots), next(
        i.id for i in list_items(quarantine_root(m.guard.roots)) if i.original == str(target)))
    data = item.stored.read_bytes()
    assert data == b"".join(bytes([i]) * 1000 for i in range(20))
    assert item.manifest["size"] == len(data) == 20_000
    assert item.manifest["sha256"] == hashlib.sha256(data).hexdigest()
