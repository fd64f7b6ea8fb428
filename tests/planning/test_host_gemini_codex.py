"""The planning side of Gemini CLI's and Codex CLI's hooks: context at each turn, and each
host's plan gesture (Gemini's exit_plan_mode, Codex's <proposed_plan>) as a pending plan_exit
that only the user approves."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from guard.hooks.settings_file import read_settings
from guard.hosts.codex.trust import our_hooks
from guard.planning import Mode, Session
from guard.planning.host import answer
from guard.setup.install import install, uninstall

PLAN = "# Plan\n\n1. cache\n"


def call(repo: Path, host: str, event: str, env: dict[str, str] | None = None,
         **extra: Any) -> tuple[int, dict[str, Any], str]:
    payload = {"session_id": "s", "cwd": str(repo), "hook_event_name": event, **extra}
    got = answer(json.dumps(payload), [host], env=env or {})
    return got.exit_code, json.loads(got.stdout) if got.stdout else {}, got.stderr


@pytest.mark.parametrize(("host", "events", "told"), [
    ("gemini", ("SessionStart", "BeforeAgent"), "guard plan exit --approve"),
    ("codex", ("SessionStart", "UserPromptSubmit"), "<proposed_plan>"),
])
def test_each_turn_states_mode_and_plan_file(
    repo: Path, host: str, events: tuple[str, ...], told: str
) -> None:
    for event in events:
        code, out, _ = call(repo, host, event, prompt="go")
        assert code == 0 and not out.get("hookSpecificOutput"), "no session: nothing to say"
    s = Session.start(repo, "plan", title="Add caching")
    for event in events:
        code, out, _ = call(repo, host, event, prompt="go", source="startup")
        said = out["hookSpecificOutput"]
        assert code == 0 and said["hookEventName"] == event
        assert f"write your plan to {s.plan_path}" in said["additionalContext"]
        assert told in said["additionalContext"]
        assert "ExitPlanMode" not in said["additionalContext"]


def gemini_exit(repo: Path, plans: Path, name: str) -> tuple[int, dict[str, Any], str]:
    return call(repo, "gemini", "BeforeTool", env={"GEMINI_PLANS_DIR": str(plans)},
                tool_name="exit_plan_mode", tool_input={"plan_filename": name})


def test_gemini_exit_keeps_its_plan_and_leaves_approval_to_the_user(
    repo: Path, tmp_path: Path
) -> None:
    """Attack: headless Gemini approves its own exit_plan_mode with nobody asked; guard
    must not take that as the user's approval."""
    s = Session.start(repo, "plan", title="x")
    plans = tmp_path / "gemini-plans"
    plans.mkdir()
    (plans / "feature.md").write_text(PLAN)
    code, out, _ = gemini_exit(repo, plans, "feature.md")
    assert code == 0 and out["decision"] == "deny"
    assert f"saved in {s.plan_path}" in out["reason"]
    assert "guard plan exit --approve" in out["reason"]
    assert s.plan_path and Path(s.plan_path).read_text() == PLAN
    assert s.refresh().mode is Mode.PLAN and [p.kind for p in s.pending] == ["plan_exit"]
    assert s.pending[0].detail["via"] == "gemini exit_plan_mode"


def test_gemini_exit_reads_no_file_outside_its_plan_directory(
    repo: Path, tmp_path: Path
) -> None:
    """Attacks: a plan_filename that climbs out, and a plan file that is a link to a secret."""
    s = Session.start(repo, "plan", title="x")
    plans = tmp_path / "gemini-plans"
    plans.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("token=hunter2\n")
    os.symlink(secret, plans / "link.md")
    for name in ("../secret.md", "link.md", str(secret)):
        code, out, _ = gemini_exit(repo, plans, name)
        assert code == 0 and out["decision"] == "deny"
        assert "no plan to approve" in out["reason"], name
    assert s.plan_path and not Path(s.plan_path).exists()
    assert s.refresh().pending == []


def test_gemini_exit_does_not_hang_on_a_fifo_named_like_its_plan(
    repo: Path, tmp_path: Path
) -> None:
    """Attack: a FIFO planted as Gemini's plan file. Opening it for reading waits for a
    writer; the hook would hang until Gemini's timeout, and a hook that times out does
    not block the exit. guard must answer at once, and refuse it as no plan."""
    s = Session.start(repo, "plan", title="x")
    plans = tmp_path / "gemini-plans"
    plans.mkdir()
    fifo = plans / "feature.md"
    os.mkfifo(fifo)
    got: list[tuple[int, dict[str, Any], str]] = []
    worker = threading.Thread(target=lambda: got.append(gemini_exit(repo, plans, "feature.md")),
                              daemon=True)
    worker.start()
    worker.join(60)  # a hang guard: the answer takes milliseconds
    try:
        assert not worker.is_alive(), "the planning hook waits on the FIFO"
    finally:
        if worker.is_alive():  # release the blocked open
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    code, out, _ = got[0]
    assert code == 0 and out["decision"] == "deny"
    assert "no plan to approve" in out["reason"]
    assert s.plan_path and not Path(s.plan_path).exists()


def test_gemini_exit_without_plan_session_is_left_to_the_policy_hook(
    repo: Path, tmp_path: Path
) -> None:
    assert gemini_exit(repo, tmp_path, "x.md") == (0, {}, "")


def test_codex_proposed_plan_becomes_the_plan_and_waits_for_the_user(repo: Path) -> None:
    s = Session.start(repo, "plan", title="x")
    message = f"Here it is.\n<proposed_plan>\n{PLAN}</proposed_plan>\n"
    code, out, _ = call(repo, "codex", "Stop", last_assistant_message=message,
                        stop_hook_active=False)
    assert code == 0 and "guard plan exit --approve" in out["systemMessage"]
    assert s.plan_path and Path(s.plan_path).read_text() == PLAN
    assert s.refresh().mode is Mode.PLAN and [p.kind for p in s.pending] == ["plan_exit"]


def test_codex_plan_file_written_by_the_model_wins_over_the_text(repo: Path) -> None:
    s = Session.start(repo, "plan", title="x")
    assert s.plan_path
    Path(s.plan_path).parent.mkdir(parents=True, exist_ok=True)
    Path(s.plan_path).write_text("# written\n")
    call(repo, "codex", "Stop", last_assistant_message="<proposed_plan>other</proposed_plan>")
    assert Path(s.plan_path).read_text() == "# written\n"


def test_codex_stop_without_a_proposed_plan_says_nothing(repo: Path) -> None:
    s = Session.start(repo, "plan", title="x")
    assert call(repo, "codex", "Stop", last_assistant_message="Done.") == (0, {}, "")
    assert s.refresh().pending == []


def test_gemini_install_wires_the_planning_side_and_uninstall_removes_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "ghome"))
    install("gemini", "user", cwd=repo)
    install("gemini", "user", cwd=repo)
    path = tmp_path / "ghome/.gemini/settings.json"
    hooks = read_settings(path)["hooks"]
    assert sorted(hooks) == ["AfterTool", "BeforeAgent", "BeforeTool", "SessionStart"]
    assert [g.get("matcher") for g in hooks["BeforeTool"]] == [".*", "exit_plan_mode"]
    assert "-m guard.planning.host gemini" in hooks["BeforeAgent"][0]["hooks"][0]["command"]
    uninstall("gemini", "user", cwd=repo)
    assert "hooks" not in read_settings(path)


def test_codex_install_wires_and_trusts_the_planning_side(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "chome"))
    install("codex", "user", cwd=repo)
    path = tmp_path / "chome/hooks.json"
    settings = read_settings(path)
    assert sorted(settings["hooks"]) == [
        "PostToolUse", "PreToolUse", "SessionStart", "Stop", "UserPromptSubmit"]
    keys = [h.key.split(":", 1)[1] for h in our_hooks(path, settings)]
    assert keys == ["pre_tool_use:0:0", "post_tool_use:0:0", "session_start:0:0",
                    "user_prompt_submit:0:0", "stop:0:0"]
    config = (tmp_path / "chome/config.toml").read_text()
    assert all(f'{path}:{k}"' in config for k in keys), config
    uninstall("codex", "user", cwd=repo)
    assert "hooks" not in read_settings(path)
    assert not (tmp_path / "chome/config.toml").exists()  # guard created it for its trust
