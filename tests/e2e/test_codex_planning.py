# ruff: noqa: F811  (the fixtures codex and project come from test_codex_cli)
"""End to end: README's planning walkthrough with the real Codex CLI (pinned).

guard is installed once (``guard install codex``, which also writes Codex's hook
trust), no environment variable is set, Codex is never reconfigured. ``guard plan
start`` puts the worktree in plan mode; a scripted model that finds the plan path
**in the conversation** (the SessionStart/UserPromptSubmit context guard injects, or
a refusal reason) has its patch into ``src/`` refused and ends its turn with a
``<proposed_plan>`` (Codex's plan gesture): guard keeps that text as the plan file
and records a pending exit, which only ``guard plan exit --approve`` approves; the
next Codex run writes ``src/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from guard.planning import Mode, Session

from .fake_models import Call, Script
from .host_runs import codex_exec
from .host_runs import codex_patch as patch
from .hosts_common import guard, snapshot
from .test_codex_cli import codex, project  # noqa: F401  (fixtures)

TOLD = re.compile(r"write your plan to (/[^\s\"\\]+?\.md)")
PLAN = "# Plan: add caching\n\n1. Add an LRU cache to src/app.py\n2. Test it\n"


def told_paths(script: Script) -> list[str]:
    return [str(p) for body in script.requests
            for p in TOLD.findall(json.dumps(body.get("input", []), ensure_ascii=False))]


def run(codex: str, repo: Path, env: dict[str, str], script: Script) -> str:
    """One headless Codex run, as the user starts it: no GUARD_AGENT, no other settings."""
    proc = codex_exec(codex, repo, env, script, prompt="Add caching.")
    return proc.stdout + proc.stderr


def test_codex_walkthrough_plan_approve_build(
    codex: str, project: tuple[Path, dict[str, str]]
) -> None:
    repo, env = project
    assert "GUARD_AGENT" not in env
    started = guard("plan", "start", "Add caching", cwd=repo, env=env)
    (session,) = Session.list_all(repo)
    assert session.plan_path and f"Plan file: {session.plan_path}" in started.stdout

    # 1. plan: the patch into src/ is refused; the turn ends with <proposed_plan>
    src_before = snapshot(repo / "src")
    steps = [
        Call("call_src", "apply_patch",
             patch("Update", "src/app.py", "@@\n-print('hello')\n+print('owned')\n"),
             kind="custom"),
    ]
    script = Script(steps, final_text=f"<proposed_plan>\n{PLAN}</proposed_plan>")
    out = run(codex, repo, env, script)
    assert snapshot(repo / "src") == src_before
    assert f"write your plan to {session.plan_path}" in script.results["call_src"]
    told = told_paths(Script(steps, requests=script.requests[:1]))
    assert told and told[0] == session.plan_path, "context injected before any refusal"
    assert "proposed_plan" in json.dumps(script.requests[0].get("input", []))  # the gesture
    assert Path(session.plan_path).read_text() == PLAN
    session.refresh()
    assert session.mode is Mode.PLAN and [p.kind for p in session.pending] == ["plan_exit"]
    assert "guard plan exit --approve" in out, out[-2000:]

    # 2. approve, outside the host
    approved = guard("plan", "exit", "--approve", cwd=repo, env=env)
    assert "the hooks now use build" in approved.stdout
    assert session.refresh().mode is Mode.BUILD

    # 3. build: the same installation, no restart with other settings
    build = Script([Call("call_build", "apply_patch",
                         patch("Update", "src/app.py", "@@\n-print('hello')\n+print('ok')\n"),
                         kind="custom")])
    run(codex, repo, env, build)
    assert (repo / "src/app.py").read_text() == "print('ok')\n"
    assert "approved the plan" in json.dumps(build.requests[0].get("input", []))
