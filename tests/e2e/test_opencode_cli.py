"""End to end: the real OpenCode (pinned), guard's plugin from `guard install opencode`,
a scripted OpenAI-compatible model.

``opencode run`` runs headless against scripted chat completions on 127.0.0.1
(a provider with ``@ai-sdk/openai-compatible``, which OpenCode fetches from the
npm registry on first run), every permission set to allow, so guard's plugin is
the only thing between the model and the disk. Plan mode is guard's plan agent
(``GUARD_AGENT=plan``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import hosts

from .fake_models import Call, Script
from .host_runs import host_project, opencode_home, opencode_run
from .hosts_common import (
    audit_records,
    check_version,
    doctor,
    host_check,
    npm_binary,
    snapshot,
)

VERSION = hosts.by_name("opencode").version


@pytest.fixture(scope="session")
def opencode() -> str:
    binary = npm_binary("opencode-ai", VERSION, "opencode", "opencode")
    check_version(binary, VERSION)
    return binary


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    with host_project(tmp_path, opencode_home, install="opencode") as made:
        yield made


def run_opencode(opencode: str, repo: Path, env: dict[str, str], script: Script) -> str:
    proc = opencode_run(opencode, repo, {**env, "GUARD_AGENT": "plan"}, script)
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
