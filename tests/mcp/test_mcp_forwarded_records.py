"""An allowed call is forwarded before its verdict record is made: its answer still waits.

The proxy forwards an allowed ``tools/call`` first and makes and queues its record
while the server works (the record is written before the loop turns). The attack:
a record that cannot be made once the call has gone (a bug, an encoding error)
must not let the server's answer through unrecorded; the client gets the
withheld-answer error instead. The proxy runs in-process here with its two pipe
ends replaced by lists, so that the failure can be injected between the forward
and the record; the server's answer is handed to the router as the pipe would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fsserver import served_project

from guard.decide import Guard
from guard.gate import Gate, Verdict
from guard.mcp.proxy import McpProxy
from guard.planning.session import Mode, Session


def test_a_forwarded_call_whose_record_cannot_be_made_gets_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = served_project(tmp_path)
    session = Session.start(str(repo), Mode.PLAN, title="forwarded records")
    proxy = McpProxy(Guard.load(None, cwd=str(repo)), session, ["true"], cwd=str(repo))
    to_server: list[bytes] = []
    to_client: list[Any] = []
    monkeypatch.setattr(proxy.pipe, "send_server", to_server.append)
    monkeypatch.setattr(proxy.pipe, "send_client", lambda message, **_: to_client.append(message))

    def record(gate: Gate, verdict: Verdict, *args: Any, **kwargs: Any) -> Verdict:
        return gate.failure(verdict.call, RuntimeError("record lost"))

    monkeypatch.setattr(Gate, "record", record)  # a gate is frozen: its class is patched
    path = str(repo / "src" / "app.py")
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "read_text_file", "arguments": {"path": path}},
    }
    proxy._from_client_lines([json.dumps(call).encode()])
    assert [json.loads(line)["id"] for line in to_server] == [9], "an allowed call is forwarded"

    answer = {"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "x"}]}}
    proxy._from_server(json.dumps(answer).encode())
    assert len(to_client) == 1
    sent = to_client[0]
    assert sent["id"] == 9 and sent["result"]["isError"] is True
    text = sent["result"]["content"][0]["text"]
    assert "could not record its verdict (RuntimeError: record lost)" in text
    assert "the answer is withheld" in text
