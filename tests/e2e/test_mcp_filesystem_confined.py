"""End to end: the real MCP filesystem server runs under the kernel while the session plans.

The official Python MCP client -> `guard mcp` -> ``@modelcontextprotocol/server-filesystem``
(see test_mcp_filesystem.py). To reach the kernel layer, the analysis must let a
write through: the policy here is the default one with a slip, plan mode
allowing writes and deletes under ``src/`` (a mistaken policy, or any tool call
the analyser misjudges). The server process itself must then be refused by
Landlock, and after the approved plan exit the same proxy and connection must
write through a restarted, unconfined server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import mcp_types as types
import pytest

from guard.sandbox import confine

from . import test_mcp_filesystem as fs
from .test_mcp_filesystem import repo  # noqa: F401  (a fixture)

DEFAULT_POLICY = Path(__file__).resolve().parents[2] / "policies" / "default.toml"
SLIP = 'allow = ["{plans}/*.md", "!{plans}/*/**"]'


@pytest.fixture
def slipped_policy(tmp_path: Path) -> Path:
    """The default policy, but plan mode may write and delete under src/."""
    text = DEFAULT_POLICY.read_text()
    assert text.count(SLIP) == 2, "the default policy's plan write/delete lists changed"
    path = tmp_path / "slipped.toml"
    path.write_text(text.replace(SLIP, 'allow = ["{plans}/*.md", "!{plans}/*/**", "src/**"]'))
    return path


def refused_by_kernel(result: types.CallToolResult, tool: str = "") -> bool:
    """The server's write failed in the kernel: the read-only view (EROFS) in namespaces,
    Landlock (EACCES) in the fallback without them. (Node's recursive mkdir reports the
    EROFS of a directory it could not make as the ENOENT of its stat afterwards.)"""
    body = fs.text(result).lower()
    if confine.namespaces_unavailable():
        return result.is_error and ("eacces" in body or "permission denied" in body)
    seen = ("erofs", "read-only file system")
    if tool == "create_directory":
        seen += ("enoent: no such file or directory, mkdir",)
    return result.is_error and any(s in body for s in seen)


@pytest.mark.skipif(confine.available() != "", reason="this kernel cannot confine")
def test_writes_the_analysis_lets_through_fail_in_the_confined_server_until_approval(
    fs_server: Path,
    repo: Path,  # noqa: F811
    slipped_policy: Path,
) -> None:
    """Attack: in plan mode, write_file, edit_file, create_directory and move_file under src/
    that the (slipped) policy allows; the filesystem server must get EROFS (EACCES without
    namespaces) from the kernel and the disk stay unchanged. The plan file is written; after
    the approved plan_exit the server is restarted unconfined and the same connection writes
    src/app.py."""
    app = repo / "src" / "app.py"

    async def scenario() -> None:
        async with fs.connect(
            fs_server, repo, "--policy", str(slipped_policy), answer=fs.approve_plans
        ) as c:
            tools = await c.tools()
            plan = Path((tools["plan_exit"].description or "").rsplit(": ", 1)[1].strip())
            before = fs.snapshot(repo)

            attempts = [
                ("write_file", {"path": str(app), "content": "pwned\n"}),
                ("write_file", {"path": str(repo / "src" / "new.py"), "content": "x\n"}),
                (
                    "edit_file",
                    {"path": str(app), "edits": [{"oldText": "hello", "newText": "pwned"}]},
                ),
                ("create_directory", {"path": str(repo / "src" / "evil")}),
                (
                    "move_file",
                    {"source": str(app), "destination": str(repo / "src" / "moved.py")},
                ),
            ]
            for name, arguments in attempts:
                r = await c.call(name, **arguments)
                assert "guard refused" not in fs.text(r), (name, fs.text(r))  # the gate allowed
                assert refused_by_kernel(r, name), (name, fs.text(r))
            assert fs.snapshot(repo) == before
            assert app.read_text() == "print('hello')\n"

            r = await c.call("write_file", path=str(plan), content="# Plan\n\n1. Greet.\n")
            assert not r.is_error, fs.text(r)
            assert plan.read_text() == "# Plan\n\n1. Greet.\n"
            r = await c.call("read_text_file", path=str(app))
            assert not r.is_error and "print('hello')" in fs.text(r)

            r = await c.call("plan_exit", summary="greet")
            assert not r.is_error and "approved" in fs.text(r), fs.text(r)
            await asyncio.wait_for(c.list_changed.wait(), 30)
            names = await c.tool_names()
            assert {"write_file", "plan_enter"} <= names

            r = await c.call("write_file", path=str(app), content="new\n")
            assert not r.is_error, fs.text(r)
            r = await c.call("create_directory", path=str(repo / "src" / "pkg"))
            assert not r.is_error, fs.text(r)

            err = c.stderr.read_text()
            assert "runs confined" in err
            assert "restarting the server unconfined" in err and "serves again" in err

    asyncio.run(scenario())
    assert app.read_text() == "new\n"
    assert (repo / "src" / "pkg").is_dir()
    assert not (repo / "src" / "new.py").exists() and not (repo / "src" / "evil").exists()
