# ruff: noqa: F811  (the fixtures gemini and project come from test_gemini_cli)
"""End to end: README's planning walkthrough with the real Gemini CLI (pinned).

guard is installed once (``guard install gemini``, user scope, as README says), no
environment variable is set, Gemini is never reconfigured. ``guard plan start`` puts
the worktree in plan mode; a scripted model that finds the plan path **in the
conversation** (the SessionStart/BeforeAgent context guard injects, or a refusal
reason) writes its plan there while its write to ``src/`` is refused. Gemini's own
``exit_plan_mode`` is kept as a pending plan exit, never as the approval (headless
Gemini approves its own exit with nobody asked); ``guard plan exit --approve``
approves; the next Gemini run writes ``src/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from guard.planning import Mode, Session

from .fake_models import Call, Script
from .host_runs import gemini_run
from .hosts_common import guard, snapshot
from .test_gemini_cli import gemini, project  # noqa: F401  (fixtures)

TOLD = re.compile(r"write your plan to (/[^\s\"\\]+?\.md)")
PLAN = "# Plan: add caching\n\n1. Add an LRU cache to src/app.py\n2. Test it\n"


def told_path(body: dict[str, Any]) -> str:
    """The plan path the conversation so far tells the model (the latest mention)."""
    found = TOLD.findall(json.dumps(body.get("contents", []), ensure_ascii=False))
    assert found, "guard never told the model where to write its plan"
    return str(found[-1])


def run(gemini: str, repo: Path, env: dict[str, str], script: Script,
        mode: str = "yolo") -> None:
    """One headless Gemini run, as the user starts it: no GUARD_AGENT, no other settings."""
    gemini_run(gemini, repo, env, script, "--approval-mode", mode, "--skip-trust",
               prompt="Add caching.")


def test_gemini_walkthrough_plan_approve_build(
    gemini: str, project: tuple[Path, dict[str, str]]
) -> None:
    repo, env = project
    assert "GUARD_AGENT" not in env
    guard("install", "gemini", cwd=repo, env=env)
    started = guard("plan", "start", "Add caching", cwd=repo, env=env)
    (session,) = Session.list_all(repo)
    assert session.plan_path and f"Plan file: {session.plan_path}" in started.stdout

    # 1. plan: the write to src/ is refused, the plan lands where guard said
    src_before = snapshot(repo / "src")
    steps = [
        Call("g_src", "write_file", {"file_path": "src/app.py", "content": "owned = True\n"}),
        Call("g_plan", "write_file", lambda b: {"file_path": told_path(b), "content": PLAN}),
    ]
    script = Script(steps)
    run(gemini, repo, env, script)
    assert snapshot(repo / "src") == src_before
    assert f"write your plan to {session.plan_path}" in script.results["g_src"]
    assert Path(session.plan_path).read_text() == PLAN
    first = next(b for b in script.requests if b.get("tools"))
    assert session.plan_path in json.dumps(first["contents"]), "context injected before a refusal"
    # Gemini's own exit (offered in Gemini's plan mode): kept as a pending request; the
    # user has not approved anything yet, whatever headless Gemini decides for itself
    gesture = Script([Call("g_exit", "exit_plan_mode",
                           lambda b: {"plan_filename": Path(told_path(b)).name})])
    run(gemini, repo, env, gesture, mode="plan")
    said = gesture.results["g_exit"]
    assert f"saved in {session.plan_path}" in said and "guard plan exit --approve" in said, said
    session.refresh()
    assert session.mode is Mode.PLAN and [p.kind for p in session.pending] == ["plan_exit"]

    # 2. approve, outside the host
    approved = guard("plan", "exit", "--approve", cwd=repo, env=env)
    assert "the hooks now use build" in approved.stdout
    assert session.refresh().mode is Mode.BUILD

    # 3. build: the same installation, no restart with other settings
    build = Script([Call("g_build", "write_file", {"file_path": "src/app.py",
                                                   "content": "ok\n"})])
    run(gemini, repo, env, build)
    assert (repo / "src/app.py").read_text() == "ok\n"
    assert "approved the plan" in json.dumps(build.requests[0].get("contents", []))
