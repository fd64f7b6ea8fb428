"""A host that runs a tool without guard's pre-tool decision: hook_missed, the hold, resume.

The attack these pin: the host could not start guard's PreToolUse hook (a lowered
process or file limit), so a Write ran with no decision. guard sees the result
(PostToolUse, or the host's transcript at the next hook call), records it, and in
plan mode refuses the session's every further call until the user resumes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.audit.logfile import default_log_path, read
from guard.paths import Roots

from .conftest import HookRunner
from .payloads import answer_of, claude_payload

SESSION = "0b7c6f2e-0000-4000-8000-000000000001"


def post(payload: dict[str, Any], response: Any = None) -> dict[str, Any]:
    return {**payload, "hook_event_name": "PostToolUse", "tool_response": response or {}}


def records(repo: Path, kind: str) -> list[dict[str, Any]]:
    log = default_log_path(Roots.discover(str(repo)))
    if not log.exists():
        return []
    return [r for r in read(log) if r.get("type") == kind]


def guard_cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120, check=False)


def pre_decision(proc: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    out = answer_of(proc)["hookSpecificOutput"]
    return str(out["permissionDecision"]), str(out["permissionDecisionReason"])


def test_a_decided_call_is_not_missed(repo: Path, decide_hook: HookRunner) -> None:
    p = claude_payload("Write", {"file_path": str(repo / "src/new.py"), "content": "x"}, repo)
    assert pre_decision(decide_hook("claude-code", p, "--agent", "build"))[0] == "allow"
    (repo / "src/new.py").write_text("x")
    answer = decide_hook("claude-code", post(p), "--agent", "build")
    assert answer.returncode == 0 and answer.stdout == "", answer
    assert records(repo, "violation") == []


def test_a_digest_match_stands_in_for_a_missing_tool_use_id(
    repo: Path, decide_hook: HookRunner
) -> None:
    p = claude_payload("Write", {"file_path": str(repo / "src/new.py"), "content": "x"}, repo)
    del p["tool_use_id"]
    assert pre_decision(decide_hook("claude-code", p, "--agent", "build"))[0] == "allow"
    assert decide_hook("claude-code", post(p), "--agent", "build").stdout == ""
    changed = post({**p, "tool_input": {"file_path": str(repo / "src/new.py"), "content": "y"}})
    assert "hook_missed" in decide_hook("claude-code", changed, "--agent", "build").stdout


def test_build_mode_missed_write_is_recorded_and_told(repo: Path, decide_hook: HookRunner) -> None:
    """Attack: the Write ran with no PreToolUse decision (the hook could not start)."""
    p = claude_payload("Write", {"file_path": str(repo / "src/app.py"), "content": "owned"},
                       repo)
    (repo / "src/app.py").write_text("owned")
    answer = answer_of(decide_hook("claude-code", post(p), "--agent", "build"))
    assert answer["decision"] == "block" and "hook_missed" in answer["reason"]
    assert answer["systemMessage"] == answer["reason"]
    [v] = records(repo, "violation")
    assert v["kind"] == "hook_missed" and v["tool_use_id"] == "toolu_01ABC"
    assert v["session_id"] == SESSION and v["held"] is False
    # build mode is not held: the next call is decided as usual
    nxt = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    assert pre_decision(decide_hook("claude-code", nxt, "--agent", "build"))[0] == "allow"


def test_plan_mode_missed_write_holds_the_session_until_resume(
    repo: Path, decide_hook: HookRunner, env: dict[str, str]
) -> None:
    """Attack: in plan mode, a Write lands with no decision; guard must not carry on."""
    assert guard_cli("plan", "start", "x", cwd=repo, env=env).returncode == 0
    read_call = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    assert pre_decision(decide_hook("claude-code", read_call))[0] == "allow"  # the start is kept
    p = claude_payload("Write", {"file_path": str(repo / "src/app.py"), "content": "owned\n"},
                       repo)
    p["tool_use_id"] = "toolu_unguarded"
    (repo / "src/app.py").write_text("owned\n")  # what the host did without asking guard
    answer = answer_of(decide_hook("claude-code", post(p)))
    assert "plan mode holds session" in answer["reason"]
    assert "src/app.py (modified)" in answer["reason"]
    [v] = records(repo, "violation")
    assert v["held"] is True and v["mode"] == "plan"
    assert v["landed"]["paths"] == [{"path": "src/app.py", "change": "modified"}]
    # every further call of that session is refused, even a read
    decision, reason = pre_decision(decide_hook("claude-code", read_call))
    assert decision == "deny" and "guard session resume" in reason
    denied = [r for r in records(repo, "verdict") if r.get("rule") == "guard.hook_missed"]
    assert denied and denied[-1]["decision"] == "deny"
    # another host session is not held
    other = {**read_call, "session_id": "another"}
    assert pre_decision(decide_hook("claude-code", other))[0] == "allow"
    # guard doctor shows it (and exits 1: that session's every call is blocked)
    doctor = guard_cli("doctor", "--json", cwd=repo, env=env)
    assert doctor.returncode == 1
    [held] = [c for c in json.loads(doctor.stdout)["layers"] if c["name"] == "held sessions"]
    assert held["status"] == "broken" and held["held"][0]["session_id"] == SESSION
    # the user looks, undoes what landed, and resumes
    out = guard_cli("session", "resume", "--restore", cwd=repo, env=env)
    assert out.returncode == 0, out.stderr
    assert "src/app.py: quarantined" in out.stdout and "put back" in out.stdout
    assert (repo / "src/app.py").read_text() == "print('hello')\n"
    kept = list((repo / ".openoxide/quarantine").rglob("app.py"))
    assert [k.read_text() for k in kept] == ["owned\n"]
    assert pre_decision(decide_hook("claude-code", read_call))[0] == "allow"
    [held] = [c for c in json.loads(guard_cli("doctor", "--json", cwd=repo, env=env).stdout)[
        "layers"] if c["name"] == "held sessions"]
    assert held["status"] == "ok"
    assert [r["event"] for r in records(repo, "notice") if r.get("event")] == [
        "hook_missed_resumed"]


def test_transcript_shows_a_result_guard_never_decided(
    repo: Path, decide_hook: HookRunner, env: dict[str, str]
) -> None:
    """Attack: neither PreToolUse nor PostToolUse could start; the next hook call sees the
    Write's result in Claude Code's transcript."""
    assert guard_cli("plan", "start", "x", cwd=repo, env=env).returncode == 0
    transcript = repo.parent / "t.jsonl"
    transcript.write_text("")
    read_call = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    read_call["transcript_path"] = str(transcript)
    assert pre_decision(decide_hook("claude-code", read_call))[0] == "allow"
    use = {"type": "tool_use", "id": "toolu_w", "name": "Write",
           "input": {"file_path": str(repo / "src/app.py"), "content": "owned"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_w", "content": "ok"}
    with transcript.open("a") as f:
        f.write(json.dumps({"type": "assistant", "message": {"content": [use]}}) + "\n")
        f.write(json.dumps({"type": "user", "message": {"content": [result]}}) + "\n")
    (repo / "src/app.py").write_text("owned")
    nxt = {**read_call, "tool_use_id": "toolu_r2"}
    decision, reason = pre_decision(decide_hook("claude-code", nxt))
    assert decision == "deny" and "Write toolu_w" in reason and "src/app.py" in reason
    [v] = records(repo, "violation")
    assert v["via"] == "transcript" and v["tool_use_id"] == "toolu_w"


@pytest.mark.parametrize("host", ["codex", "gemini"])
def test_other_hosts_post_tool_event_is_checked(
    host: str, repo: Path, decide_hook: HookRunner
) -> None:
    event = {"codex": "PostToolUse", "gemini": "AfterTool"}[host]
    tool, given = {"codex": ("Bash", {"command": "echo x > src/a"}),
                   "gemini": ("write_file", {"file_path": "src/a", "content": "x"})}[host]
    payload = {"session_id": "s-1", "cwd": str(repo), "hook_event_name": event,
               "tool_name": tool, "tool_input": given}
    answer = answer_of(decide_hook(host, payload, "--agent", "build"))
    assert "hook_missed" in answer["hookSpecificOutput"]["additionalContext"]
    assert [v["host"] for v in records(repo, "violation")] == [host]


def test_installed_hook_sets_carry_the_post_tool_event(repo: Path, env: dict[str, str]) -> None:
    from guard.setup.install import hook_command

    expected = {"claude-code": (".claude/settings.json", "PostToolUse"),
                "codex": (".codex/hooks.json", "PostToolUse"),
                "gemini": (".gemini/settings.json", "AfterTool")}
    for host, (rel, event) in expected.items():
        assert guard_cli("install", host, "--project", cwd=repo,
                         env={**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}).returncode == 0
        data = json.loads((repo / rel).read_text())
        commands = [h["command"] for g in data["hooks"][event] for h in g["hooks"]]
        assert hook_command(host) in commands, (host, data["hooks"])
        assert guard_cli("uninstall", host, "--project", cwd=repo, env=env).returncode == 0
        data = json.loads((repo / rel).read_text()) if (repo / rel).exists() else {}
        assert event not in data.get("hooks", {}), (host, data)


AFTER_DRIVER = """
import { pathToFileURL } from "node:url";
const [plugin, call] = process.argv.slice(2);
const mod = await import(pathToFileURL(plugin).href);
const hooks = await mod.OpenOxideGuard({ directory: process.cwd() });
const c = JSON.parse(call);
const output = { title: "", output: "written", metadata: {} };
await hooks["tool.execute.after"]({ tool: c.tool, sessionID: "ses_1", callID: c.id,
                                    args: c.args }, output);
console.log(JSON.stringify(output));
"""


def test_opencode_plugin_reports_a_call_guard_never_saw(repo: Path, env: dict[str, str]) -> None:
    """Attack: OpenCode ran a write whose tool.execute.before never reached guard."""
    import shutil

    node = shutil.which("node")
    assert node is not None, "node is required (scripts/test.sh installs it)"
    assert guard_cli("install", "opencode", cwd=repo, env=env).returncode == 0
    plugin = repo / ".opencode/plugin/guard.js"
    driver = repo.parent / "after.mjs"
    driver.write_text(AFTER_DRIVER)
    call = {"tool": "write", "id": "call_9", "args": {"filePath": "src/app.py", "content": "x"}}
    proc = subprocess.run([node, str(driver), str(plugin), json.dumps(call)], cwd=repo,
                          env={**env, "GUARD_AGENT": "build"}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["output"].startswith("written\n\nguard: ") and "hook_missed" in out["output"]
    assert "hook_missed" in proc.stderr  # the user sees it too
    [v] = records(repo, "violation")
    assert (v["host"], v["tool_use_id"], v["via"]) == ("opencode", "call_9", "tool.execute.after")


def test_a_decision_recorded_in_another_projects_log_counts(
    repo: Path, decide_hook: HookRunner, tmp_path: Path
) -> None:
    """No false hold: the model `cd`ed into another repository, so the PreToolUse record went
    to that project's log; the result comes back from this one."""
    other = tmp_path / "other"
    (other / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    p = claude_payload("Write", {"file_path": str(other / "src/x.py"), "content": "x"}, other)
    assert pre_decision(decide_hook("claude-code", p, "--agent", "build"))[0] == "allow"
    back = post({**p, "cwd": str(repo)})
    assert decide_hook("claude-code", back, "--agent", "build").stdout == ""
    assert records(repo, "violation") == [] and records(other, "violation") == []


def test_each_new_turn_tells_the_model_the_session_is_held(
    repo: Path, decide_hook: HookRunner, env: dict[str, str]
) -> None:
    """The per-turn context (UserPromptSubmit) says so too, before any tool call."""
    from guard.planning.host import answer

    assert guard_cli("plan", "start", "x", cwd=repo, env=env).returncode == 0
    p = claude_payload("Write", {"file_path": str(repo / "src/app.py"), "content": "o"}, repo)
    (repo / "src/app.py").write_text("o")
    decide_hook("claude-code", post(p))
    turn = {"session_id": SESSION, "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
            "prompt": "go on", "permission_mode": "acceptEdits"}
    said = json.loads(answer(json.dumps(turn), ["claude-code"], env=env).stdout)
    context = said["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("guard: claude-code ran Write toolu_01ABC without guard's")
    assert "guard session resume" in context and "src/app.py (modified)" in context
    other = json.loads(answer(json.dumps({**turn, "session_id": "x"}), ["claude-code"],
                              env=env).stdout)
    assert "without guard" not in other["hookSpecificOutput"]["additionalContext"]


def test_with_restore_configured_what_landed_is_undone_at_once(
    repo: Path, decide_hook: HookRunner, env: dict[str, str]
) -> None:
    """GUARD_MISSED_RESTORE=1: the unguarded Write is put back when guard finds it."""
    restore = {"GUARD_MISSED_RESTORE": "1"}
    assert guard_cli("plan", "start", "x", cwd=repo, env=env).returncode == 0
    read_call = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    assert pre_decision(decide_hook("claude-code", read_call, extra_env=restore))[0] == "allow"
    p = claude_payload("Write", {"file_path": str(repo / "src/new.py"), "content": "n"}, repo)
    p["tool_use_id"] = "toolu_unguarded"
    (repo / "src/new.py").write_text("n")
    (repo / "src/app.py").write_text("owned\n")  # and a Bash without a hook changed this one
    answer = answer_of(decide_hook("claude-code", post(p), extra_env=restore))
    assert "guard undid it" in answer["reason"], answer["reason"]
    assert (repo / "src/app.py").read_text() == "print('hello')\n"
    assert not (repo / "src/new.py").exists()
    kept = sorted(k.read_text() for k in (repo / ".openoxide/quarantine").rglob("*.py"))
    assert kept == ["n", "owned\n"]
    [v] = records(repo, "violation")
    assert len(v["landed"]["restored"]) == 3  # two quarantined, one put back
    # still held: the user looks before the session goes on
    assert pre_decision(decide_hook("claude-code", read_call))[0] == "deny"


def _plant(repo: Path, how: str, tool_use_id: str, kind: str = "verdict") -> dict[str, Any]:
    """The attacker's move: append to the project's audit log a record that claims guard
    decided (``allow``) the call ``tool_use_id`` (or already reported it missed), made from
    a genuine record of the log, with a made-up MAC ("forged-mac") or no chain ("unchained")."""
    log = default_log_path(Roots.discover(str(repo)))
    genuine = [r for r in read(log) if r.get("type") == "verdict"][-1]
    fake = {**genuine, "tool_use_id": tool_use_id, "tool_name": "Write", "decision": "allow",
            "reason": "allowed by the build agent", "agent": "build",
            "record_id": "0190f0aa-0000-7000-8000-00000000f0e9"}
    if kind == "hook_missed":
        fake.update({"type": "violation", "kind": "hook_missed"})
    seq = genuine["chain_seq"] + 1
    del fake["chain_seq"], fake["chain"]
    line = json.dumps(fake, sort_keys=True, ensure_ascii=False)
    if how == "forged-mac":  # laid out exactly as guard's writer lays out a chained line
        line = line[:-1] + f', "chain_seq": {seq}, "chain": "{"ab" * 32}"}}'
    with open(log, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return fake


@pytest.mark.parametrize(("how", "kind"), [("forged-mac", "verdict"), ("unchained", "verdict"),
                                           ("forged-mac", "hook_missed")])
def test_a_forged_decision_record_does_not_count_and_is_reported_as_tampering(
    how: str, kind: str, repo: Path, run_hook: HookRunner, env: dict[str, str]
) -> None:
    """Attack: the Write runs without the PreToolUse hook, and a record claiming guard
    allowed it (or already reported it) is planted in the audit log first. Only records
    whose chain MAC verifies under the installation's key count: hook_missed is still
    recorded, plus an audit_tampered violation naming the forged record, and both are
    told in the hook's answer. The real hook process runs it."""
    read_call = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    assert pre_decision(run_hook("claude-code", read_call, "--agent", "build"))[0] == "allow"
    fake = _plant(repo, how, "toolu_forged", kind)
    p = claude_payload("Write", {"file_path": str(repo / "src/app.py"), "content": "owned"},
                       repo)
    p["tool_use_id"] = "toolu_forged"
    (repo / "src/app.py").write_text("owned")  # what the host did without asking guard
    answer = answer_of(run_hook("claude-code", post(p), "--agent", "build"))
    assert "hook_missed" in answer["reason"] and "tampered" in answer["reason"], answer
    got = [v for v in records(repo, "violation") if v.get("record_id") != fake["record_id"]]
    assert [v["kind"] for v in got] == ["hook_missed", "audit_tampered"]
    missed, tamper = got
    assert missed["tool_use_id"] == "toolu_forged" and missed["session_id"] == SESSION
    [forged] = tamper["records"]
    assert forged["record_id"] == fake["record_id"]
    problem = "no chain MAC" if how == "unchained" else "the MAC does not match"
    assert forged["problem"].startswith(problem), forged
    # the disk: `guard audit verify` names the planted line, and only it
    log = default_log_path(Roots.discover(str(repo)))
    out = guard_cli("audit", "verify", "--json", str(log), cwd=repo, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = log.read_text().splitlines()
    planted = 1 + next(i for i, line in enumerate(lines) if fake["record_id"] in line)
    assert {f["line"] for f in json.loads(out.stdout)["findings"]} == {planted}
    # the genuine hook_missed record (chained after the planted line) counts: reported once
    again = run_hook("claude-code", post(p), "--agent", "build")
    assert again.returncode == 0 and again.stdout == "", again
    assert len(records(repo, "violation")) == len(got) + (kind == "hook_missed")


def test_plan_mode_hold_says_the_log_was_tampered_with(
    repo: Path, decide_hook: HookRunner, env: dict[str, str]
) -> None:
    """Attack, plan mode: a forged allow for the unguarded Write does not lift the hold."""
    assert guard_cli("plan", "start", "x", cwd=repo, env=env).returncode == 0
    read_call = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    assert pre_decision(decide_hook("claude-code", read_call))[0] == "allow"
    _plant(repo, "forged-mac", "toolu_unguarded")
    p = claude_payload("Write", {"file_path": str(repo / "src/app.py"), "content": "owned\n"},
                       repo)
    p["tool_use_id"] = "toolu_unguarded"
    (repo / "src/app.py").write_text("owned\n")
    answer = answer_of(decide_hook("claude-code", post(p)))
    assert "plan mode holds session" in answer["reason"] and "tampered" in answer["reason"]
    decision, reason = pre_decision(decide_hook("claude-code", read_call))
    assert decision == "deny" and "tampered" in reason and "guard session resume" in reason
    assert [v["kind"] for v in records(repo, "violation")] == ["hook_missed", "audit_tampered"]


def gemini_call(repo: Path, event: str, content: str = "owned") -> dict[str, Any]:
    """A Gemini CLI call (no tool_use_id: Gemini sends none) writing src/app.py."""
    return {"session_id": "s-gemini", "cwd": str(repo), "hook_event_name": event,
            "timestamp": "2026-12-07T09:00:00.000Z", "tool_name": "write_file",
            "tool_input": {"file_path": "src/app.py", "content": content}}


def test_a_denied_call_repeated_after_the_hook_failed_is_caught_without_a_call_id(
    repo: Path, decide_hook: HookRunner
) -> None:
    """Attack (Gemini CLI, no tool_use_id): guard denies a write; the agent makes the
    pre-tool hook fail and repeats the very same call, which the host then runs. The deny
    is not a decision the call ran under: the AfterTool sees a call guard never allowed."""
    pre = answer_of(decide_hook("gemini", gemini_call(repo, "BeforeTool"), "--agent", "plan"))
    assert pre["decision"] == "deny", pre
    (repo / "src/app.py").write_text("owned")  # the repeat ran with no pre-tool decision
    after = answer_of(decide_hook("gemini", gemini_call(repo, "AfterTool"), "--agent", "plan"))
    assert "ran write_file without guard's decision" in json.dumps(after), after
    [v] = records(repo, "violation")
    assert v["kind"] == "hook_missed" and v["tool_name"] == "write_file" and v["held"] is True


def test_one_allow_pairs_with_one_call_without_a_call_id(
    repo: Path, decide_hook: HookRunner
) -> None:
    """Attack (Gemini CLI): a write guard allowed once is repeated with the same input after
    the pre-tool hook was made to fail. The first AfterTool pairs with the allow; the second
    finds no decision of its own and is reported; a third call decided again pairs anew."""
    build = ("--agent", "build")
    assert answer_of(decide_hook("gemini", gemini_call(repo, "BeforeTool"), *build))[
        "decision"] == "allow"
    assert "hook_missed" not in decide_hook("gemini", gemini_call(repo, "AfterTool"),
                                            *build).stdout
    repeat = answer_of(decide_hook("gemini", gemini_call(repo, "AfterTool"), *build))
    assert "hook_missed" in json.dumps(repeat), repeat
    assert len(records(repo, "violation")) == 1
    assert answer_of(decide_hook("gemini", gemini_call(repo, "BeforeTool"), *build))[
        "decision"] == "allow"
    assert "hook_missed" not in decide_hook("gemini", gemini_call(repo, "AfterTool"),
                                            *build).stdout
    assert len(records(repo, "violation")) == 1


def test_a_deny_is_never_the_decision_of_a_call_that_ran(
    repo: Path, decide_hook: HookRunner
) -> None:
    """Attack (a host with call ids): guard denied toolu_01ABC, yet its PostToolUse came:
    the call ran despite the deny (or under an id guard refused). It is hook_missed."""
    p = claude_payload("Write", {"file_path": str(repo / "src/app.py"), "content": "owned"},
                       repo)
    assert pre_decision(decide_hook("claude-code", p, "--agent", "plan"))[0] == "deny"
    (repo / "src/app.py").write_text("owned")
    answer = answer_of(decide_hook("claude-code", post(p), "--agent", "plan"))
    assert "ran Write toolu_01ABC without guard's decision" in answer["reason"], answer
    [v] = records(repo, "violation")
    assert v["kind"] == "hook_missed" and v["tool_use_id"] == "toolu_01ABC"
