"""End to end: the real Claude Code CLI writes a transcript, `guard replay` decides it.

Claude Code (pinned) runs headless against the scripted Messages API on 127.0.0.1,
without guard (acceptEdits, Bash allowed), so every call runs and lands in its session
transcript under $HOME/.claude/projects/. Replaying that fresh transcript for the plan
agent: the Write into src/ and the `sed -i` are denied, the Read, the plan-file Write
and the `ls` allowed, exit 3. The calls are the replay fixtures' five
(tests/replay/make_fixtures.py makes the checked-in transcripts with the same run).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from components import require_component

from .fake_anthropic import Script, ToolUse
from .host_runs import claude_print, five_calls
from .hosts_common import clean_env, make_repo
from .test_claude_code_cli import _install_claude


@pytest.fixture(scope="module")
def claude_binary() -> str:
    binary, why = _install_claude()
    return str(require_component("the Claude Code CLI", binary, why))


def test_replay_of_a_fresh_claude_code_transcript(claude_binary: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    repo = make_repo(tmp_path, env)
    steps = five_calls(ToolUse, "toolu_", "Read", "Write", "Bash", "file_path", repo)
    script = Script(steps)
    proc = claude_print(claude_binary, repo, env, script, "--permission-mode", "acceptEdits",
                        "--allowedTools", "Bash", "--max-turns", "20")
    assert set(script.tool_results()) == {s.id for s in steps}, proc.stderr[-2000:]
    assert (repo / "src/new.py").exists()  # no guard during the session: it all ran
    [transcript] = sorted((home / ".claude/projects").glob("*/*.jsonl"))

    replay = subprocess.run(
        [sys.executable, "-m", "guard", "replay", "--agent", "plan", "--json",
         str(home / ".claude/projects")],
        capture_output=True, text=True, timeout=300, check=False)
    assert replay.returncode == 3, replay.stderr
    got = {r["call_id"]: r for r in json.loads(replay.stdout)["calls"]}
    assert set(got) == {s.id for s in steps}
    from guard.sandbox.landlock import abi_version

    # `ls src` runs confined behind Claude Code's hook (it can rewrite a call): so in replay
    ls = "allow_confined" if abi_version() > 0 else "allow"
    assert {i: r["decision"] for i, r in got.items()} == {
        "toolu_read": "allow", "toolu_write": "deny", "toolu_sed": "deny", "toolu_plan": "allow",
        "toolu_ls": ls}
    assert got["toolu_sed"]["rule"] == "agents.plan.write.default"
    assert {r["cwd"] for r in got.values()} == {str(repo)}
    assert all(r["source"].startswith(f"{transcript}:") for r in got.values())
    assert all(r["host"] == "claude-code" and not r["sidechain"] for r in got.values())
