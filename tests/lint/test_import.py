"""`guard import`: realistic host settings become policies that decide the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.decide import Guard
from guard.effects import Action, Effect
from guard.hosts.opencode.importer import convert_glob, ordered
from guard.importers.common import Notes

from .helpers import guard

CLAUDE = {
    "permissions": {
        "allow": [
            "Bash(npm run test:*)",
            "Edit(src/**)",
            "Read(~/.zshrc)",
            "WebFetch(domain:docs.python.org)",
            "mcp__github__get_issue",
        ],
        "deny": ["Read(./.env)", "Read(./.env.*)", "Read(//etc/shadow)", "Bash(curl:*)",
                 "mcp__slack", "Edit(/package-lock.json)"],
        "ask": ["Bash(git push:*)", "Edit(/package.json)"],
        "defaultMode": "default",
    },
    "model": "opus",
}
OPENCODE = {
    "$schema": "https://opencode.ai/config.json",
    "permission": {
        "edit": {"*": "deny", "src/*.ts": "allow", "src/generated/*": "deny"},
        "bash": {"*": "ask", "git status": "allow", "rm": "deny"},
        "webfetch": "ask",
        "read": {"*": "allow", "*.env": "deny"},
        "external_directory": "deny",
    },
    "agent": {"plan": {"permission": {"edit": {"*": "deny", ".opencode/plans/*.md": "allow"}}}},
}


def _import(tmp_path: Path, repo: Path, kind: str, data: dict[str, object]) -> tuple[Guard, str]:
    src = tmp_path / f"{kind}.json"
    src.write_text(json.dumps(data, indent=2))
    out = tmp_path / "imported.toml"
    r = guard("import", kind, str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    return Guard.load(str(out), worktree=repo), r.stderr


def _decide(g: Guard, agent: str, effect: Effect) -> Action:
    return g.decide_effect(agent, effect).action


def test_claude_code_settings_convert(tmp_path: Path, repo: Path) -> None:
    g, notes = _import(tmp_path, repo, "claude-code", CLAUDE)
    a = "build"  # the agent guard's hooks decide as outside plan mode
    assert _decide(g, a, Effect.read(str(repo / ".env"))) is Action.DENY
    assert _decide(g, a, Effect.read(str(repo / "src/app.py"))) is Action.ALLOW
    assert _decide(g, a, Effect.read("/etc/shadow")) is Action.DENY
    assert _decide(g, a, Effect.write(str(repo / "src/app.py"))) is Action.ALLOW
    assert _decide(g, a, Effect.write(str(repo / "README.md"))) is Action.ASK
    assert _decide(g, a, Effect.write(str(repo / "package.json"))) is Action.ASK
    assert _decide(g, a, Effect.write(str(repo / "package-lock.json"))) is Action.DENY
    assert _decide(g, a, Effect.network("docs.python.org")) is Action.ALLOW
    # guard decides curl by the hosts it reaches, not by its name: refused, with the reason
    assert "'Bash(curl:*)': refused" in notes
    assert _decide(g, a, Effect.tool("mcp__github__get_issue")) is Action.ALLOW
    # the host's denials hold in plan mode too
    assert _decide(g, "plan", Effect.read(str(repo / ".env"))) is Action.DENY
    # every construct that does not convert exactly is named
    assert "Bash(npm run test:*)" in notes and "command-prefix rules do not convert" in notes
    assert "'mcp__slack': a whole MCP server" in notes
    assert "'/package.json': Claude Code anchors '/path'" in notes
    assert "'./.env': Claude Code resolves './path' from the current directory" in notes


def test_claude_code_protected_paths_still_hold(tmp_path: Path, repo: Path) -> None:
    """Attack: an imported `Edit(**)` allow must not open guard's own files or git hooks."""
    data = {"permissions": {"allow": ["Edit(**)"], "defaultMode": "acceptEdits"}}
    g, _ = _import(tmp_path, repo, "claude-code", data)
    assert _decide(g, "build", Effect.write(str(repo / ".git/hooks/pre-commit"))) is (
        Action.DENY
    )


def test_opencode_order_and_star_are_kept(tmp_path: Path, repo: Path) -> None:
    g, notes = _import(tmp_path, repo, "opencode", OPENCODE)
    a = "build"
    # `src/*.ts` crosses '/' in OpenCode: nested files are allowed too
    assert _decide(g, a, Effect.write(str(repo / "src/deep/x.ts"))) is Action.ALLOW
    # the later `src/generated/*` deny wins over the earlier allow
    assert _decide(g, a, Effect.write(str(repo / "src/generated/x.ts"))) is Action.DENY
    assert _decide(g, a, Effect.write(str(repo / "README.md"))) is Action.DENY
    assert _decide(g, a, Effect.read(str(repo / "config/prod.env"))) is Action.DENY
    assert _decide(g, a, Effect.read(str(repo / "src/app.py"))) is Action.ALLOW
    assert _decide(g, a, Effect.read("/opt/elsewhere.txt")) is Action.DENY  # external_directory
    # `rm` denied: guard sees rm as a delete, so every delete is denied (never a dead exec rule)
    assert _decide(g, a, Effect.delete(str(repo / "src/app.py"))) is Action.DENY
    assert _decide(g, a, Effect.tool("bash")) is Action.ASK
    assert "OpenCode's '*' crosses '/'" in notes and "last match wins" in notes
    assert "'git status' = 'allow': command patterns do not convert" in notes
    # the plan agent becomes a plan-mode agent, and lint tells why it is not confined
    assert g.agent("opencode-plan").mode == "plan"
    r = guard("lint", str(tmp_path / "imported.toml"))
    assert r.returncode == 3 and "GL201" in r.stdout and ".opencode/plans" in r.stdout


def test_output_is_never_overwritten_without_force(tmp_path: Path) -> None:
    src = tmp_path / "cc.json"
    src.write_text(json.dumps(CLAUDE))
    out = tmp_path / "policy.toml"
    out.write_text("keep me\n")
    r = guard("import", "claude-code", str(src), "-o", str(out))
    assert r.returncode == 2 and "--force" in r.stderr
    assert out.read_text() == "keep me\n"
    assert guard("import", "claude-code", str(src), "-o", str(out), "--force").returncode == 0
    assert out.read_text().startswith("# Imported by `guard import`")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"permissions": {"allow": ["Read"],}}', "invalid JSON"),
        ('["Read"]', "expected a JSON object"),
        ('{"model": "opus"}', 'no "permissions" object'),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path: Path, content: str, needle: str) -> None:
    src = tmp_path / "settings.json"
    src.write_text(content)
    r = guard("import", "claude-code", str(src))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_opencode_bad_action_names_the_key(tmp_path: Path) -> None:
    src = tmp_path / "opencode.json"
    src.write_text(json.dumps({"permission": {"edit": {"*": "maybe"}}}))
    r = guard("import", "opencode", str(src))
    assert r.returncode == 2 and "permission.edit.*" in r.stderr


# -- the order-preserving translation against a reference last-match-wins evaluator --

SEGMENTS = ["src", "docs", "gen", "a.ts", "b.md", "c.env"]
PATTERNS = ["*", "src/*", "src/*.ts", "docs/*", "*.env", "gen/*", "src/gen/*", "*.md"]


def _opencode_match(pattern: str, path: str) -> bool:
    import re

    rx = "".join(".*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, path) is not None


@settings(max_examples=60, deadline=None)
@given(
    rules=st.lists(
        st.tuples(st.sampled_from(PATTERNS), st.sampled_from(["allow", "ask", "deny"])),
        min_size=1,
        max_size=5,
    ),
    path=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join),
)
def test_ordered_lists_decide_like_last_match_wins(
    rules: list[tuple[str, str]], path: str
) -> None:
    """The converted lists never decide laxer than OpenCode for paths OpenCode's
    patterns and guard's converted patterns both describe."""
    from guard.lint.rule_context import FAKE_ROOTS
    from guard.match import CompiledList, parse_pattern

    notes = Notes()
    converted = [(convert_glob(p, "t", notes), a) for p, a in rules]
    expected = None
    for p, a in rules:
        if _opencode_match(p, path):
            expected = a
    lists = ordered(converted)
    roots = {"worktree": str(FAKE_ROOTS.worktree)}
    full = f"{FAKE_ROOTS.worktree}/{path}"
    got = None
    for name in ("deny", "ask", "allow"):
        pats = [q for q in (parse_pattern(t) for t in lists[name]) if q is not None]
        if CompiledList(pats, roots).matched(full) is not None:
            got = name
            break
    severity = {None: -1, "allow": 0, "ask": 1, "deny": 2}
    if expected is not None and expected != "allow":
        assert severity[got] >= severity[expected], (lists, path, expected, got)


@pytest.mark.parametrize(
    "data",
    [
        CLAUDE,
        {"permissions": {"allow": ["Edit(**)"], "defaultMode": "acceptEdits"}},
        {"permissions": {"deny": ["WebFetch"], "ask": ["Bash(git push:*)"]}},
    ],
)
def test_an_imported_claude_code_policy_passes_lint(
    tmp_path: Path, repo: Path, data: dict[str, object]
) -> None:
    """What `guard import` writes, `guard lint` accepts at once (no GL206: the build agent
    cannot call plan mode's request_user_input)."""
    g, _ = _import(tmp_path, repo, "claude-code", data)
    assert _decide(g, "build", Effect.tool("request_user_input")) is Action.DENY
    r = guard("lint", "--fail-level", "warning", str(tmp_path / "imported.toml"))
    assert r.returncode == 0, r.stdout
    assert "No findings" in r.stdout


def test_an_imported_opencode_build_agent_cannot_ask_plan_questions(
    tmp_path: Path, repo: Path
) -> None:
    g, _ = _import(tmp_path, repo, "opencode", OPENCODE)
    assert _decide(g, "build", Effect.tool("request_user_input")) is Action.DENY
    r = guard("lint", str(tmp_path / "imported.toml"))
    assert "GL206" not in r.stdout  # GL201 remains: OpenCode's plan agent writes its plans
