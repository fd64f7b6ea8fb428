"""Attack: leave the worktree while building, then write it from outside once plan mode starts.

The agent run (a Claude Code session id) makes one call in the worktree while building,
then `cd`s into a folder outside every worktree (one Claude Code's ``--add-dir`` gave it).
The user runs ``guard plan start`` in the worktree; the agent's next command writes the
worktree's ``src/app.py`` with a program whose target no analysis sees. Through the hook
``guard install claude-code --project`` wrote, as root and as uid 65534: the command is
rewritten to run confined with the worktree read-only (the run was seen there, so it is
bound to it), and running the rewritten command as the host would leaves the file as it
was. The same command from a run never seen in the worktree is the control: it is
answered as the host's build call, unchanged, and run bare it does write the file.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import needs_landlock
from unprivileged import USERS, as_user, chown_tree, require_unprivileged
from walls_support import PYTHON, Project, install_hook, py, run_project

pytestmark = needs_landlock


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    yield from run_project(str(request.param))


def hook(proj: Project, command: str, cwd: Path, host_session: str) -> dict[str, Any]:
    """The installed hook's answer to a Claude Code Bash call (acceptEdits: building)."""
    payload = {
        "session_id": host_session, "transcript_path": str(proj.base / "t.jsonl"),
        "cwd": str(cwd), "prompt_id": "p-1", "permission_mode": "acceptEdits",
        "effort": "medium", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command, "description": "step"}, "tool_use_id": "toolu_1",
    }  # fmt: skip
    proc = subprocess.run(
        as_user(proj.user, ["/bin/sh", "-c", install_hook(proj)]),
        input=json.dumps(payload), cwd=cwd, env=proj.env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)["hookSpecificOutput"]
    return out


def test_a_run_seen_while_building_is_confined_from_an_added_dir(proj: Project) -> None:
    added = proj.base / "added"
    added.mkdir()
    chown_tree(added, proj.user)
    write = py(f"open({str(proj.victim)!r}, 'w').write('pwned')")

    first = hook(proj, f"cd {added}", proj.root, "cc-run")
    assert first["permissionDecision"] == "allow" and "updatedInput" not in first, first
    started = subprocess.run(
        as_user(proj.user, [PYTHON, "-m", "guard", "plan", "start", "Refactor"]),
        cwd=proj.root, env=proj.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr

    control = hook(proj, write, added, "cc-never-there")
    assert control["permissionDecision"] == "allow" and "updatedInput" not in control, control

    answer = hook(proj, write, added, "cc-run")
    assert answer["permissionDecision"] == "allow", answer
    rewritten = answer["updatedInput"]["command"]
    assert "run_confined.py" in rewritten and f"--plans {proj.plans}" in rewritten, rewritten
    ran = subprocess.run(
        as_user(proj.user, ["bash", "-c", rewritten]), cwd=added, env=proj.env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode != 0, ran
    assert proj.victim.read_text() == "print('original')\n", "src/ unchanged"

    bare = subprocess.run(
        as_user(proj.user, ["bash", "-c", write]), cwd=added, env=proj.env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bare.returncode == 0 and proj.victim.read_text() == "pwned", "the attack is real"
