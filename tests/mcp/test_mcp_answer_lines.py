"""The server's answers reach the client whole: lines that come in many pieces, many per read.

The proxy hands the server's stdout on line by line as it arrives (no reader
task); these run the real filesystem server through `guard mcp` with answers
far larger than a pipe read, and several answers in one read, and compare
what the client gets with the files on disk.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from components import require_component
from fsserver import server_binary
from rawclient import RawClient


@pytest.fixture(scope="module")
def fs_server() -> Path:
    try:
        return server_binary()
    except RuntimeError as exc:
        return require_component("the real MCP filesystem server", None, str(exc))


def text_of(answer: dict[str, object]) -> str:
    result = answer["result"]
    assert isinstance(result, dict) and result.get("isError") is not True, answer
    content = result["content"]
    assert isinstance(content, list)
    return str(content[0]["text"])


def test_an_answer_much_larger_than_a_pipe_read_arrives_whole(
    fs_server: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    project = project.resolve()
    # ~1.2 MB: many reads of the server's pipe, with newlines escaped inside the JSON string
    body = "".join(f"line {i} \u00e9\u4e2d \"quoted\" \\ {'x' * 60}\n" for i in range(15000))
    (project / "big.txt").write_text(body, encoding="utf-8")
    client = RawClient([], project, [str(fs_server), str(project)])
    try:
        client.initialize()
        assert text_of(client.call("read_text_file", {"path": str(project / "big.txt")}, 1)) == body
        # several answers in flight: they may come in one read; each arrives once, whole
        for i in range(2, 12):
            client.send(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": "list_directory", "arguments": {"path": str(project)}},
                }
            )
        answers: dict[object, dict[str, object]] = {}
        while len(answers) < 10:  # the server may answer them in any order
            message = client.receive()
            if "method" not in message:
                answers[message.get("id")] = message
        assert sorted(map(str, answers)) == sorted(map(str, range(2, 12)))
        assert all("[FILE] big.txt" in text_of(a) for a in answers.values())
    finally:
        assert client.close() == 0, client.stderr()
    lines = [json.loads(line) for line in client.raw_stdout]
    ids = [str(m["id"]) for m in lines if "id" in m]
    assert sorted(ids) == sorted(["init", *map(str, range(1, 12))])  # each answer once
