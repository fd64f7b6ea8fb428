"""The pure parts of the MCP proxy: effects of filesystem-server calls, and reading answers.

Effects are decided here by the real evaluator with the shipped policy over a
real git worktree, so each row states what the plan agent may do.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from guard.analysis import ToolInputError, effects_for
from guard.analysis.mcp import TOOLS as MCP_TOOLS
from guard.decide import Guard
from guard.effects import Action, Decision, EffectKind
from guard.mcp import asking
from guard.mcp.call_effects import mcp_effects
from guard.planning.checklist import RequestUserInputArgs
from guard.planning.handshake import ExitChoice, ExitRequest


@pytest.fixture
def guard_in_repo(tmp_path: Path) -> tuple[Guard, Path]:
    repo = tmp_path / "project"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    repo = repo.resolve()
    return Guard.load("builtin:default", cwd=repo), repo


PLANS = ".openoxide/plans"


@pytest.mark.parametrize(
    ("tool", "arguments", "action"),
    [
        ("read_text_file", {"path": "src/a.py"}, Action.ALLOW),
        ("read_multiple_files", {"paths": ["src/a.py", "README.md"]}, Action.ALLOW),
        ("list_directory", {"path": "src"}, Action.ALLOW),
        ("directory_tree", {"path": "src"}, Action.ALLOW),
        ("search_files", {"path": "src", "pattern": "*.py"}, Action.ALLOW),
        ("get_file_info", {"path": "src/a.py"}, Action.ALLOW),
        ("read_text_file", {"path": ".env"}, Action.ASK),
        ("write_file", {"path": "src/a.py", "content": "x"}, Action.DENY),
        ("write_file", {"path": f"{PLANS}/p.md", "content": "x"}, Action.ALLOW),
        ("write_file", {"path": f"{PLANS}/../policy.toml", "content": "x"}, Action.DENY),
        ("edit_file", {"path": "src/a.py", "edits": []}, Action.DENY),
        ("edit_file", {"path": f"{PLANS}/p.md", "edits": []}, Action.ALLOW),
        ("create_directory", {"path": "src/new"}, Action.DENY),
        ("move_file", {"source": f"{PLANS}/p.md", "destination": "src/p.md"}, Action.DENY),
        ("move_file", {"source": "src/a.py", "destination": f"{PLANS}/a.md"}, Action.DENY),
        ("move_file", {"source": f"{PLANS}/a.md", "destination": f"{PLANS}/b.md"}, Action.ALLOW),
        ("list_allowed_directories", {}, Action.ALLOW),
        ("execute_command", {"command": "rm -rf /"}, Action.DENY),
    ],
)
def test_plan_agent_decisions_on_filesystem_server_calls(
    guard_in_repo: tuple[Guard, Path], tool: str, arguments: dict[str, Any], action: Action
) -> None:
    g, repo = guard_in_repo
    effects = mcp_effects(tool, arguments, str(repo))
    assert effects[0].kind is EffectKind.TOOL
    decision = g.decide("plan", effects, repo)
    assert decision.action is action, decision.reason


def test_build_agent_may_write_and_move_inside_the_worktree(
    guard_in_repo: tuple[Guard, Path],
) -> None:
    g, repo = guard_in_repo
    for tool, arguments in (
        ("write_file", {"path": "src/a.py", "content": "x"}),
        ("move_file", {"source": "src/a.py", "destination": "src/b.py"}),
        # an unknown tool with a command is analysed as shell; a read-only one is allowed
        ("execute_command", {"command": "ls src"}),
    ):
        assert g.decide("build", mcp_effects(tool, arguments, str(repo)), repo).allowed


def test_unknown_mcp_command_tool_is_decided_like_the_shell(
    guard_in_repo: tuple[Guard, Path],
) -> None:
    """Attack: a server exposes its shell under a name guard does not know, hoping to be waved
    through by the tool table; build decides it exactly as it decides the same Bash command."""
    g, repo = guard_in_repo
    for command in ("make", "echo x > ~/.bashrc", "ls"):
        guessed = mcp_effects("execute_command", {"command": command}, str(repo))
        unknown = g.decide("build", guessed, repo)
        bash = g.decide(
            "build", effects_for("claude-code", "Bash", {"command": command}, str(repo)), repo
        )
        assert unknown.action is bash.action, command


def test_every_tool_of_the_filesystem_server_is_in_the_table() -> None:
    # the tool names server-filesystem 2026.8.31 lists (HOSTS.md, seen here)
    offered = {
        "create_directory", "directory_tree", "edit_file", "get_file_info",
        "list_allowed_directories", "list_directory", "list_directory_with_sizes", "move_file",
        "read_file", "read_media_file", "read_multiple_files", "read_text_file", "search_files",
        "write_file",
    }  # fmt: skip
    assert offered <= set(MCP_TOOLS)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write_file", {"content": "x"}),
        ("write_file", {"path": ""}),
        ("write_file", {"path": ["a"]}),
        ("read_multiple_files", {"paths": "a"}),
        ("move_file", {"source": "a"}),
    ],
)
def test_unreadable_arguments_raise_a_clear_error(tool: str, arguments: dict[str, Any]) -> None:
    with pytest.raises(ToolInputError, match=tool):
        mcp_effects(tool, arguments, "/")


# -- answers to elicitation -------------------------------------------------------------------

ASK = Decision(Action.ASK, "secrets ask", "agents.plan.read.ask[0]")


@pytest.mark.parametrize(
    ("result", "allowed"),
    [
        ({"action": "accept", "content": {"allow": True}}, True),
        ({"action": "accept", "content": {"allow": False}}, False),
        ({"action": "accept", "content": {"allow": "true"}}, False),  # only a real boolean
        ({"action": "accept", "content": {}}, False),
        ({"action": "accept"}, False),
        ({"action": "decline"}, False),
    ],
)
def test_only_an_explicit_yes_allows_an_asked_call(result: dict[str, Any], allowed: bool) -> None:
    message, schema = asking.call_question("plan", "read_text_file", {"path": ".env"}, ASK)
    assert ".env" in message and schema["required"] == ["allow"]
    assert asking.read_call_answer(result) is allowed


@pytest.mark.parametrize("result", [{"action": "cancel"}, {"action": "yes please"}, {}])
def test_a_dismissed_or_unknown_answer_is_a_failure_not_a_yes(result: dict[str, Any]) -> None:
    with pytest.raises(asking.AskFailed):
        asking.read_call_answer(result)


def test_plan_exit_answers() -> None:
    request = ExitRequest("s1", "/w/.openoxide/plans/p.md", "# Plan\n" + "x" * 9000, "sum")
    message, schema = asking.exit_question(request)
    assert request.plan in message  # all of it: the approval covers what the user saw
    assert schema["properties"]["decision"]["enum"] == ["approve", "reject", "refine"]
    approve = asking.read_exit_answer({"action": "accept", "content": {"decision": "approve"}})
    assert approve.choice is ExitChoice.APPROVE
    refine = asking.read_exit_answer(
        {"action": "accept", "content": {"decision": "refine", "note": "split step 2"}}
    )
    assert refine.choice is ExitChoice.REFINE and refine.text == "split step 2"
    declined = asking.read_exit_answer({"action": "decline"})
    assert declined.choice is ExitChoice.REJECT
    with pytest.raises(asking.AskFailed):
        asking.read_exit_answer({"action": "accept", "content": {"decision": "yolo"}})


def test_request_user_input_answers_map_back_to_questions() -> None:
    args = RequestUserInputArgs.model_validate(
        {
            "questions": [
                {"question": "Which DB?", "options": [{"label": "sqlite"}, {"label": "pg"}]},
                {"question": "Tests?", "options": [{"label": "yes"}, {"label": "no"}]},
            ]
        }
    )
    message, schema = asking.input_question(args)
    assert "Which DB?" in message and "Tests?" in message
    assert schema["properties"]["q1"]["enum"] == ["sqlite", "pg"]
    answers = asking.read_input_answer(
        args, {"action": "accept", "content": {"q1": "pg", "q2": "yes"}}
    )
    assert answers == ["pg", "yes"]
    with pytest.raises(asking.AskFailed):
        asking.read_input_answer(args, {"action": "decline"})
