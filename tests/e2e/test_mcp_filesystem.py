"""End to end: the official Python MCP client -> `guard mcp` -> the real filesystem server.

The server is ``@modelcontextprotocol/server-filesystem`` (npm, pinned in
tests/mcp/fsserver.py) serving a temporary git repository; the client is the
``mcp`` SDK's ``ClientSession`` over stdio, which starts ``python -m guard mcp``
exactly as Claude Desktop or Cursor would start it from their config.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from fsserver import served_project

Elicit = Callable[[Any, Any], Awaitable[types.ElicitResult]]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GUARD_POLICY", "")
    return served_project(tmp_path, {"README.md": "# project\n", ".env": "TOKEN=secret\n"})


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file outside .git and guard's own session state, with its content."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith((".git/", ".openoxide/sessions/")) or not path.is_file():
            continue
        out[rel] = path.read_bytes()
    return out


class Client:
    """A connected SDK client plus what it saw: tool-list notifications, questions asked."""

    def __init__(self, session: ClientSession, stderr: Path) -> None:
        self.session = session
        self.stderr = stderr
        self.list_changed = asyncio.Event()
        self.questions: list[str] = []

    async def call(self, name: str, **arguments: Any) -> types.CallToolResult:
        result = await self.session.call_tool(name, arguments)
        assert isinstance(result, types.CallToolResult)
        return result

    async def tool_names(self) -> set[str]:
        return {t.name for t in (await self.session.list_tools()).tools}

    async def tools(self) -> dict[str, types.Tool]:
        return {t.name: t for t in (await self.session.list_tools()).tools}


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@asynccontextmanager
async def connect(
    fs_server: Path,
    repo: Path,
    *options: str,
    answer: Callable[[str, dict[str, Any]], types.ElicitResult] | None = None,
    roots: list[Path] | None = None,
    roots_listed: asyncio.Event | None = None,
) -> AsyncIterator[Client]:
    """Start `guard mcp OPTIONS -- mcp-server-filesystem REPO` the way an MCP host does."""
    stderr = repo.parent / "guard-mcp.stderr"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "guard", "mcp", *options, "--", str(fs_server), str(repo)],
        cwd=str(repo),
    )
    holder: list[Client] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and holder:
            holder[0].list_changed.set()

    elicit: Elicit | None = None
    if answer is not None:

        async def elicit_cb(context: Any, params: Any) -> types.ElicitResult:
            holder[0].questions.append(params.message)
            schema = params.requested_schema
            props = schema.get("properties", {}) if isinstance(schema, dict) else {}
            return answer(params.message, props)

        elicit = elicit_cb

    list_roots: Any = None
    if roots is not None:

        async def list_roots_cb(context: Any) -> types.ListRootsResult:
            if roots_listed is not None:
                asyncio.get_running_loop().call_later(0.5, roots_listed.set)
            return types.ListRootsResult(roots=[types.Root(uri=r.as_uri()) for r in roots])

        list_roots = list_roots_cb

    with stderr.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read,
                write,
                elicitation_callback=elicit,
                message_handler=on_message,
                list_roots_callback=list_roots,
            ) as session,
        ):
            init = await session.initialize()
            assert init.protocol_version  # whatever the server negotiated, passed through
            holder.append(Client(session, stderr))
            yield holder[0]


def approve_plans(message: str, props: dict[str, Any]) -> types.ElicitResult:
    assert "decision" in props, f"unexpected question: {message}"
    return types.ElicitResult(action="accept", content={"decision": "approve", "note": "go"})


def session_events(repo: Path) -> list[dict[str, Any]]:
    logs = list((repo / ".openoxide" / "sessions").glob("*.events.jsonl"))
    assert len(logs) == 1, logs
    return [json.loads(line) for line in logs[0].read_text().splitlines()]


def test_plan_mode_contract_through_the_proxy(fs_server: Path, repo: Path) -> None:
    """Attack: an MCP client in plan mode writes source files and moves the plan out of the
    plan directory through the filesystem server; guard must refuse both with nothing
    changed on disk, allow reads and the plan file, and allow writes only after the user
    approves the plan."""

    async def scenario() -> None:
        async with connect(fs_server, repo, answer=approve_plans) as c:
            tools = await c.tools()
            assert {"write_file", "move_file", "read_text_file"} <= set(tools)
            assert {"plan_exit", "request_user_input"} <= set(tools)
            assert not {"plan_enter", "update_plan"} & set(tools)
            description = tools["plan_exit"].description or ""
            plan = Path(description.rsplit("Your plan file: ", 1)[1].strip())
            assert plan.parent == repo / ".openoxide" / "plans"
            before = snapshot(repo)

            # writes outside the plan directory: refused, nothing on disk changes
            for path in (str(repo / "src" / "app.py"), "src/new.py", str(repo / "notes.md")):
                r = await c.call("write_file", path=path, content="pwned\n")
                assert r.is_error, path
                assert "guard refused write_file" in text(r)
            r = await c.call("create_directory", path=str(repo / "evil"))
            assert r.is_error and "guard refused" in text(r)
            # update_plan is not offered in plan mode, and calling it anyway is refused
            r = await c.call("update_plan", plan=[{"step": "x", "status": "in_progress"}])
            assert r.is_error and "update_plan" in text(r)
            assert snapshot(repo) == before

            # reads work
            r = await c.call("read_text_file", path=str(repo / "src" / "app.py"))
            assert not r.is_error and "print('hello')" in text(r)

            # the plan file may be written
            r = await c.call("write_file", path=str(plan), content="# Plan\n\n1. Greet.\n")
            assert not r.is_error, text(r)
            assert plan.read_text() == "# Plan\n\n1. Greet.\n"
            # ...but only as markdown in the plan directory
            r = await c.call("write_file", path=str(plan.parent / "run.sh"), content="rm -rf /\n")
            assert r.is_error
            # moving the plan out of the plan directory is refused; both ends stay as they were
            r = await c.call("move_file", source=str(plan), destination=str(repo / "src" / "p.md"))
            assert r.is_error and "guard refused move_file" in text(r)
            assert plan.exists() and not (repo / "src" / "p.md").exists()
            assert (repo / "src" / "app.py").read_text() == "print('hello')\n"

            # approved plan_exit: build mode, the tool offer changes and the client is told
            r = await c.call("plan_exit", summary="greet")
            assert not r.is_error, text(r)
            assert "approved" in text(r)
            assert any("# Plan" in q for q in c.questions)  # the user saw the plan
            await asyncio.wait_for(c.list_changed.wait(), 10)
            names = await c.tool_names()
            assert {"plan_enter", "update_plan"} <= names and "plan_exit" not in names

            r = await c.call("write_file", path=str(repo / "src" / "app.py"), content="new\n")
            assert not r.is_error, text(r)
            assert (repo / "src" / "app.py").read_text() == "new\n"
            r = await c.call("update_plan", plan=[{"step": "greet", "status": "in_progress"}])
            assert not r.is_error, text(r)

    asyncio.run(scenario())
    logged = session_events(repo)
    refusals = [e for e in logged if e["type"] == "decision" and e["action"] == "deny"]
    assert any(e["tool"] == "write_file" and e["source"] == "mcp" for e in refusals)
    assert any(e["tool"] == "move_file" for e in refusals)
    assert any(e["type"] == "mode_changed" and e["new"] == "build" for e in logged)


def test_ask_becomes_elicitation_and_only_an_explicit_yes_allows(
    fs_server: Path, repo: Path
) -> None:
    """Attack: read a secret (.env) in plan mode. The policy asks; guard must put the question
    to the user and run the call only on an explicit yes."""
    answers = iter([False, True])

    def answer(message: str, props: dict[str, Any]) -> types.ElicitResult:
        assert "allow" in props and ".env" in message
        return types.ElicitResult(action="accept", content={"allow": next(answers)})

    async def scenario() -> None:
        async with connect(fs_server, repo, answer=answer) as c:
            r = await c.call("read_text_file", path=str(repo / ".env"))
            assert r.is_error and "refused" in text(r) and "TOKEN" not in text(r)
            r = await c.call("read_text_file", path=str(repo / ".env"))
            assert not r.is_error and "TOKEN=secret" in text(r)
            assert len(c.questions) == 2

    asyncio.run(scenario())


def test_ask_without_elicitation_is_refused_with_the_reason(fs_server: Path, repo: Path) -> None:
    """Attack: a client that cannot show questions must not get "ask" calls run silently."""

    async def scenario() -> None:
        async with connect(fs_server, repo) as c:
            r = await c.call("read_text_file", path=str(repo / ".env"))
            assert r.is_error
            assert "TOKEN" not in text(r) and "elicitation" in text(r)

    asyncio.run(scenario())


def test_plan_exit_without_elicitation_waits_for_the_cli(fs_server: Path, repo: Path) -> None:
    """A client that cannot ask: plan_exit waits; `guard plan exit --approve` from the user's
    terminal ends plan mode, the proxy notices and tells the client, writes then work."""

    async def scenario() -> None:
        async with connect(fs_server, repo, "--session", "e2e-cli") as c:
            tools = await c.tools()
            plan = Path((tools["plan_exit"].description or "").rsplit(": ", 1)[1].strip())
            r = await c.call("plan_exit")
            assert r.is_error and "does not exist" in text(r)  # no plan written yet
            r = await c.call("write_file", path=str(plan), content="# Plan\n")
            assert not r.is_error, text(r)
            r = await c.call("plan_exit")
            assert not r.is_error and "waits for the user" in text(r)
            r = await c.call("write_file", path=str(repo / "src" / "app.py"), content="x\n")
            assert r.is_error  # still plan mode
            done = await asyncio.to_thread(
                subprocess.run,
                [
                    sys.executable,
                    "-m",
                    "guard",
                    "plan",
                    "exit",
                    "--approve",
                    "--session",
                    "e2e-cli",
                    "--cwd",
                    str(repo),
                ],
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr
            await asyncio.wait_for(c.list_changed.wait(), 15)
            r = await c.call("write_file", path=str(repo / "src" / "app.py"), content="x\n")
            assert not r.is_error, text(r)

    asyncio.run(scenario())
    assert (repo / "src" / "app.py").read_text() == "x\n"


def test_pinned_agent_ignores_mode(fs_server: Path, repo: Path) -> None:
    """--agent plan pins the plan agent's rules even in a build-mode session."""

    async def scenario() -> None:
        async with connect(fs_server, repo, "--mode", "build", "--agent", "plan") as c:
            names = await c.tool_names()
            assert "plan_enter" in names  # build-mode session...
            r = await c.call("write_file", path=str(repo / "src" / "app.py"), content="x\n")
            assert r.is_error  # ...but the plan agent decides

        async with connect(fs_server, repo, "--mode", "build") as c:
            r = await c.call("write_file", path=str(repo / "src" / "app.py"), content="y\n")
            assert not r.is_error, text(r)

    asyncio.run(scenario())
    assert (repo / "src" / "app.py").read_text() == "y\n"


def test_client_roots_that_move_the_servers_base_make_relative_paths_refused(
    fs_server: Path, repo: Path
) -> None:
    """Attack: the client's roots (which the filesystem server adopts in place of its
    command-line directories) point at src/, so a relative ".openoxide/plans/p.md" would
    look like the plan file to guard while the server writes under src/."""
    listed = asyncio.Event()
    (repo / "src" / ".openoxide" / "plans").mkdir(parents=True)  # so the write could land

    async def scenario() -> None:
        async with connect(fs_server, repo, roots=[repo / "src"], roots_listed=listed) as c:
            await asyncio.wait_for(listed.wait(), 15)
            r = await c.call("write_file", path=".openoxide/plans/p.md", content="x")
            assert r.is_error and f"--cwd {repo / 'src'}" in text(r)
            r = await c.call("read_text_file", path=str(repo / "src" / "app.py"))
            assert not r.is_error, text(r)

    asyncio.run(scenario())
    assert not (repo / "src" / ".openoxide" / "plans" / "p.md").exists()
