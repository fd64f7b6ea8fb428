"""Each dialect maps its tools to canonical names and effects; bad input is one clear error."""

from __future__ import annotations

from typing import Any

import pytest

from guard.analysis import CANONICAL_TOOLS, DIALECTS, ToolInputError, effects_for
from guard.effects import EffectKind


def fx(dialect: str, tool: str, data: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(e.kind.value, e.target) for e in effects_for(dialect, tool, data, "/w")]


def test_dialect_names() -> None:
    assert DIALECTS == ("claude-code", "codex", "opencode", "gemini", "mcp")


@pytest.mark.parametrize(
    ("dialect", "tool", "data", "expected"),
    [
        ("claude-code", "Read", {"file_path": "/w/a"}, [("tool", "read"), ("read", "/w/a")]),
        (
            "claude-code",
            "Write",
            {"file_path": "a", "content": ""},
            [("tool", "write"), ("write", "a")],
        ),
        ("claude-code", "Edit", {"file_path": "a"}, [("tool", "edit"), ("write", "a")]),
        (
            "claude-code",
            "MultiEdit",
            {"file_path": "a", "edits": []},
            [("tool", "multiedit"), ("write", "a")],
        ),
        (
            "claude-code",
            "NotebookEdit",
            {"notebook_path": "n.ipynb"},
            [("tool", "notebook_edit"), ("write", "n.ipynb")],
        ),
        ("claude-code", "Glob", {"pattern": "src/**/*.py"}, [("tool", "glob"), ("read", "src")]),
        (
            "claude-code",
            "Glob",
            {"pattern": "*.py", "path": "/w/src"},
            [("tool", "glob"), ("read", "/w/src")],
        ),
        ("claude-code", "Grep", {"pattern": "x"}, [("tool", "grep"), ("read", ".")]),
        ("claude-code", "LS", {"path": "/w"}, [("tool", "list"), ("read", "/w")]),
        ("claude-code", "Bash", {"command": "rm a"}, [("tool", "bash"), ("delete", "a")]),
        (
            "claude-code",
            "WebFetch",
            {"url": "https://Example.com/x"},
            [("tool", "webfetch"), ("network", "example.com")],
        ),
        ("claude-code", "WebSearch", {"query": "x"}, [("tool", "websearch")]),
        ("claude-code", "TodoWrite", {"todos": []}, [("tool", "todowrite")]),
        ("claude-code", "ExitPlanMode", {"plan": "p"}, [("tool", "plan_exit")]),
        ("claude-code", "AskUserQuestion", {}, [("tool", "request_user_input")]),
        (
            "claude-code",
            "Task",
            {"subagent_type": "Explore"},
            [("tool", "task"), ("tool", "task:Explore")],
        ),
        ("claude-code", "Agent", {"prompt": "x"}, [("tool", "task")]),
        ("codex", "shell", {"command": ["rm", "a"]}, [("tool", "bash"), ("delete", "a")]),
        (
            "codex",
            "shell",
            {"command": ["bash", "-lc", "touch b"], "workdir": "d"},
            [("tool", "bash"), ("read", "d"), ("write", "d/b")],
        ),
        ("codex", "exec_command", {"cmd": "touch c"}, [("tool", "bash"), ("write", "c")]),
        (
            "codex",
            "apply_patch",
            {"command": "*** Begin Patch\n*** Delete File: x\n*** End Patch"},
            [("tool", "apply_patch"), ("delete", "x")],
        ),
        ("codex", "update_plan", {"plan": []}, [("tool", "update_plan")]),
        ("codex", "request_user_input", {}, [("tool", "request_user_input")]),
        ("opencode", "read", {"filePath": "a"}, [("tool", "read"), ("read", "a")]),
        ("opencode", "write", {"filePath": "a"}, [("tool", "write"), ("write", "a")]),
        ("opencode", "edit", {"filePath": "a"}, [("tool", "edit"), ("write", "a")]),
        (
            "opencode",
            "patch",
            {"patchText": "*** Begin Patch\n*** Add File: n\n*** End Patch"},
            [("tool", "patch"), ("write", "n")],
        ),
        ("opencode", "bash", {"command": "ls > o"}, [("tool", "bash"), ("write", "o")]),
        ("opencode", "list", {}, [("tool", "list"), ("read", ".")]),
        ("opencode", "todowrite", {}, [("tool", "todowrite")]),
        ("opencode", "plan_enter", {}, [("tool", "plan_enter")]),
        ("opencode", "plan_exit", {}, [("tool", "plan_exit")]),
        ("opencode", "question", {}, [("tool", "question")]),
        (
            "opencode",
            "task",
            {"subagent_type": "general"},
            [("tool", "task"), ("tool", "task:general")],
        ),
        ("gemini", "read_file", {"absolute_path": "/w/a"}, [("tool", "read"), ("read", "/w/a")]),
        ("gemini", "write_file", {"file_path": "a"}, [("tool", "write"), ("write", "a")]),
        ("gemini", "replace", {"file_path": "a"}, [("tool", "edit"), ("write", "a")]),
        (
            "gemini",
            "run_shell_command",
            {"command": "rm a", "directory": "d"},
            [("tool", "bash"), ("read", "d"), ("delete", "d/a")],
        ),
        ("gemini", "glob", {"pattern": "**/*.md"}, [("tool", "glob"), ("read", ".")]),
        (
            "gemini",
            "search_file_content",
            {"pattern": "x", "path": "s"},
            [("tool", "grep"), ("read", "s")],
        ),
        ("gemini", "list_directory", {"path": "s"}, [("tool", "list"), ("read", "s")]),
        (
            "gemini",
            "save_memory",
            {"fact": "x"},
            [("tool", "save_memory"), ("write", "~/.gemini/GEMINI.md")],
        ),
        ("mcp", "read_file", {"path": "a"}, [("tool", "read"), ("read", "a")]),
        ("mcp", "read_text_file", {"path": "a"}, [("tool", "read"), ("read", "a")]),
        (
            "mcp",
            "read_multiple_files",
            {"paths": ["a", "b"]},
            [("tool", "read"), ("read", "a"), ("read", "b")],
        ),
        ("mcp", "write_file", {"path": "a"}, [("tool", "write"), ("write", "a")]),
        ("mcp", "edit_file", {"path": "a", "edits": []}, [("tool", "edit"), ("write", "a")]),
        ("mcp", "create_directory", {"path": "d"}, [("tool", "create_directory"), ("write", "d")]),
        ("mcp", "list_directory", {"path": "d"}, [("tool", "list"), ("read", "d")]),
        ("mcp", "directory_tree", {"path": "d"}, [("tool", "list"), ("read", "d")]),
        (
            "mcp",
            "move_file",
            {"source": "a", "destination": "b"},
            [("tool", "move"), ("read", "a"), ("delete", "a"), ("write", "b")],
        ),
        (
            "mcp",
            "search_files",
            {"path": "d", "pattern": "*.py"},
            [("tool", "glob"), ("read", "d")],
        ),
        ("mcp", "get_file_info", {"path": "a"}, [("tool", "list"), ("read", "a")]),
        ("mcp", "mcp__filesystem__write_file", {"path": "a"}, [("tool", "write"), ("write", "a")]),
    ],
)
def test_tool_maps_to_effects(
    dialect: str, tool: str, data: dict[str, Any], expected: list[tuple[str, str | None]]
) -> None:
    assert fx(dialect, tool, data) == expected


def test_every_known_tool_yields_a_canonical_name_first() -> None:
    from guard.analysis import tables

    for dialect, table in tables().items():
        for name in table:
            try:
                effects = effects_for(dialect, name, {}, None)
            except ToolInputError:
                continue
            assert effects[0].kind is EffectKind.TOOL
            assert effects[0].target in CANONICAL_TOOLS, (dialect, name)


def test_unknown_tools_are_lowercased_and_never_borrow_a_known_name() -> None:
    """Attack: a tool named like a known one in another case ('write', 'READ')."""
    assert fx("claude-code", "SomeNewTool", {}) == [("tool", "somenewtool")]
    # the input still counts: a path field is taken as a write (see guess_effects)
    assert fx("claude-code", "write", {"file_path": "a"}) == [("tool", "unknown:write"),
                                                               ("write", "a")]
    assert fx("opencode", "Read", {"filePath": "a"}) == [("tool", "unknown:Read"), ("write", "a")]
    assert fx("codex", "Task:x", {}) == [("tool", "unknown:Task:x")]


@pytest.mark.parametrize(
    ("dialect", "tool", "data", "message"),
    [
        ("claude-code", "Read", {}, "missing field 'file_path'"),
        ("claude-code", "Write", {"file_path": 3}, "field 'file_path' must be a string"),
        ("claude-code", "Write", {"file_path": ""}, "field 'file_path' is empty"),
        ("claude-code", "Bash", {"command": ["ls"]}, None),
        ("claude-code", "Bash", {"command": 1}, "field 'command' must be a command string"),
        ("claude-code", "MultiEdit", {"file_path": "a", "edits": "x"}, "must be a list of edits"),
        ("claude-code", "Task", {"subagent_type": 5}, "must be a non-empty string"),
        ("codex", "shell", {"command": []}, "non-empty list of strings"),
        ("codex", "apply_patch", {}, "missing field 'command' or 'input' or 'patch'"),
        ("mcp", "read_multiple_files", {"paths": "a"}, "must be a list of paths"),
        ("mcp", "move_file", {"source": "a"}, "missing field 'destination'"),
        ("gemini", "read_many_files", {"paths": [1]}, "must be a list of paths"),
    ],
)
def test_malformed_input_names_the_field(
    dialect: str, tool: str, data: dict[str, Any], message: str | None
) -> None:
    if message is None:  # an argv list is fine for Bash too
        assert effects_for(dialect, tool, data, None)[0].target == "bash"
        return
    with pytest.raises(ToolInputError, match=message):
        effects_for(dialect, tool, data, None)


def test_unknown_dialect_lists_the_known_ones() -> None:
    with pytest.raises(ToolInputError, match="expected one of: claude-code, codex"):
        effects_for("cursor", "Read", {}, None)


def test_input_must_be_an_object() -> None:
    with pytest.raises(ToolInputError, match="must be a JSON object"):
        effects_for("claude-code", "Read", ["a"], None)  # type: ignore[arg-type]


def test_relative_paths_and_tilde_stay_for_the_evaluator() -> None:
    assert fx("claude-code", "Write", {"file_path": "../x"}) == [
        ("tool", "write"),
        ("write", "../x"),
    ]
    assert fx("claude-code", "Write", {"file_path": "~/x"}) == [("tool", "write"), ("write", "~/x")]


def test_shared_shell_tool_effect_is_per_dialect_and_tool_name() -> None:
    """Attack: the shell tool's first effect is shared between calls (one object per
    dialect and tool name); a call must never get the effect built for another tool or
    dialect, including after the bounded table is emptied."""
    from guard.analysis._common import shell_tool
    from guard.effects import ToolCall

    handler = shell_tool("bash", ("command",))
    for k in range(200):  # more names than the table keeps: it is emptied on the way
        for dialect, name in (("claude-code", "Bash"), ("codex", f"shell{k % 70}")):
            first = handler(ToolCall(dialect, name, {"command": "ls"}, "/w"))[0]
            assert (first.kind, first.target, first.detail) == (
                EffectKind.TOOL, "bash", f"{dialect} {name}")
    bash = effects_for("claude-code", "Bash", {"command": "ls"}, "/w")[0]
    assert (bash.target, bash.detail) == ("bash", "claude-code Bash")
