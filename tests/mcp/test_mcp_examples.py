"""The configuration snippets in examples/mcp/ work: each host's command line, as written,
starts a guarded filesystem server (only the project path and the server's name on $PATH
are swapped for the test's repository and the installed server)."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from fsserver import BIN, PACKAGE, VERSION
from rawclient import RawClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mcp"


def host_config(name: str) -> tuple[str, list[str]]:
    path = EXAMPLES / name
    if name.endswith(".toml"):
        server = tomllib.loads(path.read_text())["mcp_servers"]["project-files"]
    else:
        server = json.loads(path.read_text())["mcpServers"]["project-files"]
    return server["command"], server["args"]


@pytest.mark.parametrize(
    "name", ["claude_desktop_config.json", "cursor_mcp.json", "codex_config.toml"]
)
def test_example_starts_a_guarded_server_in_plan_mode(
    tmp_path: Path, name: str, fs_server: Path
) -> None:
    fs = fs_server
    command, args = host_config(name)
    assert command == "guard" and args[0] == "mcp"
    at = args.index("--")
    assert args[at + 1] == BIN  # the server installed as the README says, run directly
    assert f"{PACKAGE}@{VERSION}" in (EXAMPLES / "README.md").read_text()  # pinned
    repo = tmp_path / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    argv = [a.replace("/path/to/project", str(repo)) for a in args]
    argv[at + 1] = str(fs)
    client = RawClient([], tmp_path, [], argv=argv)  # the host's cwd is not the project
    try:
        client.initialize()
        tools = {t["name"] for t in client.request("tools/list", msg_id=2)["result"]["tools"]}
        assert {"write_file", "plan_exit"} <= tools
        denied = client.call("write_file", {"path": str(repo / "x.py"), "content": "x"})
        assert denied["result"]["isError"] is True
        assert not (repo / "x.py").exists()
    finally:
        client.close()
