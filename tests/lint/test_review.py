"""`guard review`: layers here and the red-team matrix, against the real evaluator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from guard.effects import Action
from guard.lint.corpus import CORPUS
from guard.lint.review import run_review
from guard.sandbox.landlock import abi_version

from .helpers import guard

LEAKY_PLAN = """version = 1
[agents.plan]
mode = "plan"
default = "deny"
[agents.plan.tools]
"*" = "allow"
[agents.plan.read]
allow = ["**"]
[agents.plan.write]
allow = ["{plans}/*.md", "src/**"]
default = "deny"
[agents.plan.delete]
default = "deny"
"""


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_corpus_covers_every_dialect_and_trick() -> None:
    assert {op.dialect for op in CORPUS} >= {"claude-code", "codex", "gemini", "opencode", "mcp"}
    assert {op.category for op in CORPUS} >= {
        "write-tool", "shell", "symlink", "traversal", "protected", "mode", "control"
    }
    assert len({op.id for op in CORPUS}) == len(CORPUS)


def test_default_policy_lets_no_write_through(repo: Path) -> None:
    before = _tree(repo)
    review = run_review(cwd=str(repo))
    assert review.through == []
    assert _tree(repo) == before, "the review must not touch the worktree"
    by_id = {r.op.id: r for r in review.rows}
    assert by_id["plan-file"].decision.action is Action.ALLOW  # plan file stays writable
    # Attack: the plan file name is a symlink into src/: both ends are checked
    assert by_id["link-plan-file"].decision.action is Action.DENY
    assert by_id["link-plan-dir"].decision.action is Action.DENY
    # Attack: a hard link in the plan directory to a source file
    assert by_id["hardlink-plan-file"].decision.action is Action.DENY
    assert by_id["hardlink-plan-file"].decision.rule == "guard.hardlink"
    assert by_id["trav-dotdot"].decision.action is Action.DENY
    assert "protected" in by_id["prot-hook"].decision.rule


def test_leaky_policy_is_flagged_with_exit_3(repo: Path) -> None:
    """Attack: a plan policy allowing src/** lets every write tool of every dialect in."""
    (repo / "leaky.toml").write_text(LEAKY_PLAN)
    r = guard("review", "--policy", "leaky.toml", "--format", "json", cwd=repo)
    assert r.returncode == 3, r.stderr
    data = json.loads(r.stdout)
    assert data["failed"] and {"cc-write", "gemini-write", "mcp-write"} <= set(data["through"])
    assert data["verdict"].startswith("FAIL")
    rows = {row["id"]: row for row in data["operations"]}
    assert rows["cc-write"]["verdict"] == "GETS THROUGH"
    assert "src/**" in rows["cc-write"]["rule"]


def test_layers_report_what_is_here(repo: Path) -> None:
    review = run_review(cwd=str(repo))
    layers = {layer.name: layer for layer in review.layers}
    assert layers["policy evaluator"].active
    assert layers["tool-call analysis"].active
    abi = abi_version()
    assert layers["Landlock"].active is (abi > 0)
    assert (f"kernel ABI {abi}" in layers["Landlock"].detail) if abi else True
    assert "host hooks" in layers  # nothing installed in a fresh repository


def test_rows_use_the_tool_analysis(repo: Path) -> None:
    review = run_review(cwd=str(repo))
    assert all(r.source in ("analysed", "error") for r in review.rows)
    assert not review.failed()


def test_a_broken_install_is_an_error_not_a_weaker_review(repo: Path) -> None:
    """The tool-call analysis is part of guard, not an optional layer: when it cannot be
    imported (a broken install), the review stops with that error instead of deciding
    on weaker grounds."""
    code = (
        "import sys; sys.modules['guard.analysis'] = None\n"
        "from guard.lint.review import run_review\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0
    assert "guard.analysis" in r.stderr and "ModuleNotFoundError" in r.stderr


def test_installed_hook_is_detected(repo: Path) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": "guard hook claude-code"}]}
    ]}}))
    layers = {layer.name: layer for layer in run_review(cwd=str(repo)).layers}
    assert layers["Claude Code hooks"].active


def test_markdown_report_and_exit_code(repo: Path) -> None:
    r = guard("review", cwd=repo)
    assert "## Attempted operations" in r.stdout and "| cc-write |" in r.stdout
    assert r.returncode == 0, r.stdout[-400:]


def test_review_of_a_build_agent_is_refused(repo: Path) -> None:
    r = guard("review", "--agent", "build", cwd=repo)
    assert r.returncode == 2 and "build mode" in r.stderr


def test_scratch_worktree_is_removed(repo: Path) -> None:
    bases = [b for b in ("/var/tmp", tempfile.gettempdir()) if os.path.isdir(b)]
    before = {b: set(os.listdir(b)) for b in bases}
    run_review(cwd=str(repo))
    for b in bases:
        assert not [n for n in set(os.listdir(b)) - before[b] if n.startswith("guard-review-")]


def test_hooks_that_do_not_call_guard_are_not_a_layer(repo: Path) -> None:
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text(json.dumps({"hooks": {"BeforeTool": [
        {"matcher": "write_file", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    ]}}))
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "*"\n[[hooks.PreToolUse.hooks]]\ntype = "command"\n'
        'command = "python3 -m guard hook codex"\n'
    )
    layers = {layer.name: layer for layer in run_review(cwd=str(repo)).layers}
    assert not layers["Gemini CLI hooks"].active
    assert "none calls guard" in layers["Gemini CLI hooks"].detail
    assert layers["Codex CLI hooks"].active
    assert "PreToolUse: python3 -m guard hook codex" in layers["Codex CLI hooks"].detail


def test_hook_written_by_guard_install_is_detected(repo: Path) -> None:
    """The entry `guard install claude-code --project` writes counts as a hook layer."""
    r = subprocess.run(
        [sys.executable, "-m", "guard", "install", "claude-code", "--project"],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    layers = {layer.name: layer for layer in run_review(cwd=str(repo)).layers}
    assert layers["Claude Code hooks"].active, layers["Claude Code hooks"].detail


def test_review_shows_the_network_rows_and_the_egress_rules(repo: Path) -> None:
    """The matrix holds what changes a remote (a POST, a push, a merge, as the analyser
    and as the egress proxy see it, and a name rebinding to loopback): the shipped plan
    agent blocks every one, and the layers say what the egress proxy lets through."""
    review = run_review(cwd=str(repo))
    rows = [r for r in review.rows if r.op.category == "network"]
    assert {r.op.dialect for r in rows} >= {"claude-code", "egress"}
    assert rows and all(r.decision.action is not Action.ALLOW for r in rows)
    assert not any(r.through or r.asks for r in rows)
    posts = [r for r in rows if r.op.id in ("net-curl-post", "net-git-push", "net-egress-post")]
    assert {r.decision.rule for r in posts} == {"guard.plan-network"}
    [layer] = [la for la in review.layers if la.name == "egress proxy rules"]
    assert layer.active and "GET, HEAD and OPTIONS only" in layer.detail
