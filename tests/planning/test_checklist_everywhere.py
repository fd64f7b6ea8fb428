"""`guard session show`, `guard plan status` (and --json) show the checklist the cockpit
shows: a host's own checklist tool (Claude Code's TodoWrite) as well as update_plan."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from guard.cli import app
from guard.planning import Session, todos
from guard.ui.state import Cockpit

runner = CliRunner()
TODOS = [
    {"content": "Add the cache", "status": "in_progress", "activeForm": "Adding the cache"},
    {"content": "Test the cache", "status": "pending", "activeForm": "Testing the cache"},
]


def test_a_host_checklist_is_the_same_in_the_cockpit_and_the_cli(
    session: Session, repo: Path
) -> None:
    assert todos.capture("claude-code", "TodoWrite", {"todos": TODOS}, str(repo))
    view = Cockpit(repo, hosts=lambda _cwd: []).view
    shown = [(i.step, i.status.value) for i in view.checklist]
    assert shown == [("Add the cache", "in_progress"), ("Test the cache", "pending")]
    out = runner.invoke(app, ["plan", "status", "--cwd", str(repo), "--json"]).output
    data = json.loads(out)
    assert [(i["step"], i["status"]) for i in data["checklist"]] == shown
    assert data["checklist_from"] == view.checklist_from
    text = runner.invoke(app, ["plan", "status", "--cwd", str(repo)]).output
    assert "[in_progress] Add the cache" in text and view.checklist_from in text
    show = runner.invoke(app, ["session", "show", "--cwd", str(repo)], terminal_width=200)
    assert "→ Add the cache" in show.output and "• Test the cache" in show.output
