"""End to end: the real Gemini CLI (pinned), wired by `guard install gemini`, a scripted model.

``gemini -y -p`` runs headless against a scripted Gemini API on 127.0.0.1
(``GOOGLE_GEMINI_BASE_URL``; ``-m`` names the model, so no routing side call).
``guard install gemini`` writes the user settings
by default, whose hooks Gemini loads in any workspace, so the run below uses an
untrusted workspace (``--skip-trust``) and still blocks. A project install in
an untrusted workspace is skipped by Gemini (zero hooks, the write lands):
``guard install`` exits 1 and ``guard doctor`` says so; trusted, it blocks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import hosts

from .fake_models import Call, Script
from .host_runs import gemini_home, gemini_run, host_project
from .hosts_common import (
    audit_records,
    check_version,
    doctor,
    guard,
    host_check,
    npm_binary,
    snapshot,
)

VERSION = hosts.by_name("gemini").version


@pytest.fixture(scope="session")
def gemini() -> str:
    binary = npm_binary("@google/gemini-cli", VERSION, "gemini-cli", "gemini")
    check_version(binary, VERSION)
    return binary


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    with host_project(tmp_path, gemini_home) as made:
        yield made


def run_gemini(gemini: str, repo: Path, env: dict[str, str], script: Script,
               *flags: str) -> None:
    gemini_run(gemini, repo, {**env, "GUARD_AGENT": "plan"}, script, "-y", *flags)


def test_gemini_plan_mode_changes_only_the_plan(
    gemini: str, project: tuple[Path, dict[str, str]]
) -> None:
    """Attacks: write_file and replace into src/, a shell redirection. User-scope install
    (the default), untrusted workspace: Gemini still runs the hook."""
    repo, env = project
    proc = guard("install", "gemini", cwd=repo, env=env)  # as the README says
    assert "checked: gemini will run the hook" in proc.stdout
    src_before = snapshot(repo / "src")
    steps = [
        Call("g_write", "write_file", {"file_path": "src/new.py", "content": "owned = True\n"}),
        Call("g_replace", "replace", {"file_path": str(repo / "src/app.py"),
                                      "old_string": "hello", "new_string": "owned",
                                      "instruction": "rename hello"}),
        Call("g_shell", "run_shell_command", {"command": "echo owned > src/y.py",
                                              "description": "write"}),
        Call("g_plan", "write_file", {"file_path": ".openoxide/plans/x.md",
                                      "content": "# Plan\n\n1. change app.py\n"}),
        Call("g_ls", "run_shell_command", {"command": "ls src", "description": "list"}),
    ]
    script = Script(steps)
    run_gemini(gemini, repo, env, script, "--skip-trust")

    assert snapshot(repo / "src") == src_before
    assert (repo / ".openoxide/plans/x.md").read_text() == "# Plan\n\n1. change app.py\n"
    for blocked in ("g_write", "g_replace", "g_shell"):
        assert "guard:" in script.results[blocked], (blocked, script.results[blocked])
    assert "app.py" in script.results["g_ls"]
    records = audit_records(Path(env["HOME"]))
    assert {r["agent"] for r in records} == {"plan"}
    assert [(r["tool_name"], r["decision"]) for r in records] == [
        ("write_file", "deny"), ("replace", "deny"), ("run_shell_command", "deny"),
        ("write_file", "allow"), ("run_shell_command", "allow_confined")]  # ls runs confined
    assert {(r["host_agent"], r["host_agent_version"]) for r in records} == {("gemini", VERSION)}


def test_gemini_project_hook_in_untrusted_workspace_is_reported(
    gemini: str, project: tuple[Path, dict[str, str]]
) -> None:
    repo, env = project
    proc = guard("install", "gemini", "--project", cwd=repo, env=env, check=False)
    assert proc.returncode == 1 and "workspace not trusted" in proc.stderr, proc.stderr
    code, report, human = doctor(repo, env)
    check = host_check(report, "gemini (project)")
    assert code == 1 and check["status"] == "skipped"
    assert check["detail"].startswith("wired, but Gemini will skip it: workspace not trusted")
    print(human)

    script = Script([Call("g_w", "write_file", {"file_path": "src/y.py", "content": "x\n"})])
    run_gemini(gemini, repo, env, script, "--skip-trust")
    assert (repo / "src/y.py").read_text() == "x\n"  # Gemini ran no hook, as doctor said
    (repo / "src/y.py").unlink()

    trusted = {**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    code, report, _ = doctor(repo, trusted)
    assert code == 0 and host_check(report, "gemini (project)")["status"] == "ok"
    script = Script([Call("g_w2", "write_file", {"file_path": "src/y.py", "content": "x\n"})])
    run_gemini(gemini, repo, trusted, script)
    assert not (repo / "src/y.py").exists()
    assert "guard:" in script.results["g_w2"]
