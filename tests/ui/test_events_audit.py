"""`guard events --audit`: every event `guard ui` shows, for API consumers too."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from guard.planning import Mode, Session
from tests.ui.conftest import DEADLINE, claude_write, hook

GUARD = [sys.executable, "-c", "from guard.cli import main; main()"]


def test_events_audit_json_has_the_hooks_refusals_and_the_session_events(repo: Path) -> None:
    Session.start(repo, Mode.PLAN, title="Add caching")
    assert hook(repo, claude_write(repo, "src/app.py")) == "deny"  # the attack, refused
    proc = subprocess.run(
        [*GUARD, "events", "--audit", "--json", "--cwd", str(repo)],
        capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert all(x["schema_version"] == 1 for x in lines)
    assert lines[0]["type"] == "mode_changed" and "log" not in lines[0]
    (refused,) = [x for x in lines if x.get("log") == "audit"]
    said = (refused["type"], refused["decision"], refused["tool_name"])
    assert said == ("verdict", "deny", "Write")
    assert refused["host"] == "claude-code" and refused["reason"] and refused["rule"]
    text = subprocess.run(
        [*GUARD, "events", "--audit", "--cwd", str(repo)],
        capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ),
    )  # fmt: skip
    assert "audit DENY claude-code Write" in text.stdout, text.stdout


def test_events_follow_audit_prints_a_refusal_as_it_happens(repo: Path) -> None:
    Session.start(repo, Mode.PLAN, title="Add caching")
    proc = subprocess.Popen(
        [*GUARD, "events", "--follow", "--audit", "--json", "--cwd", str(repo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    out = proc.stdout
    assert out is not None
    threading.Thread(target=lambda: [lines.put(x) for x in out], daemon=True).start()

    def next_line() -> dict[str, object]:
        try:
            found: dict[str, object] = json.loads(lines.get(timeout=DEADLINE))
        except queue.Empty:
            raise AssertionError("guard events --follow printed nothing more") from None
        return found

    try:
        assert next_line()["type"] == "mode_changed"  # the follower runs: it printed the start
        assert hook(repo, claude_write(repo, "src/app.py")) == "deny"
        line = next_line()
        while line.get("log") != "audit":
            line = next_line()
        assert line["decision"] == "deny"
    finally:
        proc.terminate()
        proc.wait(60)
