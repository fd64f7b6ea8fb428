"""End to end: the real Codex CLI (pinned), guard wired by `guard install codex`, a scripted model.

``codex exec`` runs headless against a scripted Responses API on 127.0.0.1 with
Codex's own sandbox off (``danger-full-access``), so guard's hook is the only
thing between the model and the disk. Plan mode is guard's plan agent
(``GUARD_AGENT=plan``: under ``codex exec`` Codex reports every call as
``bypassPermissions``). Codex runs a hook only once it is trusted: installed and
trusted, it blocks; trust removed, Codex skips it silently (the write happens)
and ``guard doctor`` says so and exits 1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import hosts

from .fake_models import Call, Script
from .host_runs import codex_exec, codex_home, host_project
from .host_runs import codex_patch as patch
from .hosts_common import (
    audit_records,
    check_version,
    doctor,
    guard,
    host_check,
    npm_binary,
    snapshot,
)

VERSION = hosts.by_name("codex").version


@pytest.fixture(scope="session")
def codex() -> str:
    binary = npm_binary("@openai/codex", VERSION, "codex", "codex")
    check_version(binary, VERSION)
    return binary


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    with host_project(tmp_path, codex_home, install="codex") as made:
        yield made


def run_codex(codex: str, repo: Path, env: dict[str, str], script: Script) -> str:
    proc = codex_exec(codex, repo, {**env, "GUARD_AGENT": "plan"}, script)
    return proc.stdout + proc.stderr


def test_codex_plan_mode_changes_only_the_plan(
    codex: str, project: tuple[Path, dict[str, str]]
) -> None:
    """Attacks: apply_patch update and add into src/, a shell redirection, sed -i."""
    repo, env = project
    src_before = snapshot(repo / "src")
    steps = [
        Call("call_patch_src", "apply_patch",
             patch("Update", "src/app.py", "@@\n-print('hello')\n+print('owned')\n"),
             kind="custom"),
        Call("call_add_src", "apply_patch", patch("Add", "src/new.py", "+owned = True\n"),
             kind="custom"),
        Call("call_redirect", "exec_command", {"cmd": "echo owned > src/y.py"}),
        Call("call_sed", "exec_command", {"cmd": "sed -i 's/hello/owned/' src/app.py"}),
        Call("call_plan", "apply_patch",
             patch("Add", ".openoxide/plans/x.md", "+# Plan\n+\n+1. change app.py\n"),
             kind="custom"),
        Call("call_ls", "exec_command",
             {"cmd": "ls src && git --no-optional-locks status --short"}),
    ]
    script = Script(steps)
    run_codex(codex, repo, env, script)

    assert snapshot(repo / "src") == src_before
    assert (repo / ".openoxide/plans/x.md").read_text() == "# Plan\n\n1. change app.py\n"
    results = script.results
    for blocked in ("call_patch_src", "call_add_src", "call_redirect", "call_sed"):
        assert "guard:" in results[blocked], (blocked, results[blocked])
    assert "app.py" in results["call_ls"] and "guard:" not in results["call_ls"]
    records = audit_records(Path(env["HOME"]))
    by_id = {r["tool_use_id"]: r for r in records}
    assert {by_id[i]["tool_name"] for i in ("call_redirect", "call_sed", "call_ls")} == {"Bash"}
    assert {r["agent"] for r in records} == {"plan"}
    denied = {i for i, r in by_id.items() if r["decision"] == "deny"}
    assert denied == {"call_patch_src", "call_add_src", "call_redirect", "call_sed"}
    assert {(r["host_agent"], r["host_agent_version"]) for r in records} == {("codex", VERSION)}


def test_codex_without_hook_trust_skips_guard_and_doctor_says_so(
    codex: str, project: tuple[Path, dict[str, str]]
) -> None:
    """Trust removed from config.toml: Codex runs no hook (the write lands); doctor exits 1."""
    repo, env = project
    config = Path(env["CODEX_HOME"]) / "config.toml"
    text = config.read_text()
    start = text.index("[hooks.state.")
    end = text.index("[projects.", start)
    config.write_text(text[:start] + text[end:])
    code, report, human = doctor(repo, env)
    check = host_check(report, "codex (project)")
    assert code == 1 and check["status"] == "skipped", check
    assert "wired, but Codex will skip it: hook trust missing" in check["detail"]
    print(human)  # shown with -s: the report the user sees

    script = Script([Call("call_w", "exec_command", {"cmd": "echo unguarded > src/y.py"})])
    run_codex(codex, repo, env, script)
    assert (repo / "src/y.py").read_text() == "unguarded\n"  # doctor was right: no hook ran
    assert audit_records(Path(env["HOME"])) == []

    guard("install", "codex", cwd=repo, env=env)  # re-trusts
    (repo / "src/y.py").unlink()
    code, report, _ = doctor(repo, env)
    assert code == 0 and host_check(report, "codex (project)")["status"] == "ok"
    script = Script([Call("call_w2", "exec_command", {"cmd": "echo owned > src/y.py"})])
    run_codex(codex, repo, env, script)
    assert not (repo / "src/y.py").exists()
    assert "guard:" in script.results["call_w2"]


def test_codex_untrusted_project_skips_project_hooks(
    codex: str, project: tuple[Path, dict[str, str]]
) -> None:
    repo, env = project
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text(config.read_text().replace('trust_level = "trusted"',
                                                 'trust_level = "untrusted"'))
    code, report, _ = doctor(repo, env)
    check = host_check(report, "codex (project)")
    assert code == 1 and "project not trusted" in check["detail"], check
    script = Script([Call("call_w", "exec_command", {"cmd": "echo unguarded > src/y.py"})])
    run_codex(codex, repo, env, script)
    assert (repo / "src/y.py").exists()  # Codex read no project hook, as doctor said
    assert not os.path.exists(repo / ".openoxide/plans/x.md")
