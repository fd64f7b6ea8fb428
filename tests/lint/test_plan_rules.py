"""Plan-mode isolation rules, each named after the weakening it catches."""

from __future__ import annotations

from pathlib import Path

from .helpers import codes, lint_text

PLAN_OK = """
version = 1
[agents.plan]
mode = "plan"
default = "deny"
subagents = ["explore"]
[agents.plan.tools]
read = "allow"
bash = "allow"
write = "allow"
edit = "allow"
update_plan = "deny"
todowrite = "deny"
"*" = "deny"
[agents.plan.read]
allow = ["**"]
[agents.plan.write]
allow = ["{plans}/*.md"]
default = "deny"
[agents.plan.delete]
allow = ["{plans}/*.md"]
default = "deny"
[agents.build]
mode = "build"
default = "ask"
[agents.build.tools]
request_user_input = "deny"
"*" = "allow"
"""


def _with(extra_plan_write: str = "", replace: tuple[str, str] | None = None) -> str:
    text = PLAN_OK
    if replace:
        assert replace[0] in text
        text = text.replace(*replace)
    return text + extra_plan_write


def test_confined_plan_agent_with_write_tools_is_clean(tmp_path: Path) -> None:
    """bash/write/edit allowed in plan mode are fine when paths confine writes."""
    assert lint_text(tmp_path, PLAN_OK) == []


def test_write_rule_outside_plans_is_caught(tmp_path: Path) -> None:
    """Attack: a plan policy quietly allows writes to notes/ next to the plan file."""
    found = lint_text(
        tmp_path,
        _with(replace=('allow = ["{plans}/*.md"]\ndefault = "deny"\n[agents.plan.delete]',
                       'allow = ["{plans}/*.md", "notes/**"]\ndefault = "deny"\n'
                       "[agents.plan.delete]")),
    )
    gl201 = [f for f in found if f.code == "GL201"]
    assert gl201 and "notes/" in gl201[0].message and gl201[0].line == 18
    assert "GL202" in codes(found)  # bash, write and edit are no longer confined


def test_write_default_ask_is_caught(tmp_path: Path) -> None:
    """Attack: write default 'ask' lets a plan agent ask its way into any file."""
    found = lint_text(
        tmp_path, _with(replace=('{plans}/*.md"]\ndefault = "deny"\n[agents.plan.delete]',
                                 '{plans}/*.md"]\ndefault = "ask"\n[agents.plan.delete]'))
    )
    msgs = [f.message for f in found if f.code == "GL201"]
    assert any("write.default is ask" in m for m in msgs), msgs


def test_delete_inherits_permissive_agent_default(tmp_path: Path) -> None:
    """Attack: no delete rules and agent default 'allow': deletes go anywhere."""
    text = PLAN_OK.replace('mode = "plan"\ndefault = "deny"', 'mode = "plan"\ndefault = "allow"')
    text = text.replace('[agents.plan.delete]\nallow = ["{plans}/*.md"]\ndefault = "deny"\n', "")
    found = lint_text(tmp_path, text)
    assert any(f.code == "GL201" and "delete" in f.message for f in found)


def test_markdown_everywhere_exception_is_too_broad(tmp_path: Path) -> None:
    """Attack: `**/*.md` covers the plan file but also README.md and docs."""
    found = lint_text(tmp_path, _with(replace=('allow = ["{plans}/*.md"]\ndefault = "deny"\n'
                                               "[agents.plan.delete]",
                                               'allow = ["**/*.md"]\ndefault = "deny"\n'
                                               "[agents.plan.delete]")))
    assert "GL204" in codes(found)
    assert not [f for f in found if f.code == "GL201" and "'**/*.md'" in f.message]


def test_openoxide_exception_is_too_broad_even_with_protection(tmp_path: Path) -> None:
    """Attack: `.openoxide/**` reaches beyond plans (protected paths catch policy.toml,
    but not other names in .openoxide/plans/sub/)."""
    found = lint_text(tmp_path, _with(replace=('allow = ["{plans}/*.md"]\ndefault = "deny"\n'
                                               "[agents.plan.delete]",
                                               'allow = [".openoxide/**"]\ndefault = "deny"\n'
                                               "[agents.plan.delete]")))
    assert "GL204" in codes(found)


def test_deny_exception_broader_than_plans_is_caught(tmp_path: Path) -> None:
    """Attack: deny everything except `.openoxide/plans/**`, with default allow."""
    text = PLAN_OK.replace(
        'allow = ["{plans}/*.md"]\ndefault = "deny"\n[agents.plan.delete]',
        'deny = ["**", "!{plans}/**"]\ndefault = "allow"\n[agents.plan.delete]',
    )
    found = lint_text(tmp_path, text)
    assert "GL204" in codes(found)


def test_star_tool_allow_lets_mcp_tools_through(tmp_path: Path) -> None:
    """Attack: `"*" = "allow"` admits MCP tools whose writes carry no path effects."""
    found = lint_text(tmp_path, PLAN_OK.replace('"*" = "deny"', '"*" = "allow"', 1))
    assert any(f.code == "GL202" and "MCP" in f.message for f in found)


def test_mcp_wildcard_entry_is_caught(tmp_path: Path) -> None:
    found = lint_text(tmp_path, PLAN_OK.replace('"*" = "deny"', '"mcp__*" = "allow"\n"*" = "deny"',
                                                1))
    assert any(f.code == "GL202" and "mcp__*" in f.message for f in found)


def test_subagent_naming_build_agent_is_caught(tmp_path: Path) -> None:
    """Attack: the plan agent delegates to the build agent."""
    found = lint_text(tmp_path, PLAN_OK.replace('subagents = ["explore"]',
                                                'subagents = ["explore", "build"]'))
    assert [f.line for f in found if f.code == "GL203"] == [6]


def test_subagent_wildcard_is_caught(tmp_path: Path) -> None:
    found = lint_text(tmp_path, PLAN_OK.replace('subagents = ["explore"]', 'subagents = ["*"]'))
    assert "GL203" in codes(found)


def test_protected_false_is_caught(tmp_path: Path) -> None:
    """Attack: protection off lets an allowed write rewrite git hooks and the policy."""
    text = PLAN_OK.replace('subagents = ["explore"]', 'subagents = ["explore"]\nprotected = false')
    found = lint_text(tmp_path, text)
    assert [f.code for f in found] == ["GL207"]


def test_update_plan_through_star_is_caught(tmp_path: Path) -> None:
    """update_plan reaches a plan agent through `"*"` even with no entry of its own."""
    text = PLAN_OK.replace('update_plan = "deny"\n', "").replace('"*" = "deny"', '"*" = "ask"', 1)
    found = lint_text(tmp_path, text)
    assert any(f.code == "GL205" and "update_plan" in f.message for f in found)


def test_build_agent_request_user_input_through_star(tmp_path: Path) -> None:
    found = lint_text(tmp_path, PLAN_OK.replace('request_user_input = "deny"\n', ""))
    assert codes(found) == {"GL206"}


def test_task_allowed_without_subagents_list_reaches_build(tmp_path: Path) -> None:
    """Attack: no subagents list and `task = "allow"`: the plan agent can start `build`."""
    text = PLAN_OK.replace('subagents = ["explore"]\n', "").replace(
        'read = "allow"\nbash', 'read = "allow"\ntask = "allow"\nbash', 1
    )
    found = [f for f in lint_text(tmp_path, text) if f.code == "GL203"]
    assert found and "no subagents list" in found[0].message


def test_task_denied_without_subagents_list_is_clean(tmp_path: Path) -> None:
    text = PLAN_OK.replace('subagents = ["explore"]\n', "")
    assert "GL203" not in codes(lint_text(tmp_path, text))


def test_a_socket_a_plan_agent_may_reach_is_a_warning_with_its_line(tmp_path: Path) -> None:
    """Attack: the plan agent lists the docker socket; docker mounts the worktree and
    writes it for a confined command."""
    text = PLAN_OK.replace(
        'subagents = ["explore"]',
        'subagents = ["explore"]\n[agents.plan.sandbox]\nsockets = ["//var/run/docker.sock"]',
    )
    found = [f for f in lint_text(tmp_path, text) if f.code == "GL209"]
    assert len(found) == 1 and "docker.sock" in found[0].message
    assert text.splitlines()[found[0].line - 1].startswith("sockets")
