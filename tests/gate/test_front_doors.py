"""One call, three front doors: the hook, `guard check --dialect` and the MCP proxy decide
it through the same gate, so they give the same verdict and write the same audit record.

Each front door runs for real, as its own process: the hook as hosts run it (Cursor's
beforeMCPExecution carries an MCP tool call), `guard check` through the CLI, and
`guard mcp` in front of a scripted MCP server speaking JSON-RPC on stdio.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from guard.audit.logfile import default_log_path, read
from guard.fleet.records import missing
from guard.paths import Roots

SCRIPTED = Path(__file__).parent.parent / "mcp" / "scripted_server.py"

#: What only one front door knows: dropped before comparing records.
FRONT_DOOR_KEYS = {
    "chain",  # each log's own chain (the check writes another log than the hook and proxy)
    "chain_seq",
    "ts",
    "source",
    "host",
    "event",
    "tool_use_id",
    "permission_mode",
    "method",
    "session_id",
    "answered",
    # the hook's digest of the tool input, to match the host's post-tool report to it
    "input_sha256",
    # the fleet fields that name the record itself and its front door's session and host
    "record_id",
    "session",
    "host_agent",
    "host_agent_version",
}

CALLS = [
    ("write_file", {"path": "src/app.py", "content": "pwned"}, "deny"),
    ("write_file", {"path": ".openoxide/plans/p.md", "content": "# plan"}, "allow"),
    ("read_text_file", {"path": "src/app.py"}, "allow"),
]


def hook(repo: Path, name: str, arguments: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    payload = {
        "hook_event_name": "beforeMCPExecution",
        "tool_name": name,
        "tool_input": arguments,
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "workspace_roots": [str(repo)],
    }
    return subprocess.run(
        [sys.executable, "-I", "-m", "guard.hooks", "cursor", "--agent", "plan"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=120,
        check=False,
    )


def check(
    repo: Path, name: str, arguments: dict[str, Any], log: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "guard", "check", "--agent", "plan", "--json",
            "--dialect", "mcp", "--tool", name, "--input", json.dumps(arguments),
            "--cwd", str(repo), "--audit-log", str(log),
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=120,
        check=False,
    )


def through_proxy(repo: Path, server_log: Path) -> list[dict[str, Any]]:
    """Send every call of CALLS through `guard mcp --agent plan`; the answers, in order."""
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "guard", "mcp", "--agent", "plan", "--",
            sys.executable, str(SCRIPTED), str(server_log),
        ],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    def answer(msg_id: Any) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            assert line, "guard mcp closed stdout"
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == msg_id:
                return message

    try:
        send({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "front-door-test", "version": "1"},
            },
        })
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        answers = []
        for i, (name, arguments, _) in enumerate(CALLS, start=1):
            send({
                "jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            })
            answers.append(answer(i))
        proc.stdin.close()
        proc.wait(timeout=120)  # the proxy writes its records before it exits
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return answers


def common(record: dict[str, Any]) -> dict[str, Any]:
    """What must agree; a refusal's plan-file sentence names the front door's own session
    (the proxy runs one, the hook and check here do not), so it is compared apart."""
    out = {k: v for k, v in record.items() if k not in FRONT_DOOR_KEYS}
    if "reason" in out:
        out["reason"] = out["reason"].split(". You are in plan mode", 1)[0]
    return out


def test_the_same_call_gets_the_same_verdict_and_record_at_every_front_door(
    repo: Path,
) -> None:
    check_log = repo.parent / "check-audit.jsonl"
    project_log = default_log_path(Roots.discover(repo))

    hook_answers = [json.loads(hook(repo, n, a).stdout) for n, a, _ in CALLS]
    check_runs = [check(repo, n, a, check_log) for n, a, _ in CALLS]
    hook_records = [r for r in read(project_log) if r.get("source") == "hook"]
    proxy_answers = through_proxy(repo, repo.parent / "server.jsonl")
    proxy_records = [
        r for r in read(project_log) if r.get("source") == "mcp" and r.get("type") == "verdict"
    ]
    check_records = list(read(check_log))

    expected = [want for _, _, want in CALLS]
    assert [a["permission"] for a in hook_answers] == expected
    assert [json.loads(r.stdout)["decision"] for r in check_runs] == expected
    assert [r.returncode for r in check_runs] == [1 if w == "deny" else 0 for w in expected]
    assert ["isError" in a.get("result", {}) and a["result"]["isError"] for a in proxy_answers] \
        == [w == "deny" for w in expected]

    assert len(hook_records) == len(check_records) == len(proxy_records) == len(CALLS)
    for h, c, p, want in zip(hook_records, check_records, proxy_records, expected, strict=True):
        assert h["decision"] == want
        assert common(h) == common(c) == common(p)
        told = [r["reason"].count("You are in plan mode") for r in (h, c, p)]
        assert told == ([1, 1, 1] if want != "allow" else [0, 0, 0]), told
        assert (h["source"], c["source"], p["source"]) == ("hook", "check", "mcp")
        assert h["type"] == "verdict" and h["dialect"] == "mcp" and h["agent"] == "plan"
    # every record carries the fleet fields; the policy's digest and the machine agree
    records = [*hook_records, *check_records, *proxy_records]
    assert all(not missing(r) for r in records)
    assert len({r["record_id"] for r in records}) == len(records)
    assert len({(r["policy_digest"], r["hostname"], r["guard_version"]) for r in records}) == 1
    assert {r["host_agent"] for r in hook_records} == {"cursor"}
    # the proxy's records name the MCP client its initialize request named
    assert {(r["host_agent"], r["host_agent_version"]) for r in proxy_records} == {
        ("front-door-test", "1")
    }
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
