"""`guard replay` on real transcripts of the four hosts (tests/replay/fixtures/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .helpers import HOSTS, RECORDED, make_repo, placed

# the five calls every fixture made: read, write src/new.py, sed -i, the plan file, ls
EXPECTED = ["allow", "deny", "deny", "allow", "allow"]


def expected(host: str) -> list[str]:
    """As the live hook decides: `ls src` runs confined where the host's hook can rewrite a
    call (Claude Code, Gemini CLI, OpenCode) and the kernel has Landlock."""
    from guard.hooks import adapter_for
    from guard.sandbox.landlock import abi_version

    confined = adapter_for(host).can_rewrite and abi_version() > 0
    return [*EXPECTED[:4], "allow_confined" if confined else "allow"]
KEYS = {"index", "time", "host", "session", "cwd", "tool", "input", "effects", "decision",
        "reason", "rule"}
SARIF_SCHEMA = Path(__file__).parent.parent / "lint" / "data" / "sarif-2.1.0-rtm.5.json"


def guard(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *map(str, args)], capture_output=True,
                          text=True, timeout=300, check=False, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200"})


def records(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == 1  # one object, as every guard JSON output
    out: list[dict[str, Any]] = doc["calls"]
    return out


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_each_hosts_real_transcript_is_decided_for_the_plan_agent(
    host: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    path = placed(HOSTS[host], tmp_path / "t", repo)
    for given in ("auto", host):
        proc = guard("replay", "--host", given, "--json", path)
        assert proc.returncode == 3, proc.stderr
        got = records(proc)
        assert [r["decision"] for r in got] == expected(host)
        assert all(set(r) >= KEYS for r in got)
        assert {r["host"] for r in got} == {host}
        assert {r["cwd"] for r in got} == {str(repo)}
        assert all(r["session"] for r in got) and all(r["time"] for r in got)
        assert all(r["source"].startswith(f"{path}:") for r in got)
        write = got[1]
        assert write["rule"] == "agents.plan.write.default"
        assert any(e["kind"] == "write" and e["target"].endswith("src/new.py")
                   for e in write["effects"])
        assert "sed -i" in json.dumps(got[2]["input"])
        assert "plans/x.md" in json.dumps(got[3]["input"])
        assert "resolved" not in got[0]


def test_a_directory_replays_every_transcript_under_it(sessions: tuple[Path, Path]) -> None:
    folder, _ = sessions
    proc = guard("replay", folder)
    assert proc.returncode == 3, proc.stderr
    confined = sum(expected(h)[4] == "allow_confined" for h in HOSTS)
    of = f" ({confined} of them confined)" if confined else ""
    assert f"20 calls in 4 sessions: 12 allowed{of}, 0 asked, 8 denied" in proc.stdout
    assert "8  agents.plan.write.default" in proc.stdout
    assert "DENY" in proc.stdout and "sed -i 's/hello/owned/' src/app.py" in proc.stdout


def test_the_build_agent_allows_everything_exit_0(sessions: tuple[Path, Path]) -> None:
    folder, _ = sessions
    proc = guard("replay", "--agent", "build", "--json", folder)
    assert proc.returncode == 0, proc.stderr
    assert {r["decision"] for r in records(proc)} == {"allow"}


def test_another_policy_and_agent_decide(sessions: tuple[Path, Path]) -> None:
    folder, repo = sessions
    proc = guard("replay", "--policy", "builtin:readonly", "--agent", "readonly", "--json",
                 folder, cwd=repo)
    assert proc.returncode == 3, proc.stderr
    got = records(proc)  # read-only: not even the plan file may be written
    assert [r["decision"] for r in got if r["host"] == "codex"] == [
        "allow", "deny", "deny", "deny", "allow"]


def test_a_cwd_that_no_longer_exists_is_resolved_and_said(tmp_path: Path) -> None:
    gone = tmp_path / "gone" / "repo"
    path = placed(HOSTS["claude-code"], tmp_path / "t", gone)
    proc = guard("replay", "--json", path)
    assert proc.returncode == 3, proc.stderr
    got = records(proc)
    assert all(f"cwd {gone} no longer exists" in r["resolved"] for r in got)
    assert all(str(tmp_path) in r["resolved"] for r in got)
    assert got[1]["decision"] == "deny"  # the write into src/ still is


def test_replay_writes_no_audit_log_and_no_session_state(
    sessions: tuple[Path, Path]
) -> None:
    folder, repo = sessions
    data = Path(os.environ["XDG_DATA_HOME"])
    before = sorted(data.rglob("*")) if data.exists() else []
    assert guard("replay", folder, cwd=repo).returncode == 3
    after = sorted(data.rglob("*")) if data.exists() else []
    assert after == before
    assert not (repo / ".openoxide").exists()


def test_sidechain_calls_are_marked(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    path = placed(HOSTS["claude-code"], tmp_path / "t", repo)
    # a sub-agent's records: the same shape with isSidechain true (as Claude Code writes them)
    path.write_text(path.read_text().replace('"isSidechain":false', '"isSidechain":true'))
    proc = guard("replay", "--json", path)
    assert {r["sidechain"] for r in records(proc)} == {True}
    assert "(sub-agent)" in guard("replay", path).stdout


def test_sarif_has_one_result_per_blocked_call(sessions: tuple[Path, Path]) -> None:
    folder, _ = sessions
    proc = guard("replay", "--format", "sarif", folder)
    assert proc.returncode == 3, proc.stderr
    log = json.loads(proc.stdout)
    jsonschema.validate(log, json.loads(SARIF_SCHEMA.read_text()))
    results = log["runs"][0]["results"]
    assert len(results) == 8 and {r["level"] for r in results} == {"error"}
    where = results[0]["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"].endswith("claude-code.jsonl")
    assert where["region"]["startLine"] > 1


def test_output_file(sessions: tuple[Path, Path], tmp_path: Path) -> None:
    folder, _ = sessions
    out = tmp_path / "r.json"
    proc = guard("replay", "--json", "-o", out, folder)
    assert proc.returncode == 3 and proc.stdout == ""
    assert len(json.loads(out.read_text())["calls"]) == 20
    assert "20 calls in 4 sessions" in proc.stderr


# -- bad input: FILE:LINE: what is wrong, exit 2, never a traceback -------------------------

def bad(*args: str | Path) -> str:
    proc = guard("replay", *args)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


@pytest.mark.parametrize("host", sorted(h for h in HOSTS if h != "opencode"))
def test_a_malformed_line_is_located(host: str, tmp_path: Path) -> None:
    path = placed(HOSTS[host], tmp_path, RECORDED)
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(4, "{this is not json\n")
    path.write_text("".join(lines))
    assert f"{path}:5: not JSON" in bad(path)


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_truncated_transcript_is_located(host: str, tmp_path: Path) -> None:
    path = placed(HOSTS[host], tmp_path, RECORDED)
    text = path.read_text()
    path.write_text(text[: len(text) * 2 // 3])  # the host died mid-write
    lines = path.read_text().count("\n") + 1
    message = bad(path)
    assert f"{path}:{lines}: truncated" in message, message


def test_a_tool_call_without_a_name_is_located(tmp_path: Path) -> None:
    path = placed(HOSTS["codex"], tmp_path, RECORDED)
    path.write_text(path.read_text().replace('"name":"exec_command",', "", 1))
    assert f"{path}:10: a function_call without a 'name'" in bad(path)


def test_unknown_format_missing_file_and_unknown_host(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    assert f"{other}:1: unknown transcript format" in bad(other)
    assert "no such file or directory" in bad(tmp_path / "nope.jsonl")
    assert "--host 'cursor'" in bad("--host", "cursor", other)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no transcript" in bad(empty)
    assert "no agent 'nobody'" in bad("--agent", "nobody", placed(HOSTS["codex"], tmp_path,
                                                                   RECORDED))


def test_help_teaches_with_an_example() -> None:
    proc = guard("replay", "--help")
    assert proc.returncode == 0
    assert "guard replay ~/.claude/projects/" in proc.stdout and "Exit codes" in proc.stdout


def test_replay_predicts_the_live_hook_answer_for_a_confined_call(tmp_path: Path) -> None:
    """The live Claude Code hook runs `ls src && python3 -c 'print(1+1)'` confined (it
    answers with a rewrite); the replay of that very call says allow_confined, not ask."""
    from guard.hooks.front_door import decide as hook_answer

    repo = make_repo(tmp_path)
    command = "ls src && python3 -c 'print(1+1)'"
    payload = {"hook_event_name": "PreToolUse", "session_id": "s1", "cwd": str(repo),
               "tool_name": "Bash", "tool_input": {"command": command}}
    live = hook_answer("claude-code", json.dumps(payload), env={"GUARD_AGENT": "plan"})
    out = json.loads(live.stdout)["hookSpecificOutput"]
    confined = "updatedInput" in out
    from guard.sandbox.landlock import abi_version

    assert confined == (abi_version() > 0), out  # the hook confines wherever it can
    line = {"type": "assistant", "sessionId": "s1", "cwd": str(repo),
            "timestamp": "2026-01-01T12:00:00.000Z", "uuid": "u1",
            "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                 "input": {"command": command}}]}}
    transcript = tmp_path / "live.jsonl"
    transcript.write_text(json.dumps(line) + "\n")
    got = records(guard("replay", "--json", transcript))
    assert [r["decision"] for r in got] == ["allow_confined" if confined else "allow"]
    if confined:
        assert out["permissionDecision"] == "allow" and got[0]["rule"] == "guard.confined"


def test_a_missing_cwd_is_said_or_replayed_against_cwd(tmp_path: Path) -> None:
    """The transcript's folder does not exist here: the report says so prominently; with
    --cwd DIR the calls are replayed against DIR and decide as they did live."""
    repo = make_repo(tmp_path)
    path = placed(HOSTS["claude-code"], tmp_path / "t", "/nonexistent/guard-replay/repo")
    proc = guard("replay", path)
    assert "NOTE: 1 transcript folder(s) do not exist here (/nonexistent/guard-replay/repo)" \
        in proc.stdout and "--cwd DIR" in proc.stdout
    proc = guard("replay", "--format", "sarif", path)
    assert "guard: warning: NOTE: 1 transcript folder(s)" in proc.stderr
    proc = guard("replay", "--json", path)  # with --json, the warning is JSON too
    assert json.loads(proc.stderr)["warning"].startswith("NOTE: 1 transcript folder(s)")
    proc = guard("replay", "--json", "--cwd", repo, path)
    got = records(proc)
    assert [r["decision"] for r in got] == expected("claude-code")
    assert all(r["resolved"].startswith("re-rooted: /nonexistent/guard-replay/repo ->")
               for r in got)
    assert "NOTE" not in proc.stderr
    proc = guard("replay", "--cwd", tmp_path / "nope", path)
    assert proc.returncode == 2 and "--cwd" in proc.stderr


def test_rows_are_in_time_order_across_sessions(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)

    def session(name: str, times: list[str]) -> None:
        lines = []
        for n, t in enumerate(times):
            lines.append(json.dumps({
                "type": "assistant", "sessionId": name, "cwd": str(repo), "timestamp": t,
                "uuid": f"{name}{n}", "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"toolu_{name}{n}", "name": "Read",
                     "input": {"file_path": str(repo / "src" / f"{name}{n}.py")}}]}}))
        (tmp_path / "t").mkdir(exist_ok=True)
        (tmp_path / "t" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")

    session("a", ["2026-01-01T10:00:00.000Z", "2026-01-01T10:02:00.000Z"])
    session("b", ["2026-01-01T10:01:00.000Z", "2026-01-01T10:03:00.000Z"])
    got = records(guard("replay", "--json", tmp_path / "t"))
    assert [r["session"] for r in got] == ["a", "b", "a", "b"]
    assert [r["index"] for r in got] == [1, 2, 3, 4]
    times = [r["time"] for r in got]
    assert times == sorted(times)
