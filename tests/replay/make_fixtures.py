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
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "e2e")]

from fake_anthropic import FakeAnthropic, ToolUse  # noqa: E402
from fake_anthropic import Script as AnthropicScript  # noqa: E402
from fake_models import Call, FakeChat, FakeGemini, FakeResponses, Script  # noqa: E402

ROOT = Path("/tmp/guard-replay")
REPO = ROOT / "repo"
HOME = ROOT / "home"
CACHE = Path(os.path.expanduser("~/.cache/openoxide-guard"))
OUT = HERE / "fixtures"
PLAN = "# Plan\n\n1. change app.py\n"


def fresh(env: dict[str, str]) -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    (REPO / "src").mkdir(parents=True)
    HOME.mkdir()
    (REPO / "src/app.py").write_text("print('hello')\n")
    (REPO / "README.md").write_text("demo\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(REPO), *args], check=True, env=env)


def base_env() -> dict[str, str]:
    from hosts_common import clean_env

    return clean_env(HOME)


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
    env = base_env()
    fresh(env)
    steps = [
        ToolUse("toolu_read", "Read", {"file_path": str(REPO / "src/app.py")}),
        ToolUse("toolu_write", "Write", {"file_path": str(REPO / "src/new.py"),
                                        "content": "owned = True\n"}),
        ToolUse("toolu_sed", "Bash", {"command": "sed -i 's/hello/owned/' src/app.py",
                                      "description": "edit in place"}),
        ToolUse("toolu_plan", "Write", {"file_path": str(REPO / ".openoxide/plans/x.md"),
                                       "content": PLAN}),
        ToolUse("toolu_ls", "Bash", {"command": "ls src", "description": "list"}),
    ]
    binary = CACHE / "claude-code-2.1.332/node_modules/.bin/claude"
    with FakeAnthropic(AnthropicScript(steps)) as api:
        subprocess.run(
            [str(binary), "-p", "Carry out the task.", "--output-format", "json",
             "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "--max-turns", "20"],
            cwd=REPO, check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=300,
            env={**env, "ANTHROPIC_API_KEY": "sk-ant-api03-dummy", "ANTHROPIC_BASE_URL": api.url,
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                 "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"})
    [found] = sorted(HOME.glob(".claude/projects/*/*.jsonl"))
    save(found, "claude-code.jsonl", drop=("attachment", "api-request-shape"))


def codex() -> None:
    env = base_env()
    fresh(env)
    (HOME / ".codex").mkdir()
    env.update(CODEX_HOME=str(HOME / ".codex"), FAKE_MODEL_KEY="dummy")
    (HOME / ".codex/config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "fake"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n\n'
        '[model_providers.fake]\nname = "fake"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'wire_api = "responses"\nenv_key = "FAKE_MODEL_KEY"\nrequest_max_retries = 0\n'
        "stream_max_retries = 0\n"
    )

    def patch(op: str, path: str, body: str) -> dict[str, str]:
        return {"input": f"*** Begin Patch\n*** {op} File: {path}\n{body}*** End Patch\n"}

    steps = [
        Call("call_read", "exec_command", {"cmd": "cat src/app.py"}),
        Call("call_write", "apply_patch", patch("Add", "src/new.py", "+owned = True\n"),
             kind="custom"),
        Call("call_sed", "exec_command", {"cmd": "sed -i 's/hello/owned/' src/app.py"}),
        Call("call_plan", "apply_patch",
             patch("Add", ".openoxide/plans/x.md", "+# Plan\n+\n+1. change app.py\n"),
             kind="custom"),
        Call("call_ls", "exec_command", {"cmd": "ls src"}),
    ]
    binary = CACHE / "codex-0.171.0/node_modules/.bin/codex"
    with FakeResponses(Script(steps)) as api:
        subprocess.run(
            [str(binary), "exec", "--skip-git-repo-check", "-C", str(REPO),
             "-c", f'model_providers.fake.base_url="{api.url}/v1"', "Carry out the task."],
            cwd=REPO, env=env, check=False, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=300)
    [found] = sorted(HOME.glob(".codex/sessions/*/*/*/rollout-*.jsonl"))
    save(found, "codex.jsonl")


def gemini() -> None:
    env = base_env()
    fresh(env)
    (HOME / ".gemini").mkdir()
    (HOME / ".gemini/settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    steps = [
        Call("g_read", "read_file", {"file_path": "src/app.py"}),
        Call("g_write", "write_file", {"file_path": "src/new.py", "content": "owned = True\n"}),
        Call("g_sed", "run_shell_command", {"command": "sed -i 's/hello/owned/' src/app.py",
                                            "description": "edit"}),
        Call("g_plan", "write_file", {"file_path": ".openoxide/plans/x.md", "content": PLAN}),
        Call("g_ls", "run_shell_command", {"command": "ls src", "description": "list"}),
    ]
    binary = CACHE / "gemini-cli-0.61.0/node_modules/.bin/gemini"
    with FakeGemini(Script(steps)) as api:
        subprocess.run(
            [str(binary), "-y", "-m", "gemini-2.5-pro", "--skip-trust", "-p",
             "Carry out the task."],
            cwd=REPO, env={**env, "GEMINI_API_KEY": "dummy", "GOOGLE_GEMINI_BASE_URL": api.url},
            check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    [found] = sorted(HOME.glob(".gemini/tmp/*/chats/session-*"))
    save(found, "gemini" + "".join(found.suffixes))


def opencode() -> None:
    env = base_env()
    fresh(env)
    env["NPM_CONFIG_CACHE"] = os.path.expanduser("~/.npm")
    env["OPENCODE_DISABLE_AUTOUPDATE"] = "true"
    steps = [
        Call("call_read", "read", {"filePath": str(REPO / "src/app.py")}),
        Call("call_write", "write", {"filePath": str(REPO / "src/new.py"),
                                     "content": "owned = True\n"}),
        Call("call_sed", "bash", {"command": "sed -i 's/hello/owned/' src/app.py",
                                  "description": "edit"}),
        Call("call_plan", "write", {"filePath": str(REPO / ".openoxide/plans/x.md"),
                                    "content": PLAN}),
        Call("call_ls", "bash", {"command": "ls src", "description": "list"}),
    ]
    binary = CACHE / "opencode-1.18.33/node_modules/.bin/opencode"
    with FakeChat(Script(steps)) as api:
        (REPO / "opencode.json").write_text(json.dumps({
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible", "name": "Fake",
                "options": {"baseURL": f"{api.url}/v1", "apiKey": "dummy"},
                "models": {"fake-model": {"name": "Fake model"}},
            }},
            "model": "fake/fake-model",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        }))
        subprocess.run([str(binary), "run", "-m", "fake/fake-model", "Carry out the task."],
                       cwd=REPO, env=env, check=False, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=600)
    # sessions live in OpenCode's SQLite database (which also has account tables);
    # the fixture is the session as `opencode export` writes it
    import sqlite3

    db = sqlite3.connect(HOME / ".local/share/opencode/opencode.db")
    [(session,)] = db.execute("select id from session").fetchall()
    db.close()
    exported = subprocess.run([str(binary), "export", session], cwd=REPO, env=env, check=True,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300).stdout
    (ROOT / "export.json").write_text(exported)
    save(ROOT / "export.json", "opencode.json")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["claude", "codex", "gemini", "opencode"]:
        globals()[name]()
