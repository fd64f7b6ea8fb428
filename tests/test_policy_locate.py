"""Exact lines for every policy problem, the same hints in `check` and `lint`, and the
load-time warning for patterns that can never match (check, and the hook's audit record)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guard.policy import PolicyError, load_policy, locate_line
from guard.policy.source_lines import key_lines


def guard(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, input=stdin, check=False,
    )


ISSUE = """\
version = 1
[agents.plan]
mode = "plan"
default = "deny"
[agents.plan.write]
deny = ["a", "b", 3]
allow = ["{plans}/*.md"]

[agents.plan.writes]
allow = ["x"]
"""


def test_the_reported_file_gets_line_6_and_line_9_in_check_and_lint(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text(ISSUE)
    r = guard("check", "--policy", str(p), "write", "x", cwd=tmp_path)
    assert r.returncode == 2
    assert f"{p}:6: agents.plan.write.deny[2]: " in r.stderr
    assert f"{p}:9: agents.plan.writes: unknown key 'writes'; did you mean 'write'?" in r.stderr
    r = guard("lint", str(p), cwd=tmp_path)
    assert r.returncode == 3
    assert "p.toml:6: GL001" in r.stdout
    assert "p.toml:9: GL002" in r.stdout and "did you mean 'write'?" in r.stdout


TRICKY = "\n".join(
    [
        '# a comment with [brackets] and "quotes" and deny = ["nope"]',
        'version = 1',
        'description = """a multi-line',
        'string with [agents.plan] inside and a "quote" and \\""" an escaped end',
        '"""',
        '[agents.plan] # trailing comment [x]',
        "mode = 'plan'",
        'default = "deny"',
        'write.allow = [',
        '  "{plans}/*.md",   # first item, a comment with "quotes", 7 and ]',
        "  '''",
        '"literal multi-line"',
        "''',",
        '  "third",',
        ']',
        'tools = { bash = "deny", "web fetch" = \'ask\', nested = { x = [1, [2, 3], "y"] } }',
        '',
        '[agents.plan.read]',
        'deny = [1, 2.5, true, "s", 1979-05-27, [ "in", "ner" ], { a = 1 }, "last"]',
        '',
        '[[rules]]',
        'name = "first"',
        '[[rules]]',
        'name = "second"',
        '[rules.sub]',
        'k = 1',
    ]
) + "\n"


@pytest.mark.parametrize(
    ("loc", "line"),
    [
        (("version",), 2),
        (("description",), 3),
        (("agents",), 6),
        (("agents", "plan"), 6),
        (("agents", "plan", "mode"), 7),
        (("agents", "plan", "default"), 8),
        (("agents", "plan", "write", "allow"), 9),
        (("agents", "plan", "write", "allow", 0), 10),
        (("agents", "plan", "write", "allow", 1), 11),
        (("agents", "plan", "write", "allow", 2), 14),
        (("agents", "plan", "tools", "web fetch"), 16),
        (("agents", "plan", "tools", "nested", "x", 2), 16),
        (("agents", "plan", "read"), 18),
        (("agents", "plan", "read", "deny", 0), 19),
        (("agents", "plan", "read", "deny", 7), 19),
        (("rules", 0, "name"), 22),
        (("rules", 1, "name"), 24),
        (("rules", 1, "sub", "k"), 26),
        (("agents", "plan", "read", "deny", 99), 19),  # no such item: its list
        (("nothing", "here"), 1),
    ],
)
def test_lines_of_keys_and_items_in_tricky_toml(loc: tuple[str | int, ...], line: int) -> None:
    import tomllib

    tomllib.loads(TRICKY)  # the scanner only ever sees text the parser accepted
    assert locate_line(TRICKY, loc) == line


def test_lines_in_json() -> None:
    text = (
        '{\n  "version": 1,\n  "agents": {\n    "plan": {\n      "mode": "plan",\n'
        '      "write": {"deny": ["a", 3,\n        {"x": "]"}, "b"]}\n    }\n  }\n}\n'
    )
    json.loads(text)
    assert locate_line(text, ("agents", "plan", "mode")) == 5
    assert locate_line(text, ("agents", "plan", "write", "deny", 1)) == 6
    assert locate_line(text, ("agents", "plan", "write", "deny", 3)) == 7


def test_every_key_of_the_shipped_policies_is_found() -> None:
    root = Path(__file__).resolve().parents[1] / "policies"
    for f in root.glob("*.toml"):
        lines = key_lines(f.read_text())
        assert lines is not None, f
        loaded = load_policy(str(f))
        for agent, a in loaded.model.agents.items():
            for kind in ("read", "write", "delete", "exec", "network"):
                for i, _ in enumerate(getattr(a, kind).allow):
                    assert ("agents", agent, kind, "allow", i) in lines, (f, agent, kind, i)


def test_a_json_policy_error_is_on_its_line(tmp_path: Path) -> None:
    p = tmp_path / "p.json"
    p.write_text(
        '{"version": 1,\n "agents": {"plan": {"mode": "plan", "default": "deny",\n'
        '   "write": {"deny": ["a",\n      5]}}}}\n'
    )
    with pytest.raises(PolicyError) as info:
        load_policy(str(p))
    assert info.value.problems[0].startswith(f"{p}:4: agents.plan.write.deny[1]:")


def test_a_never_matching_pattern_warns_once_at_load_in_check(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # a worktree: no other warning
    p = tmp_path / "w.toml"
    p.write_text('version = 1\nextends = ["builtin:default"]\n\n[agents.plan.write]\n'
                 'deny = ["src/**", "src/[abc"]\n')
    r = guard("check", "--policy", str(p), "write", "src/a", cwd=tmp_path)
    assert r.returncode == 1
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert warnings == [
        f"guard: warning: {p}:5: agents.plan.write.deny[1]: pattern 'src/[abc' can never match:"
        " it has an unterminated or invalid [...] class; fix the glob or remove it (GL101)"
    ], r.stderr
    lint = guard("lint", str(p), cwd=tmp_path)
    assert "w.toml:5: GL101" in lint.stdout and "pattern 'src/[abc' can never match" in lint.stdout


def test_the_hook_records_the_warning_in_the_audit_log_not_in_its_answer(repo: Path) -> None:
    (repo / ".openoxide" / "policy.toml").write_text(
        'version = 1\nextends = ["builtin:default"]\n[agents.plan.write]\ndeny = ["src/[abc"]\n'
    )
    call = {
        "hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": str(repo),
        "tool_input": {"file_path": "src/x.py", "content": ""}, "session_id": "s",
    }
    r = guard("hook", "claude-code", "--agent", "plan", cwd=repo, stdin=json.dumps(call))
    assert r.returncode == 0 and json.loads(r.stdout)["hookSpecificOutput"][
        "permissionDecision"
    ] == "deny"
    assert "[abc" not in r.stdout + r.stderr  # the protocol is unchanged
    doc = json.loads(guard("doctor", "--json", cwd=repo).stdout)
    (row,) = [c for c in doc["layers"] if c["name"] == "audit log"]
    records = [json.loads(ln) for ln in Path(row["path"]).read_text().splitlines()]
    assert records[-1]["decision"] == "deny"
    assert any("src/[abc" in w and "GL101" in w for w in records[-1]["policy_warnings"])
