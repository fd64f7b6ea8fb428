"""Nothing half-written on a full disk: each writing operation on a real, full tmpfs.

Each operation must fail with a clear error (no traceback), decisions must
fail closed, and the files it would have changed must be as before, whole,
with no temporary file left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guard.audit import AuditError, logfile

from .conftest import claude_payload
from .faults import fill, leftovers, parse_jsonl, small_disk


def git_repo(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / ".openoxide" / "plans").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hello')\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(root)], check=True)
    subprocess.run([*git, "-C", str(root), "add", "."], check=True)
    subprocess.run([*git, "-C", str(root), "commit", "-qm", "init"], check=True)
    return root


def cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        check=False,
    )


def clear_error(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "No space left on device" in proc.stderr or "space" in proc.stderr, proc.stderr


def test_audit_append_on_a_full_disk_fails_whole(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        log = disk / "audit" / "p.jsonl"
        for i in range(5):
            logfile.append({"i": i}, log)
        before = log.read_bytes()
        fill(disk, keep=4096)  # room for part of the next record, not all of it
        with pytest.raises(AuditError, match=r"p\.jsonl.*No space left on device"):
            logfile.append({"i": 5, "pad": "x" * 40000}, log)
        assert log.read_bytes() == before  # the partial record was taken back
        assert [r["i"] for r in logfile.read(log)] == [0, 1, 2, 3, 4]


def test_a_hook_call_on_a_full_disk_is_blocked_with_the_reason(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The audit log cannot record the decision: the call must not go through."""
    repo = git_repo(tmp_path / "repo")
    with small_disk(tmp_path / "disk") as disk:
        hook_env = {**env, "XDG_DATA_HOME": str(disk), "GUARD_AGENT": "build"}
        fill(disk)
        client = Path(logfile.__file__).parents[1] / "hooks" / "_client.py"
        read = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
        proc = subprocess.run(
            [sys.executable, "-I", str(client), "claude-code"],
            input=json.dumps(read),
            capture_output=True,
            text=True,
            cwd=repo,
            env=hook_env,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 2, proc.stdout  # a block, never an allow
        assert "audit log" in proc.stderr and "No space left on device" in proc.stderr


def test_install_on_a_full_disk_leaves_the_settings_file_as_it_was(
    tmp_path: Path, env: dict[str, str]
) -> None:
    with small_disk(tmp_path / "disk", size="4m") as disk:
        repo = git_repo(disk / "repo")
        settings = repo / ".claude" / "settings.json"
        settings.parent.mkdir()
        original = json.dumps({"model": "mine", "pad": "p" * 20000}, indent=2)
        settings.write_text(original)
        fill(disk)
        clear_error(cli(["install", "claude-code"], repo, env))
        assert settings.read_text() == original
        backup = settings.with_name("settings.json.guard-backup")
        assert not backup.exists() or backup.read_text() == original
        assert leftovers(repo) == []


def test_plan_enter_on_a_full_disk_fails_and_leaves_the_session_whole(
    tmp_path: Path, env: dict[str, str]
) -> None:
    from guard.planning.session import Session

    with small_disk(tmp_path / "disk", size="4m") as disk:
        repo = git_repo(disk / "repo")
        started = cli(["session", "start", "--cwd", str(repo)], repo, env)
        assert started.returncode == 0, started.stderr
        (session,) = Session.list_all(repo)
        before = session.path.read_bytes()
        fill(disk)
        clear_error(cli(["mode", "plan", "--session", session.id, "--cwd", str(repo)], repo, env))
        after = Session.list_all(repo)  # parses
        assert [s.mode.value for s in after] == ["build"]
        assert session.path.read_bytes() == before
        if session.events_path.exists():
            parse_jsonl(session.events_path)
        assert leftovers(repo) == []


def test_quarantine_restore_on_a_full_disk_is_finished_by_the_next_run(
    tmp_path: Path, env: dict[str, str]
) -> None:
    from guard.monitor.quarantine import Quarantine, list_items

    with small_disk(tmp_path / "disk", size="4m") as disk:
        repo = git_repo(disk / "repo")
        victim = repo / "src" / "dropped.py"
        victim.write_bytes(b"agent bytes\n" * 100)
        q = Quarantine(repo / ".openoxide" / "quarantine", "s1")
        item = q.put(str(victim), "src/dropped.py", {"event": "created"})
        assert not victim.exists()
        fill(disk)
        proc = cli(["quarantine", "restore", item.id, "-w", str(repo)], repo, env)
        if proc.returncode != 0:
            clear_error(proc)
        (now,) = list_items(repo / ".openoxide" / "quarantine")  # the manifest parses
        assert victim.exists() or now.stored.exists()  # in place or in quarantine
        for f in disk.glob("filler-*"):
            f.unlink()
        if not now.manifest.get("restored_at"):
            done = cli(["quarantine", "restore", item.id, "-w", str(repo)], repo, env)
            assert done.returncode == 0, done.stderr
        assert victim.read_bytes() == b"agent bytes\n" * 100
        assert list_items(repo / ".openoxide" / "quarantine")[0].manifest["restored_at"]
        assert leftovers(repo) == []


def test_a_session_event_on_a_full_disk_is_not_left_half_written(tmp_path: Path) -> None:
    from guard.planning import event_bus as events
    from guard.planning.session import Mode, Session

    with small_disk(tmp_path / "disk", size="4m") as disk:
        repo = git_repo(disk / "repo")
        session = Session.start(repo)
        events.publish(session, events.ModeChanged(old=Mode.BUILD, new=Mode.BUILD, reason="a"))
        before = session.events_path.read_bytes()
        fill(disk, keep=4096)  # room for part of the next event only
        big = events.ModeChanged(old=Mode.BUILD, new=Mode.BUILD, reason="b" * 40000)
        with pytest.raises(OSError, match="No space left"):
            events.publish(session, big)
        assert session.events_path.read_bytes() == before
        parse_jsonl(session.events_path)


def test_watch_restore_when_the_agent_fills_the_disk_keeps_every_version(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Attack: the agent fills the disk so that guard cannot write its manifests or copies."""
    from guard.monitor.quarantine import list_items

    from .faults import sha256, wait_line

    with small_disk(tmp_path / "disk", size="8m") as disk:
        repo = git_repo(disk / "repo")
        monitor = subprocess.Popen(
            [sys.executable, "-m", "guard", "watch", "--restore", "--json", "-w", str(repo)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=repo,
        )
        assert monitor.stdout is not None
        wait_line(monitor.stdout, '"event": "start"')
        written = {}
        fill(repo)  # the agent's filler files (violations themselves) take every byte
        for n in range(5):
            p = repo / "src" / f"late{n}.py"
            try:
                p.write_bytes(b"late agent bytes\n")
            except OSError:
                continue
            written[p] = p.read_bytes()
        app = repo / "src" / "app.py"
        try:
            app.write_bytes(b"agent edit\n")
            written[app] = b"agent edit\n"
        except OSError:
            pass
        import time

        time.sleep(5)  # let the monitor handle what it saw; then stop it
        monitor.terminate()
        _out, err = monitor.communicate(timeout=120)
        assert "Traceback" not in err, err
        items = list_items(repo / ".openoxide" / "quarantine")  # every manifest parses
        stored: dict[str, list[bytes]] = {}
        for item in items:
            data = item.stored.read_bytes()
            assert item.manifest["sha256"] == sha256(data), item.id
            stored.setdefault(item.original, []).append(data)
        for path, data in written.items():
            here = path.read_bytes() if path.exists() else None
            assert here == data or data in stored.get(str(path), []), f"lost {path}"
        assert leftovers(repo) == []
