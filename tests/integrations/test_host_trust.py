"""Hooks the host would skip silently: Codex trust, Gemini workspace trust, rewritten files,
and the OpenCode plugin's fail-closed behaviour (run by the real node)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from guard.hosts.codex.trust import hook_hash

from .payloads import opencode_payload


def guard(*args: str, cwd: Path, env: dict[str, str], code: int | None = 0
          ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120, check=False)
    if code is not None:
        assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


def host(proc: subprocess.CompletedProcess[str], name: str) -> dict[str, Any]:
    [found] = [c for c in json.loads(proc.stdout)["hosts"] if c["name"] == name]
    return found


# -- the hash: vectors read back from `codex app-server` hooks/list (Codex 0.171.0) ----------


def test_codex_hook_hash_matches_what_codex_computes() -> None:
    cmd = "/usr/bin/python3 -I '/x y/_client.py' codex || exit 2"
    assert hook_hash({"type": "command", "command": cmd, "timeout": 30}, None) == (
        "sha256:9ee722ae6699ff315dd5510cbd98bf549b1fa2e2f80d1f673caf85b9656f5346")
    assert hook_hash({"type": "command", "command": "echo \u00e9", "timeout": 30}, "*") == (
        "sha256:f36a8a38cfd55417ab102b3eb6d88a9bf57e3a14f1cb84daa8469e912e9ed115")


# -- Codex: install trusts; doctor reports every way Codex would skip the hook --------------


def test_codex_install_writes_trust_and_doctor_agrees(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    config = home / ".codex/config.toml"
    config.parent.mkdir()
    config.write_text('model = "gpt-5.5"  # keep me\n\n[projects."/elsewhere"]\n'
                      'trust_level = "untrusted"\n')
    proc = guard("install", "codex", cwd=repo, env=env)
    assert "checked: codex will run the hook" in proc.stdout
    data = tomllib.loads(config.read_text())
    key = f"{repo}/.codex/hooks.json:pre_tool_use:0:0"
    handler = json.loads((repo / ".codex/hooks.json").read_text())["hooks"]["PreToolUse"][0]
    assert data["hooks"]["state"][key] == {
        "enabled": True, "trusted_hash": hook_hash(handler["hooks"][0], None)}
    assert data["projects"][str(repo)] == {"trust_level": "trusted"}
    assert data["projects"]["/elsewhere"] == {"trust_level": "untrusted"}
    assert "# keep me" in config.read_text()
    assert host(guard("doctor", "--json", cwd=repo, env=env), "codex (project)")["status"] == "ok"


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        ("drop-trust", "hook trust missing"),
        ("edit-hook", "hook trust stale"),
        ("untrust-project", "project not trusted"),
        ("disable", "hook disabled"),
    ],
)
def test_doctor_reports_a_codex_hook_codex_would_skip(
    spoil: str, message: str, repo: Path, env: dict[str, str], home: Path
) -> None:
    guard("install", "codex", cwd=repo, env=env)
    config = home / ".codex/config.toml"
    hooks = repo / ".codex/hooks.json"
    text = config.read_text()
    if spoil == "drop-trust":
        config.write_text(text[text.index("[projects."):])
    elif spoil == "edit-hook":
        hooks.write_text(hooks.read_text().replace('"timeout": 30', '"timeout": 31'))
    elif spoil == "untrust-project":
        config.write_text(text.replace('trust_level = "trusted"', 'trust_level = "untrusted"'))
    else:
        config.write_text(text.replace("enabled = true", "enabled = false"))
    proc = guard("doctor", "--json", cwd=repo, env=env, code=1)
    codex = host(proc, "codex (project)")
    assert codex["status"] == "skipped"
    assert "wired, but Codex will skip it" in codex["detail"] and message in codex["detail"]
    # installing again repairs it
    guard("install", "codex", cwd=repo, env=env)
    assert host(guard("doctor", "--json", cwd=repo, env=env), "codex (project)")["status"] == "ok"


def test_codex_uninstall_removes_the_trust_it_wrote(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    guard("install", "codex", "--user", cwd=repo, env=env)
    config = home / ".codex/config.toml"
    key = f"{home}/.codex/hooks.json:pre_tool_use:0:0"
    assert key in tomllib.loads(config.read_text())["hooks"]["state"]
    assert "projects" not in tomllib.loads(config.read_text())  # user scope: no project trust
    proc = guard("uninstall", "codex", "--user", cwd=repo, env=env)
    assert "removed the trust" in proc.stdout
    assert not config.exists()  # guard created it for its trust, which is gone


def test_codex_install_refuses_a_broken_config_toml(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    config = home / ".codex/config.toml"
    config.parent.mkdir()
    config.write_text("model = \n")
    proc = guard("install", "codex", cwd=repo, env=env, code=None)
    assert proc.returncode != 0 and str(config) in proc.stderr and "Traceback" not in proc.stderr
    assert config.read_text() == "model = \n"


# -- Gemini: project hooks need a trusted workspace ------------------------------------------


def test_gemini_defaults_to_user_scope(repo: Path, env: dict[str, str], home: Path) -> None:
    proc = guard("install", "gemini", cwd=repo, env=env)
    assert str(home / ".gemini/settings.json") in proc.stdout
    assert not (repo / ".gemini").exists()


def test_gemini_project_install_in_untrusted_workspace_fails_loudly(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    proc = guard("install", "gemini", "--project", cwd=repo, env=env, code=1)
    assert "Gemini will skip it: workspace not trusted" in proc.stderr
    assert "guard install gemini --user" in proc.stderr
    proc = guard("doctor", "--json", cwd=repo, env=env, code=1)
    gem = host(proc, "gemini (project)")
    assert gem["status"] == "skipped"
    assert gem["detail"].startswith("wired, but Gemini will skip it: workspace not trusted")
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini/trustedFolders.json").write_text(
        json.dumps({str(repo.parent / "x"): "TRUST_PARENT"}))
    assert host(guard("doctor", "--json", cwd=repo, env=env), "gemini (project)")["status"] == "ok"
    (home / ".gemini/trustedFolders.json").write_text(
        json.dumps({str(repo.parent / "x"): "TRUST_PARENT", str(repo): "DO_NOT_TRUST"}))
    assert host(guard("doctor", "--json", cwd=repo, env=env, code=1),
                "gemini (project)")["status"] == "skipped"


# -- a settings file another tool rewrote --------------------------------------------------


def test_doctor_reports_a_settings_file_another_tool_rewrote(
    repo: Path, env: dict[str, str]
) -> None:
    guard("install", "claude-code", cwd=repo, env=env)
    path = repo / ".claude/settings.json"
    data = json.loads(path.read_text())
    data["hooks"]["PreToolUse"][0]["matcher"] = "Read"  # narrowed: writes bypass the hook
    path.write_text(json.dumps(data))
    claude = host(guard("doctor", "--json", cwd=repo, env=env, code=1), "claude-code (project)")
    assert claude["status"] == "skipped" and "another tool rewrote" in claude["detail"]
    path.write_text(json.dumps({"model": "opus"}))  # entry gone altogether
    claude = host(guard("doctor", "--json", cwd=repo, env=env, code=1), "claude-code (project)")
    assert claude["status"] == "skipped" and "entry is gone" in claude["detail"]
    guard("uninstall", "claude-code", cwd=repo, env=env)
    claude = host(guard("doctor", "--json", cwd=repo, env=env), "claude-code (project)")
    assert claude["status"] == "off"


# -- OpenCode: the plugin, run by node, fails closed ----------------------------------------

NODE = shutil.which("node")

DRIVER = """
import { pathToFileURL } from "node:url";
const [plugin, payload] = process.argv.slice(2);
const mod = await import(pathToFileURL(plugin).href);
const hooks = await mod.OpenOxideGuard({ directory: process.cwd() });
const p = JSON.parse(payload);
const output = { args: p.tool_input };
try {
  await hooks["tool.execute.before"]({ tool: p.tool_name, sessionID: "s", callID: "c" }, output);
  console.log(JSON.stringify({ ran: true, args: output.args }));
} catch (e) {
  console.log(JSON.stringify({ ran: false, error: String(e.message) }));
}
"""


def run_plugin(plugin: Path, payload: dict[str, Any], cwd: Path, env: dict[str, str]
               ) -> dict[str, Any]:
    assert NODE is not None, "node is required (scripts/test.sh installs it)"
    driver = plugin.parent / "driver.mjs"
    driver.write_text(DRIVER)
    proc = subprocess.run([NODE, str(driver), str(plugin), json.dumps(payload)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_opencode_plugin_asks_guard_and_throws_on_deny(repo: Path, env: dict[str, str]) -> None:
    guard("install", "opencode", cwd=repo, env={**env, "GUARD_AGENT": "plan"})
    plugin = repo / ".opencode/plugin/guard.js"
    run_env = {**env, "GUARD_AGENT": "plan"}
    write = opencode_payload("write", {"filePath": "src/app.py", "content": "x"}, repo)
    out = run_plugin(plugin, write, repo, run_env)
    assert out["ran"] is False and out["error"].startswith("guard: ")
    plan = opencode_payload("write", {"filePath": ".openoxide/plans/p.md", "content": "x"}, repo)
    assert run_plugin(plugin, plan, repo, run_env)["ran"] is True
    assert host(guard("doctor", "--json", cwd=repo, env=env), "opencode (project)")["status"] \
        == "ok"


@pytest.mark.parametrize(
    ("hook", "error"),
    [
        ("echo not-json", "unreadable answer"),
        ("echo '{\"decision\": \"maybe\"}'", "unknown decision"),
        ("exit 1", "exited 1"),
        ("/nonexistent/python -I x.py || exit 2", "not found"),
        ("echo '{\"decision\": \"allow\", \"args\": 5}'", "not an object"),
    ],
)
def test_opencode_plugin_fails_closed(
    hook: str, error: str, repo: Path, env: dict[str, str]
) -> None:
    """Attack surface: guard unreachable or answering garbage must never let the call run."""
    from guard.hosts.opencode.hook import plugin_text

    plugin = repo / ".opencode/plugin/guard.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(plugin_text(hook))
    out = run_plugin(plugin, opencode_payload("bash", {"command": "ls"}, repo), repo, env)
    assert out["ran"] is False and error in out["error"], out


def test_opencode_plugin_applies_rewritten_args(repo: Path, env: dict[str, str]) -> None:
    from guard.hosts.opencode.hook import plugin_text

    plugin = repo / ".opencode/plugin/guard.js"
    plugin.parent.mkdir(parents=True)
    answer = json.dumps({"decision": "allow", "args": {"command": "guard-confined ls"}})
    plugin.write_text(plugin_text(f"echo '{answer}'"))
    out = run_plugin(plugin, opencode_payload("bash", {"command": "ls", "description": "d"},
                                              repo), repo, env)
    assert out == {"ran": True, "args": {"command": "guard-confined ls", "description": "d"}}


def test_opencode_uninstall_and_foreign_plugin(repo: Path, env: dict[str, str]) -> None:
    guard("install", "opencode", cwd=repo, env=env)
    plugin = repo / ".opencode/plugin/guard.js"
    assert plugin.exists()
    guard("uninstall", "opencode", cwd=repo, env=env)
    assert not plugin.exists()
    assert not (repo / ".opencode").exists()  # the folders install created, now empty
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({});\n")
    proc = guard("install", "opencode", cwd=repo, env=env, code=None)
    assert proc.returncode != 0 and "not guard's plugin" in proc.stderr
    assert plugin.read_text() == "export const Mine = async () => ({});\n"


def test_review_knows_the_opencode_plugin_and_skipped_hooks(
    repo: Path, env: dict[str, str]
) -> None:
    guard("install", "opencode", cwd=repo, env=env)
    guard("install", "gemini", "--project", cwd=repo, env=env, code=1)
    proc = guard("review", "--format", "json", cwd=repo, env=env, code=None)
    layers = {layer["layer"]: layer for layer in json.loads(proc.stdout)["layers"]}
    assert layers["OpenCode plugin (project)"]["active"] is True
    gem = layers["gemini (project) hook runs"]
    assert gem["active"] is False and "workspace not trusted" in gem["detail"]
