"""Never lose data on a crash: guard SIGKILLed at random moments of its writing operations.

Each operation runs for real (guard's public API in a loop, or the CLI) in its
own process, which is SIGKILLed at a random moment. Then the disk is checked
and guard is started again: session and settings files parse and keep the
user's content, every violating version is in place or in quarantine with a
manifest that describes the stored bytes, baseline content is in place or
restorable, and the restarted operation succeeds.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from guard.monitor.quarantine import list_items

from .faults import kill_after, parse_jsonl, run_ok, sha256, start, wait_line

ROUNDS = int(os.environ.get("GUARD_CRASH_ROUNDS", "6"))

SESSION_LOOP = """
import sys
from pathlib import Path
from guard.planning.session import Session
from guard.planning.handshake import UserDecision, plan_enter, plan_exit
s = Session.load_or_start("crash-test", sys.argv[1])
print("ready", flush=True)
for i in range(int(sys.argv[2])):
    out = plan_enter(s, True, title=f"plan {i}")
    assert out.ok, out.text
    Path(s.plan_path).write_text(f"# plan {i}\\n")
    out = plan_exit(s, UserDecision.approve())
    assert out.ok, out.text
"""


def test_session_transactions_killed_at_random_leave_parseable_sessions(
    repo: Path, env: dict[str, str]
) -> None:
    from guard.planning import event_bus
    from guard.planning.session import Session

    rng = random.Random(5)
    for _ in range(ROUNDS):
        proc = start(SESSION_LOOP, str(repo), "100000", env=env, cwd=repo)
        assert proc.stdout is not None
        wait_line(proc.stdout, "ready")
        kill_after(proc, rng, 0.05, 1.5)
        sessions = Session.list_all(repo)  # every session file parses and validates
        assert [s.id for s in sessions] == ["crash-test"]
        assert sessions[0].mode.value in ("plan", "build")
        event_bus.read_events(sessions[0])  # every event line parses
        parse_jsonl(sessions[0].events_path)
        # guard starts again and the session goes on
        run_ok(SESSION_LOOP, str(repo), "1", env=env, cwd=repo)


INSTALL_LOOP = """
import sys
from guard.setup.install import install, uninstall
print("ready", flush=True)
for _ in range(int(sys.argv[2])):
    install("claude-code", "project", cwd=sys.argv[1])
    uninstall("claude-code", "project", cwd=sys.argv[1])
"""

USER_SETTINGS = {
    "model": "users-own-model",
    "permissions": {"deny": ["Read(./secrets/**)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/mine"}]}
        ]
    },
}


def users_content_is_intact(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    assert data["model"] == "users-own-model"
    assert data["permissions"] == USER_SETTINGS["permissions"]
    commands = [h["command"] for e in data["hooks"]["PreToolUse"] for h in e["hooks"]]
    assert "/usr/local/bin/mine" in commands
    return dict(data)


def test_install_and_uninstall_killed_at_random_leave_the_settings_file_whole(
    repo: Path, env: dict[str, str]
) -> None:
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USER_SETTINGS, indent=2))
    rng = random.Random(6)
    for _ in range(ROUNDS):
        proc = start(INSTALL_LOOP, str(repo), "100000", env=env, cwd=repo)
        assert proc.stdout is not None
        wait_line(proc.stdout, "ready")
        kill_after(proc, rng, 0.05, 1.5)
        users_content_is_intact(settings)
        backup = settings.with_name(settings.name + ".guard-backup")
        if backup.exists():
            users_content_is_intact(backup)
    # the CLI works on what is left
    cli = [sys.executable, "-m", "guard", "install", "claude-code"]
    proc = subprocess.run(cli, cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    data = users_content_is_intact(settings)
    ours = [
        h["command"]
        for e in data["hooks"]["PreToolUse"]  # type: ignore[index]
        for h in e["hooks"]
        # the command itself, not the message for a machine without guard that follows it
        if "_client.py" in h["command"].split(" || ")[0]
    ]
    assert len(ours) == 1


def watch(repo: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "guard", "watch", "--restore", "--json", "-w", str(repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=repo,
    )


class Agent(threading.Thread):
    """Writes distinct versions to distinct paths, one every few milliseconds, until stopped."""

    def __init__(self, repo: Path, tag: str, tracked: list[Path]) -> None:
        super().__init__(daemon=True)
        self.repo, self.tag, self.tracked = repo, tag, list(tracked)
        self.versions: dict[Path, bytes] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            if self.tracked and i % 3 == 0:
                path = self.tracked.pop()  # each tracked file changed once
            else:
                path = self.repo / "src" / f"new-{self.tag}-{i}.py"
            data = f"agent version {self.tag}-{i}\n".encode() * (1 + i % 50)
            path.write_bytes(data)
            self.versions[path] = data
            i += 1
            time.sleep(0.005)


def quarantined(repo: Path) -> dict[str, list[bytes]]:
    """original path -> stored bytes of each item; checks each manifest against its bytes."""
    out: dict[str, list[bytes]] = {}
    for item in list_items(repo / ".openoxide" / "quarantine"):
        stored = item.stored.read_bytes()
        m = item.manifest
        assert m["size"] == len(stored) and m["sha256"] == sha256(stored), item.id
        out.setdefault(item.original, []).append(stored)
    return out


def test_watch_restore_killed_at_random_loses_no_version(
    repo: Path, env: dict[str, str]
) -> None:
    """The monitor is SIGKILLed while it quarantines and restores an agent's writes."""
    originals = {}
    for n in range(40):
        p = repo / "src" / f"tracked{n}.py"
        p.write_bytes(f"original {n}\n".encode())
        originals[p] = p.read_bytes()
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "commit", "-qm", "more"], cwd=repo, check=True, env=env)
    rng = random.Random(7)
    tracked = list(originals)
    rng.shuffle(tracked)
    written: dict[Path, bytes] = {}
    for round_ in range(ROUNDS):
        monitor = watch(repo, env)
        assert monitor.stdout is not None
        wait_line(monitor.stdout, '"event": "start"')
        agent = Agent(repo, str(round_), tracked[round_ * 6 : round_ * 6 + 6])
        agent.start()
        kill_after(monitor, rng, 0.05, 1.2)
        agent.stop.set()
        agent.join()
        written.update(agent.versions)
        stored = quarantined(repo)
        for path, data in written.items():
            here = path.read_bytes() if path.exists() else None
            assert here == data or data in stored.get(str(path), []), f"lost {path}"
        for path, data in originals.items():
            here = path.read_bytes() if path.exists() else None
            # the original, the agent's version not yet handled, or gone (in git): never a mix
            assert here in (data, written.get(path), None), f"half-restored {path}: {here!r}"
        for log in (Path(env["HOME"]) / ".local/share/openoxide/audit").glob("*.jsonl*"):
            parse_jsonl(log)
    # guard starts again on what is left
    monitor = watch(repo, env)
    assert monitor.stdout is not None
    wait_line(monitor.stdout, '"event": "start"')
    monitor.terminate()
    monitor.communicate(timeout=60)


RESTORE_LOOP = """
import sys
from pathlib import Path
from guard.monitor.quarantine import list_items, restore_item
items = [i for i in list_items(Path(sys.argv[1])) if not i.manifest.get("restored_at")]
print("ready", flush=True)
for item in items:
    restore_item(item)
"""


def test_quarantine_restore_killed_at_random_loses_no_version(
    repo: Path, env: dict[str, str]
) -> None:
    monitor = watch(repo, env)
    assert monitor.stdout is not None
    wait_line(monitor.stdout, '"event": "start"')
    versions = {}
    for n in range(150):
        p = repo / "src" / f"v{n}.py"
        p.write_bytes(f"version {n}\n".encode() * (n + 1))
        versions[p] = p.read_bytes()
    deadline = time.monotonic() + 120
    while any(p.exists() for p in versions) and time.monotonic() < deadline:
        time.sleep(0.2)
    monitor.terminate()
    monitor.communicate(timeout=60)
    root = repo / ".openoxide" / "quarantine"
    assert len(list_items(root)) >= len(versions)
    rng = random.Random(8)
    for _ in range(ROUNDS):
        proc = start(RESTORE_LOOP, str(root), env=env, cwd=repo)
        assert proc.stdout is not None
        wait_line(proc.stdout, "ready")
        kill_after(proc, rng, 0.0, 0.15)
        items = list_items(root)  # every manifest parses
        for path, data in versions.items():
            in_q = [i for i in items if i.original == str(path) and os.path.lexists(i.stored)]
            here = path.read_bytes() if path.exists() else None
            assert here == data or any(i.stored.read_bytes() == data for i in in_q), path
            assert here in (data, None), f"half-restored {path}"
    run_ok(RESTORE_LOOP, str(root), env=env, cwd=repo)
    for path, data in versions.items():
        assert path.read_bytes() == data
