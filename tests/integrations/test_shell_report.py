"""`guard doctor` and `guard review` say, per wired host, what happens to plan-mode shell calls:
kernel-confined (allow_confined) where the hook can rewrite the call and Landlock is here,
guard's grammar or the confined form for hosts that can only deny (Codex, Cursor)."""

from __future__ import annotations

import json
from pathlib import Path

from guard.sandbox.confine import available
from guard.setup.doctor import ANALYSIS_ONLY

from .test_install import guard

REWRITING = ("claude-code", "gemini", "opencode")
DENY_ONLY = ("codex", "cursor")


def install_all(repo: Path, env: dict[str, str]) -> dict[str, str]:
    env = {**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}  # Gemini loads the project hooks
    for host in (*REWRITING, *DENY_ONLY):
        guard("install", host, "--project", cwd=repo, env=env)
    return env


def expected(host: str) -> tuple[bool, str]:
    if host in DENY_ONLY:
        return False, ANALYSIS_ONLY
    why = available()
    if why:
        return False, f"shell: analysis only: the kernel cannot confine here ({why})"
    return True, "shell: kernel-confined in plan mode (allow_confined"


def test_doctor_says_which_hosts_shell_is_confined(repo: Path, env: dict[str, str]) -> None:
    env = install_all(repo, env)
    report = json.loads(guard("doctor", "--json", cwd=repo, env=env).stdout)
    by_host = {c["host"]: c for c in report["hosts"] if c["scope"] == "project"}
    for host in (*REWRITING, *DENY_ONLY):
        check = by_host[host]
        confined, text = expected(host)
        assert check["status"] == "ok", check
        assert check["shell_confined"] is confined, check
        assert check["shell"].startswith(text) and text in check["detail"], check
    assert by_host["codex"]["shell"] == ANALYSIS_ONLY
    assert by_host["codex"]["shell"].startswith("shell: guard's grammar or `guard confine`")
    human = guard("doctor", cwd=repo, env={**env, "COLUMNS": "300"}).stdout
    assert human.count("guard's grammar or `guard confine` in plan mode") == 2, human
    if not available():
        assert human.count("kernel-confined in plan mode") == 3, human


def test_review_lists_shell_confinement_per_wired_host(repo: Path, env: dict[str, str]) -> None:
    env = install_all(repo, env)
    proc = guard("review", "--format", "json", cwd=repo, env=env)
    layers = {x["layer"]: x for x in json.loads(proc.stdout)["layers"]}
    for host in (*REWRITING, *DENY_ONLY):
        layer = layers[f"{host} (project) shell confinement"]
        confined, text = expected(host)
        assert layer["active"] is confined and layer["detail"].startswith(text), layer
    markdown = guard("review", cwd=repo, env=env).stdout
    assert "codex (project) shell confinement" in markdown
    assert ANALYSIS_ONLY.replace("|", "\\|") in markdown or ANALYSIS_ONLY in markdown
