"""`guard check`, `explain`, `schema`, `plan-dir` and `demo`, through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def guard(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["write", ".openoxide/plans/p.md"], 0),
        (["write", "src/app.py"], 1),
        (["read", ".env"], 3),
    ],
)
def test_check_exit_codes(repo: Path, args: list[str], code: int) -> None:
    r = guard("check", "--agent", "plan", *args, cwd=repo)
    assert r.returncode == code, r.stderr
    assert "rule:" in r.stdout


def test_check_json(repo: Path) -> None:
    r = guard("check", "--agent", "plan", "--json", "write", "src/app.py", cwd=repo)
    out = json.loads(r.stdout)
    assert set(out) == {"schema_version", "decision", "reason", "rule", "agent", "effects"}
    assert out["decision"] == "deny" and out["rule"] == "agents.plan.write.default"
    assert out["schema_version"] == 1
    [effect] = out["effects"]
    assert {k: v for k, v in effect.items() if k != "reason"} == {
        "kind": "write", "target": "src/app.py", "detail": None, "decision": "deny",
        "rule": out["rule"],
    }
    # the verdict repeats the effect's reason and tells the model where its plan goes
    assert out["reason"].startswith(effect["reason"])
    assert "You are in plan mode" in out["reason"] and ".openoxide/plans" in out["reason"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "plan", "wrte", "x"], "unknown effect kind 'wrte'"),
        (["--agent", "nobody", "write", "x"], "no agent 'nobody'"),
        (["--agent", "plan", "write"], "give KIND PATH"),
        (["--agent", "plan", "--policy", "/nope.toml", "write", "x"], "does not exist"),
    ],
)
def test_check_bad_input_is_one_line_and_exit_2(repo: Path, args: list[str], message: str) -> None:
    r = guard("check", *args, cwd=repo)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_bad_policy_file_lists_every_problem_without_traceback(repo: Path) -> None:
    bad = repo / "bad.toml"
    bad.write_text('version = 1\n[agents.plan]\nmode = "plan"\ndefault = "nope"\nwrit = []\n')
    r = guard("check", "--agent", "plan", "--policy", str(bad), "write", "x", cwd=repo)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln]
    assert any(f"{bad}:4: agents.plan.default:" in ln for ln in lines), r.stderr
    assert any(f"{bad}:5: agents.plan.writ: unknown key 'writ'" in ln for ln in lines), r.stderr
    assert "Traceback" not in r.stderr


def test_explain_shows_lists_patterns_and_the_decider(repo: Path) -> None:
    r = guard("explain", "--agent", "plan", "write", ".openoxide/plans/p.md", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert "builtin:protected:!.openoxide/plans" in r.stdout
    assert "builtin:default:" in r.stdout and ":{plans}/*.md" in r.stdout
    assert "<- decides this list" in r.stdout
    for name in ("protected", "deny", "ask", "allow"):
        assert name in r.stdout
    r = guard("explain", "--agent", "plan", "write", "src/app.py", cwd=repo)
    assert r.returncode == 1 and "agents.plan.write.default is deny" in r.stdout


def test_schema_prints_json_schema() -> None:
    r = guard("schema")
    assert r.returncode == 0
    assert json.loads(r.stdout)["title"] == "OpenOxide Guard policy"


def test_plan_dir_json_says_why(repo: Path, tmp_path: Path) -> None:
    r = guard("plan-dir", "--json", cwd=repo)
    out = json.loads(r.stdout)
    assert out["path"] == str(repo / ".openoxide" / "plans")
    assert ".git found" in out["reason"]
    plain = tmp_path / "plain"
    plain.mkdir()
    out = json.loads(guard("plan-dir", "--json", cwd=plain).stdout)
    assert out["worktree"] is None and "global fallback" in out["reason"]


def test_demo_runs_and_shows_both_agents() -> None:
    r = guard("demo")
    assert r.returncode == 0, r.stderr
    assert "agent plan" in r.stdout and "agent build" in r.stdout
    assert "write through a symlink planted in the plan dir" in r.stdout
    assert r.stdout.count("DENY") >= 8


def test_help_teaches_with_examples() -> None:
    r = guard("check", "--help")
    assert "Exit codes" in r.stdout and "--dialect" in r.stdout
