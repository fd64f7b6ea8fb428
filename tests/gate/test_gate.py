"""The gate itself: agent choice, fail closed anywhere in the pipeline, the confiner seam,
and how each host renders a verdict (allow_confined included)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from guard.audit import AuditError
from guard.audit.sinks import MemorySink
from guard.decide import Guard
from guard.effects import Effect, ToolCall
from guard.gate import Confinement, Gate, ModeHint, Verdict, VerdictAction
from guard.hooks.front_door import adapter_for
from guard.hooks.front_door import decide as hook_decide
from guard.paths import Roots
from guard.planning.found import ModeFound


def write_call(repo: Path, path: str = "src/app.py") -> ToolCall:
    tool_input = {"file_path": str(repo / path), "content": "x"}
    return ToolCall("claude-code", "Write", tool_input, str(repo))


def bash_call(repo: Path, command: str = "rm -rf src") -> ToolCall:
    return ToolCall(
        "claude-code", "Bash", {"command": command, "description": "clean up"}, str(repo)
    )


@dataclass(frozen=True)
class SessionGate(Gate):
    """A gate whose deciding session is in guard mode ``said`` (None: no session)."""

    said: str | None = None

    def session_mode(self, call: ToolCall, effects: Sequence[Effect]) -> ModeFound | None:
        if self.said is None:
            return None
        return ModeFound(self.said, f"guard mode {self.said!r} of this worktree")


# -- agent choice ------------------------------------------------------------------------


def test_agent_choice_precedence(repo: Path) -> None:
    g = Guard.load(cwd=repo)
    call = write_call(repo)
    hint = ModeHint("plan", "Host permission_mode 'plan'")
    cases: list[tuple[Gate, str, str]] = [
        (SessionGate(guard=g, agent="build", env={"GUARD_AGENT": "plan"}, said="plan"), "build",
         "--agent"),
        (SessionGate(guard=g, env={"GUARD_AGENT": "build"}, said="plan"), "build",
         "$GUARD_AGENT"),
        (SessionGate(guard=g, env={}, said="plan"), "plan", "guard mode 'plan' of this worktree"),
        (SessionGate(guard=g, env={}), "plan", "Host permission_mode 'plan'"),
    ]
    for gate, agent, why in cases:
        v = gate.decide(call, hint=hint)
        assert (v.agent, v.agent_from) == (agent, why)
        assert v.action is (VerdictAction.DENY if agent == "plan" else VerdictAction.ALLOW)
    v = SessionGate(guard=g, env={}).decide(call)
    assert (v.agent, v.action) == ("build", VerdictAction.ALLOW)


def test_the_sessions_are_asked_only_when_neither_agent_nor_env_decides(repo: Path) -> None:
    """The session's mode is read only when it can choose the agent: a gate whose session
    lookup fails decides with --agent or $GUARD_AGENT as if it had none, and fails closed
    only when the session is the one to decide."""
    g = Guard.load(cwd=repo)
    call = write_call(repo)
    by_flag = _BadSessionGate(guard=g, agent="build", env={}).decide(call)
    by_env = _BadSessionGate(guard=g, env={"GUARD_AGENT": "build"}).decide(call)
    assert (by_flag.action, by_flag.agent_from) == (VerdictAction.ALLOW, "--agent"), by_flag
    assert (by_env.action, by_env.agent_from) == (VerdictAction.ALLOW, "$GUARD_AGENT"), by_env
    asked = _BadSessionGate(guard=g, env={}).decide(call)
    assert asked.action is VerdictAction.DENY and asked.failed, asked
    assert "OSError: session file unreadable" in asked.reason


def test_a_gate_without_sessions_ignores_an_open_plan_session(repo: Path) -> None:
    """The live gate follows the worktree's plan session; one built with sessions=False
    (replay, review: a past call is not decided by today's session) does not."""
    from guard.planning import Session

    Session.start(repo, "plan", title="x")
    g = Guard.load(cwd=repo)
    live = Gate(guard=g, env={}).decide(write_call(repo))
    assert (live.agent, live.action) == ("plan", VerdictAction.DENY), live
    assert "plan" in live.agent_from and "mode" in live.agent_from, live.agent_from
    offline = Gate(guard=g, env={}, sessions=False).decide(write_call(repo))
    assert (offline.agent, offline.agent_from) == ("build", "no mode given: build"), offline


def test_a_mode_picks_the_agent_declared_with_it_not_one_named_after_it(repo: Path) -> None:
    """Plan mode is a mode, not a name: the session's plan mode is decided by the agent the
    policy declares ``mode = "plan"`` (here named ``careful``), not by one named after the
    mode; an agent named ``plan`` declared a build agent is refused when the policy loads
    (tests/fleet/test_managed.py runs that attack against the managed layer)."""
    policy = repo / ".openoxide" / "policy.toml"
    policy.write_text(
        'version = 1\n[agents.careful]\nmode = "plan"\ndefault = "deny"\n'
        '[agents.build]\nmode = "plan"\ndefault = "deny"\n'
        '[agents.work]\nmode = "build"\ndefault = "allow"\n'
    )
    g = Guard.load(cwd=repo)
    planned = SessionGate(guard=g, env={}, said="plan").decide(write_call(repo))
    assert (planned.agent, planned.action) == ("careful", VerdictAction.DENY), planned
    built = SessionGate(guard=g, env={}, said="build").decide(write_call(repo))
    assert (built.agent, built.action) == ("work", VerdictAction.ALLOW), built
    policy.write_text('version = 1\n[agents.plan]\nmode = "build"\ndefault = "allow"\n')
    refused = SessionGate(env={}, said="plan").decide(write_call(repo))
    assert refused.action is VerdictAction.DENY and refused.failed, refused
    assert "agents.plan.mode: the agent named plan is declared mode = 'build'" in refused.reason


# -- fail closed -------------------------------------------------------------------------


@dataclass(frozen=True)
class _BadAnalysisGate(Gate):
    def effects(self, call: ToolCall) -> list[Effect]:
        raise RuntimeError("analyser on fire")


@dataclass(frozen=True)
class _BadSessionGate(Gate):
    def session_mode(self, call: ToolCall, effects: Sequence[Effect]) -> ModeFound | None:
        raise OSError("session file unreadable")


class _BadConfiner:
    def confine(self, verdict: Verdict, guard: Guard) -> Confinement | None:
        raise ValueError("confiner broke")


class _BadSink:
    def write(self, record: Mapping[str, Any], roots: Roots | None = None) -> None:
        raise AuditError("disk full")


def test_a_refusal_says_what_the_analysis_saw_so_the_model_can_take_the_read_only_form(
    repo: Path,
) -> None:
    """`git status` rewrites .git/index (its stat cache), so plan mode refuses it; the
    reason the model reads names why and the form that only reads, which is allowed."""
    gate = SessionGate(guard=Guard.load(cwd=repo), agent="plan", env={})
    refused = gate.decide(bash_call(repo, "git status"))
    assert refused.action is VerdictAction.DENY
    assert "`git --no-optional-locks status` only reads" in refused.reason, refused.reason
    allowed = gate.decide(bash_call(repo, "git --no-optional-locks status"))
    assert allowed.action is VerdictAction.ALLOW, allowed.reason


@pytest.mark.parametrize(
    ("kind", "gate_args", "reason"),
    [
        (_BadAnalysisGate, {}, "RuntimeError: analyser on fire"),
        (_BadSessionGate, {}, "OSError: session file unreadable"),
        (Gate, {"policy": "/nonexistent/policy.toml", "guard": None}, "does not exist"),
        (Gate, {"agent": "nobody"}, "--agent names agent 'nobody'"),
        (Gate, {"agent": "plan", "confiner": _BadConfiner()}, "ValueError: confiner broke"),
    ],
)
def test_an_exception_anywhere_is_a_deny_whose_reason_is_the_error(
    repo: Path, kind: type[Gate], gate_args: dict[str, Any], reason: str
) -> None:
    sink = MemorySink()
    args: dict[str, Any] = {"guard": Guard.load(cwd=repo), "env": {}, "sink": sink, **gate_args}
    # a call the build agent would allow: only the failure can make it a deny
    gate = kind(**args)
    v = gate.record(gate.decide(write_call(repo)))
    assert v.action is VerdictAction.DENY and v.failed
    assert reason in v.reason
    [record] = sink.records
    assert record["decision"] == "deny" and reason in record["reason"]
    assert record["tool_name"] == "Write"


def test_a_verdict_the_sink_cannot_record_is_a_deny(repo: Path) -> None:
    gate = Gate(guard=Guard.load(cwd=repo), agent="build", env={}, sink=_BadSink())
    v = gate.decide(write_call(repo))
    assert v.action is VerdictAction.ALLOW  # deciding writes nothing
    v = gate.record(v)
    assert v.action is VerdictAction.DENY and v.failed
    assert "the audit log could not record the verdict: disk full" in v.reason


def test_deciding_writes_nothing_and_recording_writes_one_record(repo: Path) -> None:
    """The gate decides without writing; the front door records what it answers, once."""
    sink = MemorySink()
    gate = Gate(guard=Guard.load(cwd=repo), agent="plan", env={}, sink=sink, source="test")
    v = gate.decide(write_call(repo))
    assert v.action is VerdictAction.DENY and sink.records == []
    assert gate.record(v, {"host": "x"}, answered=lambda _: "block") == v
    [record] = sink.records
    assert (record["type"], record["source"], record["host"]) == ("verdict", "test", "x")
    assert (record["decision"], record["answered"], record["agent"]) == ("deny", "block", "plan")


def test_malformed_input_is_a_deny_naming_the_field(repo: Path) -> None:
    gate = Gate(guard=Guard.load(cwd=repo), agent="build", env={})
    v = gate.decide(ToolCall("claude-code", "Write", {"file_path": 7}, str(repo)))
    assert v.action is VerdictAction.DENY and "field 'file_path' must be a string" in v.reason


def test_a_dialect_bug_blocks_the_hook_with_the_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack surface: a handler that crashes must not let the host run the call."""
    from guard.hosts.claude_code import tool_table as claude_code

    def broken(call: ToolCall) -> list[Effect]:
        raise KeyError("handler bug")

    monkeypatch.setitem(claude_code.TOOLS, "Write", broken)
    payload = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(repo / "src/app.py"), "content": "x"},
        "cwd": str(repo),
    }
    answer = hook_decide("claude-code", json.dumps(payload), agent="build", env={})
    assert answer.exit_code == 2
    assert "KeyError: 'handler bug'" in answer.stderr


# -- the confiner seam -------------------------------------------------------------------


class _Wrap:
    """A confiner as the sandbox layer will provide: wraps the shell command."""

    def __init__(self) -> None:
        self.asked: list[Verdict] = []

    def confine(self, verdict: Verdict, guard: Guard) -> Confinement | None:
        self.asked.append(verdict)
        call = verdict.call
        if call is None or call.name != "Bash":
            return None
        return Confinement({"command": f"confined -- {call.input['command']}"}, "runs confined")


def test_a_confiner_turns_a_refused_plan_shell_call_into_allow_confined(repo: Path) -> None:
    confiner, sink = _Wrap(), MemorySink()
    g = Guard.load(cwd=repo)
    plan = Gate(guard=g, agent="plan", env={}, confiner=confiner, sink=sink, source="test")
    v = plan.record(plan.decide(bash_call(repo)))
    assert v.action is VerdictAction.ALLOW_CONFINED and v.allowed
    assert v.updated_input == {"command": "confined -- rm -rf src"}
    assert v.decision is not None and v.decision.action.value == "deny"
    assert sink.records[0]["decision"] == "allow_confined"
    assert sink.records[0]["policy_decision"] == "deny"
    # a refused call that is not a shell command: the confiner says no, the deny stands
    assert plan.decide(write_call(repo)).action is VerdictAction.DENY
    # allowed plan-mode calls are offered too (analysis is never the last line: an allowed
    # shell command may still run confined); a call the confiner leaves stays allowed
    asked = len(confiner.asked)
    assert plan.decide(write_call(repo, ".openoxide/plans/p.md")).action is VerdictAction.ALLOW
    assert len(confiner.asked) == asked + 1
    # build agents are never offered to the confiner
    build = Gate(guard=g, agent="build", env={}, confiner=confiner)
    assert build.decide(bash_call(repo, "rm -rf /etc")).action is not VerdictAction.ALLOW_CONFINED
    assert len(confiner.asked) == asked + 1


class _Require:
    """A confiner whose policy requires a confinement the kernel cannot give here."""

    def confine(self, verdict: Verdict, guard: Guard) -> Confinement | None:
        return Confinement(None, "the network wall is missing here", "guard.sandbox-require")


def test_a_confiner_may_refuse_a_call_it_cannot_confine_as_required(repo: Path) -> None:
    """A Confinement without an input to run is a deny with its reason (the policy's
    `require` where the kernel cannot give the walls), even for a call the policy allows."""
    sink = MemorySink()
    g = Guard.load(cwd=repo)
    plan = Gate(guard=g, agent="plan", env={}, confiner=_Require(), sink=sink, source="test")
    v = plan.record(plan.decide(bash_call(repo, "cat src/app.py")))
    assert v.action is VerdictAction.DENY and not v.allowed
    assert (v.reason, v.rule) == ("the network wall is missing here", "guard.sandbox-require")
    assert v.updated_input is None
    assert sink.records[0]["decision"] == "deny"


# -- rendering a verdict for each host ---------------------------------------------------


def confined_verdict(call: ToolCall) -> Verdict:
    return Verdict(
        VerdictAction.ALLOW_CONFINED,
        "the command runs confined to the plan directory",
        "guard.confined",
        call,
        "plan",
        updated_input={"command": "guard-confine -- rm -rf src"},
    )


def test_claude_code_runs_the_rewritten_command(repo: Path) -> None:
    adapter = adapter_for("claude-code")
    hook = adapter.parse(
        {
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf src", "description": "clean up", "timeout": 5},
            "cwd": str(repo),
        }
    )
    answer = adapter.answer(confined_verdict(hook.call), hook)
    assert answer.exit_code == 0
    out = json.loads(answer.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow"
    assert out["updatedInput"] == {
        "command": "guard-confine -- rm -rf src",
        "description": "clean up",
        "timeout": 5,
    }


def test_gemini_runs_the_rewritten_command(repo: Path) -> None:
    adapter = adapter_for("gemini")
    hook = adapter.parse(
        {
            "hook_event_name": "BeforeTool",
            "tool_name": "run_shell_command",
            "tool_input": {"command": "rm -rf src", "description": "clean up"},
            "cwd": str(repo),
        }
    )
    out = json.loads(adapter.answer(confined_verdict(hook.call), hook).stdout)
    assert out["decision"] == "allow"
    assert out["hookSpecificOutput"] == {
        "hookEventName": "BeforeTool",
        "tool_input": {"command": "guard-confine -- rm -rf src", "description": "clean up"},
    }


def test_codex_and_cursor_cannot_rewrite_so_confined_is_a_deny(repo: Path) -> None:
    codex = adapter_for("codex")
    hook = codex.parse(
        {
            "hook_event_name": "PreToolUse",
            "tool_name": "shell",
            "tool_input": {"command": "rm -rf src"},
            "cwd": str(repo),
        }
    )
    out = json.loads(codex.answer(confined_verdict(hook.call), hook).stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "cannot rewrite" in out["permissionDecisionReason"]
    assert "guard run" in out["permissionDecisionReason"]
    assert "updatedInput" not in out

    cursor = adapter_for("cursor")
    hook = cursor.parse(
        {
            "hook_event_name": "beforeShellExecution",
            "command": "rm -rf src",
            "cwd": str(repo),
            "workspace_roots": [str(repo)],
        }
    )
    assert (hook.call.dialect, hook.call.name) == ("claude-code", "Bash")
    out = json.loads(cursor.answer(confined_verdict(hook.call), hook).stdout)
    assert out["permission"] == "deny" and "guard run" in out["agent_message"]
    assert cursor.answered(confined_verdict(hook.call), hook) == "deny"


def test_the_hook_record_keeps_host_specific_fields(repo: Path) -> None:
    """A subagent's call is recorded with Claude Code's agent_id/agent_type."""
    sink = MemorySink()
    adapter = adapter_for("claude-code")
    hook = adapter.parse(
        {
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(repo / "src/app.py"), "content": "x"},
            "cwd": str(repo),
            "agent_id": "a-7",
            "agent_type": "Explore",
        }
    )
    gate = Gate(guard=Guard.load(cwd=repo), agent="plan", env={}, sink=sink, source="hook")
    gate.record(gate.decide(hook.call), hook.to_json())
    [record] = sink.records
    assert (record["agent_id"], record["agent_type"]) == ("a-7", "Explore")
    assert record["agent"] == "plan" and record["decision"] == "deny"
