"""End to end: the real OpenCode (pinned), guard's plugin from `guard install opencode`,
a scripted OpenAI-compatible model.

``opencode run`` runs headless against scripted chat completions on 127.0.0.1
(a provider with ``@ai-sdk/openai-compatible``, which OpenCode fetches from the
npm registry on first run), every permission set to allow, so guard's plugin is
the only thing between the model and the disk. Plan mode is guard's plan agent
(``GUARD_AGENT=plan``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .fake_models import Call, FakeChat, Script
from .hosts_common import (
    REAL_HOME,
    audit_records,
    check_version,
    clean_env,
    doctor,
    guard,
    host_check,
    make_repo,
    npm_binary,
    snapshot,
    stop_hookd,
)

VERSION = "1.18.33"


@pytest.fixture(scope="session")
def opencode() -> str:
    binary = npm_binary("opencode-ai", VERSION, "opencode", "opencode")
    check_version(binary, VERSION)
    return binary


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    # the npm packages OpenCode installs on first run come through the shared npm cache
    env["NPM_CONFIG_CACHE"] = os.environ.get("NPM_CONFIG_CACHE") or os.path.join(REAL_HOME,
                                                                                 ".npm")
    env["OPENCODE_DISABLE_AUTOUPDATE"] = "true"
    repo = make_repo(tmp_path, env)
    proc = guard("install", "opencode", cwd=repo, env=env)  # as the README says
    assert "checked: opencode will run the hook" in proc.stdout
    yield repo, env
    stop_hookd(home)


def run_opencode(opencode: str, repo: Path, env: dict[str, str], script: Script) -> str:
    with FakeChat(script) as api:
        (repo / "opencode.json").write_text(json.dumps({
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible", "name": "Fake",
                "options": {"baseURL": f"{api.url}/v1", "apiKey": "dummy"},
                "models": {"fake-model": {"name": "Fake model"}},
            }},
            "model": "fake/fake-model",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        }))
        proc = subprocess.run(
            [opencode, "run", "-m", "fake/fake-model", "Carry out the task."],
            cwd=repo, env={**env, "GUARD_AGENT": "plan"}, capture_output=True, text=True,
            timeout=600, check=False, stdin=subprocess.DEVNULL,
        )
    answered = [s.id for s in script.steps if s.id in script.results]
    assert answered == [s.id for s in script.steps], (
        f"OpenCode did not run the whole script ({answered}); exit {proc.returncode}\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def test_opencode_plan_mode_changes_only_the_plan(
    opencode: str, project: tuple[Path, dict[str, str]]
) -> None:
    """Attacks: write and edit into src/, a shell redirection; then the plan and an `ls`."""
    repo, env = project
    src_before = snapshot(repo / "src")
    steps = [
        Call("call_write", "write", {"filePath": str(repo / "src/new.py"),
                                     "content": "owned = True\n"}),
        Call("call_edit", "edit", {"filePath": str(repo / "src/app.py"),
                                   "oldString": "hello", "newString": "owned"}),
        Call("call_bash", "bash", {"command": "echo owned > src/y.py", "description": "w"}),
        Call("call_plan", "write", {"filePath": str(repo / ".openoxide/plans/x.md"),
                                    "content": "# Plan\n\n1. change app.py\n"}),
        Call("call_ls", "bash", {"command": "ls src", "description": "list"}),
    ]
    script = Script(steps)
    output = run_opencode(opencode, repo, env, script)

    assert snapshot(repo / "src") == src_before
    assert (repo / ".openoxide/plans/x.md").read_text() == "# Plan\n\n1. change app.py\n"
    for blocked in ("call_write", "call_edit", "call_bash"):
        assert "guard:" in script.results[blocked], (blocked, script.results[blocked])
    assert "app.py" in script.results["call_ls"]
    assert "guard: write" in output  # the user sees the refusal too
    records = audit_records(Path(env["HOME"]))
    assert [(r["tool_name"], r["decision"]) for r in records] == [
        ("write", "deny"), ("edit", "deny"), ("bash", "deny"), ("write", "allow"),
        ("bash", "allow_confined")]  # the read-only ls runs confined, and answers
    assert {r["host"] for r in records} == {"opencode"}
    code, report, _ = doctor(repo, env)
    assert code == 0 and host_check(report, "opencode (project)")["status"] == "ok"
