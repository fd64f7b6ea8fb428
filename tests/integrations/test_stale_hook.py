"""A hook command installed by an older guard, whose hook client file is gone.

guard's hook client moved when its folder was renamed (integrations/ -> hooks/). A host
settings file written before the move still runs the old file: Python cannot open it,
the command's ``|| exit 2`` turns that into a block, so the host blocks every call (fail
closed, but the user is stuck). ``guard doctor`` must say so, as guard's own stale entry
with its fix, never as someone else's hook or as "not wired", and ``guard install`` must
replace the entry, not add a second one beside it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from guard.hooks.adapter import OUR_COMMAND
from guard.setup.install import hook_command

from .test_install import commands, guard

#: The command ``guard install claude-code`` wrote before the rename, in an install whose
#: files are gone (the path is the pre-rename path of the hook client).
OLD_CLIENT = "/opt/old/site-packages/guard/integrations/_client.py"  # pre-rename path


def _old_command(host: str) -> str:
    return f"{sys.executable} -I {OLD_CLIENT} {host} || exit 2"


def _write_old_settings(repo: Path) -> Path:
    path = repo / ".claude/settings.json"
    path.parent.mkdir()
    theirs = {"type": "command", "command": "lint --fast"}
    old = {"type": "command", "command": _old_command("claude-code")}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [theirs]},
        {"matcher": "*", "hooks": [old]},
    ]}}))
    return path


def test_the_old_command_is_recognised_as_guards() -> None:
    assert OUR_COMMAND.search(_old_command("claude-code"))
    assert OUR_COMMAND.search(hook_command("claude-code"))
    assert not OUR_COMMAND.search("lint --fast")


def test_the_host_blocks_every_call_while_the_old_file_is_missing(repo: Path) -> None:
    """What Claude Code runs: the command through a shell, the payload on stdin. Exit 2 is
    Claude Code's "block this call": the missing file fails closed."""
    payload = {"session_id": "s", "cwd": str(repo), "hook_event_name": "PreToolUse",
               "tool_name": "Write", "tool_input": {"file_path": str(repo / "x"), "content": ""}}
    proc = subprocess.run(["/bin/sh", "-c", _old_command("claude-code")], input=json.dumps(payload),
                          capture_output=True, text=True, cwd=repo, timeout=60, check=False)
    assert proc.returncode == 2, proc
    assert not (repo / "x").exists()


def test_doctor_reports_the_old_command_as_stale_with_the_fix(
    repo: Path, env: dict[str, str]
) -> None:
    _write_old_settings(repo)
    proc = guard("doctor", "--json", cwd=repo, env=env, code=1)
    [claude] = [c for c in json.loads(proc.stdout)["hosts"] if c["name"] == "claude-code (project)"]
    assert claude["status"] == "broken", claude
    assert claude["commands"] == [_old_command("claude-code")]
    assert "stale hook command" in claude["detail"] and OLD_CLIENT in claude["detail"]
    assert "guard install claude-code --project" in claude["detail"]


def test_install_replaces_the_old_command_and_keeps_theirs(
    repo: Path, env: dict[str, str]
) -> None:
    path = _write_old_settings(repo)
    proc = guard("install", "claude-code", "--project", cwd=repo, env=env)
    assert "replaced 1" in proc.stdout, proc.stdout
    data = json.loads(path.read_text())
    assert commands(data, "PreToolUse") == ["lint --fast", hook_command("claude-code")]
    assert OLD_CLIENT not in path.read_text()
    report = json.loads(guard("doctor", "--json", cwd=repo, env=env).stdout)
    status = {c["name"]: c["status"] for c in report["hosts"]}
    assert status["claude-code (project)"] == "ok"
