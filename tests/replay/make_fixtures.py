"""Make the replay fixtures: real transcripts written by the real host CLIs.

Each pinned host CLI (installed as scripts/test.sh does) runs headless against the
scripted model servers of tests/e2e/ on 127.0.0.1, with a private home and no guard
hook, in a fresh git repository under ``/tmp/guard-replay/repo``. The same five calls
are scripted for every host: read src/app.py, write src/new.py, ``sed -i`` on
src/app.py, write the plan file .openoxide/plans/x.md, ``ls src``. The transcript
each host wrote is copied into tests/replay/fixtures/ unchanged but for one scrub:
the private home's path becomes ``/home/dev`` (the repository path is kept).

Run from the repository root: ``.venv/bin/python tests/replay/make_fixtures.py``
(see fixtures/README.md). Not a test: pytest does not collect it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from guard import hosts

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: its e2e package and what that imports

from e2e.fake_anthropic import Script as AnthropicScript  # noqa: E402
from e2e.fake_anthropic import ToolUse  # noqa: E402
from e2e.fake_models import Call, Script  # noqa: E402
from e2e.host_runs import (  # noqa: E402
    claude_print,
    codex_exec,
    codex_home,
    codex_patch,
    five_calls,
    gemini_home,
    gemini_run,
    opencode_home,
    opencode_run,
)
from e2e.hosts_common import PREFIX_ROOT, clean_env, make_repo  # noqa: E402

CLAUDE_CODE = hosts.by_name("claude-code")
CODEX = hosts.by_name("codex")
GEMINI = hosts.by_name("gemini")
OPENCODE = hosts.by_name("opencode")

ROOT = Path("/tmp/guard-replay")
REPO = ROOT / "repo"
HOME = ROOT / "home"
OUT = HERE / "fixtures"


def fresh() -> dict[str, str]:
    """A new private home and repository (``REPO``, committed); the host's environment."""
    shutil.rmtree(ROOT, ignore_errors=True)
    HOME.mkdir(parents=True)
    env = clean_env(HOME)
    assert make_repo(ROOT, env) == REPO
    return env


def scrub(text: str) -> str:
    return text.replace(str(HOME), "/home/dev")


def save(src: Path, name: str, drop: tuple[str, ...] = ()) -> None:
    """Copy a transcript, scrubbed; ``drop`` names JSONL record types left out."""
    OUT.mkdir(exist_ok=True)
    lines = src.read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if not drop or json.loads(ln).get("type") not in drop]
    (OUT / name).write_text(scrub("".join(kept)))
    print(f"{name}: {src.stat().st_size} bytes from {src}")


def claude() -> None:
    env = fresh()
    steps = five_calls(ToolUse, "toolu_", "Read", "Write", "Bash", "file_path", REPO)
    binary = PREFIX_ROOT / f"claude-code-{CLAUDE_CODE.version}/node_modules/.bin/claude"
    claude_print(str(binary), REPO, env, AnthropicScript(steps), "--permission-mode",
                 "acceptEdits", "--allowedTools", "Bash", "--max-turns", "20")
    [found] = sorted(HOME.glob(".claude/projects/*/*.jsonl"))
    save(found, "claude-code.jsonl", drop=("attachment", "api-request-shape"))


def codex() -> None:
    env = fresh()
    codex_home(HOME, env)
    steps = [
        Call("call_read", "exec_command", {"cmd": "cat src/app.py"}),
        Call("call_write", "apply_patch", codex_patch("Add", "src/new.py", "+owned = True\n"),
             kind="custom"),
        Call("call_sed", "exec_command", {"cmd": "sed -i 's/hello/owned/' src/app.py"}),
        Call("call_plan", "apply_patch",
             codex_patch("Add", ".openoxide/plans/x.md", "+# Plan\n+\n+1. change app.py\n"),
             kind="custom"),
        Call("call_ls", "exec_command", {"cmd": "ls src"}),
    ]
    binary = PREFIX_ROOT / f"codex-{CODEX.version}/node_modules/.bin/codex"
    codex_exec(str(binary), REPO, env, Script(steps))
    [found] = sorted(HOME.glob(".codex/sessions/*/*/*/rollout-*.jsonl"))
    save(found, "codex.jsonl")


def gemini() -> None:
    env = fresh()
    gemini_home(HOME, env)
    steps = five_calls(Call, "g_", "read_file", "write_file", "run_shell_command", "file_path",
                       None)
    binary = PREFIX_ROOT / f"gemini-cli-{GEMINI.version}/node_modules/.bin/gemini"
    gemini_run(str(binary), REPO, env, Script(steps), "-y", "--skip-trust")
    [found] = sorted(HOME.glob(".gemini/tmp/*/chats/session-*"))
    save(found, "gemini" + "".join(found.suffixes))


def opencode() -> None:
    env = fresh()
    opencode_home(HOME, env)
    steps = five_calls(Call, "call_", "read", "write", "bash", "filePath", REPO)
    binary = str(PREFIX_ROOT / f"opencode-{OPENCODE.version}/node_modules/.bin/opencode")
    opencode_run(binary, REPO, env, Script(steps))
    # sessions live in OpenCode's SQLite database (which also has account tables);
    # the fixture is the session as `opencode export` writes it
    db = sqlite3.connect(HOME / ".local/share/opencode/opencode.db")
    [(session,)] = db.execute("select id from session").fetchall()
    db.close()
    exported = subprocess.run([binary, "export", session], cwd=REPO, env=env, check=True,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300).stdout
    (ROOT / "export.json").write_text(exported)
    save(ROOT / "export.json", "opencode.json")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["claude", "codex", "gemini", "opencode"]:
        globals()[name]()
