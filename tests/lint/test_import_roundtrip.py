"""`guard import` round trips: each documented rule form of a host, imported with the real
CLI, then the host's own tool call decided by `guard check` as the agent the hooks use.

A form either keeps its meaning (the call is decided as the host would) or is refused with
a note that says why; it never converts to a rule that silently means less.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .helpers import guard

# (rules, dialect, tool, input, host's decision, note that must be printed)
CLAUDE: list[tuple[dict[str, list[str]], str, dict[str, object], str, str]] = [
    ({"deny": ["Bash(rm:*)"]}, "Bash", {"command": "rm -rf src"}, "deny", "as a delete"),
    ({"deny": ["Bash(rm:*)"]}, "Bash", {"command": "/bin/rm -f src/app.py"}, "deny", ""),
    ({"deny": ["Bash(rm:*)"]}, "Bash", {"command": "cd src && rm app.py"}, "deny", ""),
    ({"deny": ["Bash(python3:*)"]}, "Bash", {"command": "python3 -c 'print(1)'"}, "deny",
     "every way of running it"),
    ({"deny": ["Read(./.env)"]}, "Read", {"file_path": "{repo}/.env"}, "deny", ""),
    ({"deny": ["Read(//etc/shadow)"]}, "Read", {"file_path": "/etc/shadow"}, "deny", ""),
    ({"deny": ["Read(~/.ssh/**)"]}, "Read", {"file_path": "{home}/.ssh/id_rsa"}, "deny", ""),
    ({"deny": ["Edit(/package-lock.json)"]}, "Write",
     {"file_path": "{repo}/package-lock.json", "content": "{}"}, "deny", ""),
    ({"deny": ["Edit(src/**)"]}, "Edit",
     {"file_path": "{repo}/src/app.py", "old_string": "hi", "new_string": "ho"}, "deny", ""),
    ({"deny": ["WebFetch"]}, "WebFetch", {"url": "https://example.com/", "prompt": "x"},
     "deny", ""),
    ({"deny": ["mcp__github__create_issue"]}, "mcp__github__create_issue", {}, "deny", ""),
    ({"allow": ["Edit(src/**)"]}, "Write", {"file_path": "{repo}/src/new.py", "content": ""},
     "allow", ""),
    ({"ask": ["Edit(/README.md)"], "allow": ["Edit(**)"]}, "Write",
     {"file_path": "{repo}/README.md", "content": ""}, "ask", ""),
]
# forms that cannot keep their meaning: refused (not converted) with the reason
CLAUDE_REFUSED = [
    ("Bash(curl:*)", "refused: guard decides 'curl' by what it does"),
    ("Bash(git push:*)", "command-prefix rules do not convert"),
    ("Bash(rm -rf:*)", "command-prefix rules do not convert"),
    ("mcp__slack", "a whole MCP server"),
    ("Grep(src/**)", "specifiers for Grep are not converted"),
]

OPENCODE: list[tuple[dict[str, object], str, dict[str, object], str, str]] = [
    ({"bash": {"*": "allow", "rm *": "deny"}}, "bash", {"command": "rm -rf src"}, "deny",
     "as a delete"),
    ({"bash": {"*": "allow", "rm": "deny"}}, "bash", {"command": "rm src/app.py"}, "deny", ""),
    ({"bash": "deny"}, "bash", {"command": "ls"}, "deny", ""),
    ({"edit": "deny"}, "write", {"filePath": "{repo}/src/x.py", "content": ""}, "deny", ""),
    ({"edit": {"*": "allow", "src/*.lock": "deny"}}, "write",
     {"filePath": "{repo}/src/deep/a.lock", "content": ""}, "deny", "crosses '/'"),
    ({"read": {"*": "allow", "*.env": "deny"}}, "read", {"filePath": "{repo}/config/.env"},
     "deny", ""),
    ({"webfetch": "deny"}, "webfetch", {"url": "https://example.com/"}, "deny", ""),
    ({"external_directory": "deny"}, "read", {"filePath": "/opt/elsewhere.txt"}, "deny", ""),
]


def _fill(value: object, repo: Path) -> object:
    if isinstance(value, str):
        return value.replace("{repo}", str(repo)).replace("{home}", os.path.expanduser("~"))
    if isinstance(value, dict):
        return {k: _fill(v, repo) for k, v in value.items()}
    return value


def _roundtrip(repo: Path, host: str, settings: dict[str, object], dialect: str, tool: str,
               tool_input: dict[str, object]) -> tuple[str, str]:
    src = repo / "host-settings.json"
    src.write_text(json.dumps(settings))
    out = repo / ".openoxide/policy.toml"
    r = guard("import", host, str(src), "-o", str(out), "--force", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert f"guard install {host}" in r.stderr.splitlines()[-1]  # the command to take effect
    lint = guard("lint", str(out), cwd=repo)
    assert lint.returncode == 0, lint.stdout  # what import writes passes lint
    c = guard("check", "--agent", "build", "--dialect", dialect, "--tool", tool, "--input",
              json.dumps(_fill(tool_input, repo)), "--json", cwd=repo)
    assert c.stdout, c.stderr
    return json.loads(c.stdout)["decision"], r.stderr


@pytest.mark.parametrize(("rules", "tool", "tool_input", "expected", "note"), CLAUDE)
def test_claude_code_rule_forms_keep_their_meaning(
    repo: Path, rules: dict[str, list[str]], tool: str, tool_input: dict[str, object],
    expected: str, note: str,
) -> None:
    decision, notes = _roundtrip(repo, "claude-code", {"permissions": rules}, "claude-code",
                                 tool, tool_input)
    assert decision == expected, notes
    assert note in notes
    assert (repo / "src/app.py").exists()


@pytest.mark.parametrize(("rule", "reason"), CLAUDE_REFUSED)
def test_claude_code_rule_forms_that_cannot_keep_their_meaning_are_refused(
    repo: Path, rule: str, reason: str
) -> None:
    src = repo / "s.json"
    src.write_text(json.dumps({"permissions": {"deny": [rule]}}))
    r = guard("import", "claude-code", str(src), cwd=repo)
    assert r.returncode == 0, r.stderr
    assert reason in r.stderr
    assert "exec]\ndeny" not in r.stdout  # no rule that can never match


@pytest.mark.parametrize(("permission", "tool", "tool_input", "expected", "note"), OPENCODE)
def test_opencode_rule_forms_keep_their_meaning(
    repo: Path, permission: dict[str, object], tool: str, tool_input: dict[str, object],
    expected: str, note: str,
) -> None:
    decision, notes = _roundtrip(repo, "opencode", {"permission": permission}, "opencode",
                                 tool, tool_input)
    assert decision == expected, notes
    assert note in notes


def test_an_imported_deny_holds_through_the_installed_hook(repo: Path) -> None:
    """Attack: `Bash(rm:*)` denied in Claude Code; the agent runs `rm -rf src` outside plan
    mode, through the hook the printed command installs."""
    src = repo / "s.json"
    src.write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}}))
    r = guard("import", "claude-code", str(src), "-o", ".openoxide/policy.toml", cwd=repo)
    command = r.stderr.splitlines()[-1].split("run: ", 1)[1].split()
    assert command[:3] == ["guard", "install", "claude-code"]
    payload = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "session_id": "s1",
               "permission_mode": "default", "cwd": str(repo),
               "tool_input": {"command": "rm -rf src"}}
    import subprocess
    import sys

    hook = subprocess.run([sys.executable, "-m", "guard", "hook", "claude-code"],
                          input=json.dumps(payload), capture_output=True, text=True,
                          cwd=repo, timeout=120, check=False)
    out = json.loads(hook.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny", hook.stdout
    assert (repo / "src/app.py").exists()


def test_import_with_agent_names_the_pinned_install(repo: Path) -> None:
    src = repo / "s.json"
    src.write_text(json.dumps({"permissions": {"deny": ["Read(./.env)"]}}))
    r = guard("import", "claude-code", str(src), "--agent", "team", "-o", "team.toml",
              cwd=repo)
    assert r.returncode == 0, r.stderr
    assert "guard install claude-code --agent team --policy" in r.stderr
    assert "[agents.team]" in (repo / "team.toml").read_text()
