"""End to end: `guard mcp` in front of three real servers that parse differently.

Each attack hides something from a proxy that reads a line one way while the
server reads it another (tests/mcp/parsers.py: the Node filesystem server, a
server on the official Python SDK, one on Go's standard library). Each is sent
through `guard mcp` to each server for real, and afterwards the disk (the git
hook it aims at), what the client received (the secret) and the server's own log
of what it acted on are checked. ``test_each_attack_works_on_its_bare_server``
shows each server really is vulnerable without guard, so the other tests have
something to stop.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from components import require_component
from fsserver import served_project
from parsers import NAMES, Direct, Server, build_go_server, server
from rawclient import INIT, RawClient

from guard.audit.logfile import default_log_path, read
from guard.paths import Roots

HOOK_BODY = "#!/bin/sh\necho pwned\n"
SECRET = "TOKEN=secret"
OUTSIDE = "OUTSIDE=secret"


@pytest.fixture(scope="session")
def go_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return build_go_server(tmp_path_factory.mktemp("go"))
    except RuntimeError as exc:
        return require_component("Go's toolchain (golang-go)", None, str(exc))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git worktree with a secret (.env), a symlink src/link -> src/a/b, and a secret
    outside it (../outside.txt)."""
    monkeypatch.setenv("GUARD_POLICY", "")
    root = served_project(tmp_path, {".env": f"{SECRET}\n"})
    (root / "src" / "a" / "b").mkdir(parents=True)
    (root / "src" / "link").symlink_to("a/b")
    (tmp_path / "outside.txt").write_text(f"{OUTSIDE}\n")
    return root


@pytest.fixture(params=NAMES)
def srv(request: pytest.FixtureRequest, repo: Path, fs_server: Path, go_server: Path) -> Server:
    return server(str(request.param), repo, fs_server, go_server)


@pytest.fixture
def build(srv: Server, repo: Path) -> Iterator[RawClient]:
    """`guard mcp --mode build` in front of the server: writes to the worktree are allowed,
    git hooks are protected."""
    client = RawClient(["--mode", "build"], repo, srv.argv)
    client.initialize()
    yield client
    client.close()


@pytest.fixture
def plan(srv: Server, repo: Path) -> Iterator[RawClient]:
    client = RawClient([], repo, srv.argv)
    client.initialize()
    yield client
    client.close()


def hook(repo: Path) -> Path:
    return repo / ".git" / "hooks" / "pre-commit"


def call(msg_id: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


def write_hook(repo: Path, msg_id: Any) -> dict[str, Any]:
    return call(msg_id, "write_file", {"path": str(hook(repo)), "content": HOOK_BODY})


def raw(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def still_serves(client: RawClient, srv: Server, repo: Path) -> None:
    """The proxy is alive and still forwards an allowed call."""
    answer = client.call(srv.read_tool, {"path": str(repo / "src" / "app.py")}, msg_id="alive")
    assert "print('hello')" in json.dumps(answer), answer


def nothing_secret(client: RawClient) -> None:
    seen = b"".join(client.raw_stdout).decode()
    assert SECRET not in seen and OUTSIDE not in seen, seen


def records(repo: Path) -> list[dict[str, Any]]:
    return list(read(default_log_path(Roots.discover(repo))))


def carriage_return_line(srv: Server, repo: Path) -> bytes:
    """An allowed read whose arguments hide, between bare CRs, a write of the git hook."""
    outer = call("outer", srv.read_tool, {"path": str(repo / "src" / "app.py"), "pad": ["@"]})
    return raw(outer).replace(b'"@"', b"\r" + raw(write_hook(repo, "hidden")) + b"\r")


def test_a_carriage_return_cannot_hide_a_call(
    build: RawClient, srv: Server, repo: Path
) -> None:
    """Attack: a write of .git/hooks/pre-commit hidden after a bare CR in an allowed read;
    the Python SDK's server ends a line there and would run it unchecked."""
    build.send_raw(carriage_return_line(srv, repo))
    answer = build.reply("outer")
    assert answer["error"]["code"] == -32600 and "carriage return" in answer["error"]["message"]
    still_serves(build, srv, repo)
    assert not hook(repo).exists()
    assert not any("hidden" in line or "pre-commit" in line for line in srv.acted_on())
    assert all(json.loads(line).get("id") != "hidden" for line in build.raw_stdout)


@pytest.mark.parametrize(
    "spelling",
    ["Method beside method", "Name beside name", "PATH beside path", "long-s key"],
)
def test_keys_that_differ_only_in_case_are_refused(
    build: RawClient, srv: Server, repo: Path, spelling: str
) -> None:
    """Attack: keys a case-insensitive decoder (Go's encoding/json) reads as the spec's, the
    last one winning: the proxy checks a ping, a read or a harmless write, the server runs
    a write of the git hook."""
    target = str(hook(repo))
    if spelling == "Method beside method":
        line = raw(write_hook(repo, "x"))[:-1] + b',"method":"ping","Method":"tools/call"}'
        line = line.replace(b'"method": "tools/call", ', b"", 1)
    elif spelling == "Name beside name":
        message = call("x", srv.read_tool, {"path": target, "content": HOOK_BODY})
        line = raw(message).replace(b'"arguments"', b'"Name": "write_file", "arguments"', 1)
    elif spelling == "PATH beside path":
        harmless = str(repo / "src" / "ok.txt")
        message = call("x", "write_file", {"path": harmless, "PATH": target, "content": "x"})
        line = raw(message)
    else:  # U+017F (long s) folds to "s": Go reads "param\u017f" as "params", the last winning
        harmless = call("x", srv.read_tool, {"path": str(repo / "src" / "app.py")})
        hidden = raw(write_hook(repo, "x")["params"])
        line = raw(harmless)[:-1] + b', "param\\u017f": ' + hidden + b"}"
    build.send_raw(line)
    answer = build.reply("x")
    assert answer["error"]["code"] == -32600 and "case" in answer["error"]["message"], answer
    still_serves(build, srv, repo)
    assert not hook(repo).exists()
    assert not any("pre-commit" in line for line in srv.acted_on())


def test_a_message_without_method_is_never_forwarded_unchecked(
    build: RawClient, srv: Server, repo: Path
) -> None:
    """Attack: objects without "method" that the old proxy forwarded as "answers to the
    server's requests": one spelling the method "Method" (a write of the hook to a
    case-insensitive server), one answering a request the server never sent."""
    smuggled = write_hook(repo, "q")
    smuggled["Method"] = smuggled.pop("method")
    build.send_raw(raw(smuggled))
    build.send(
        {"jsonrpc": "2.0", "id": "never-asked", "result": {"roots": [{"uri": repo.as_uri()}]}}
    )
    still_serves(build, srv, repo)
    assert not hook(repo).exists()
    assert not any("pre-commit" in line for line in srv.acted_on())
    # no answer to either (they were not requests), and both recorded as refusals
    ids = {json.loads(line).get("id") for line in build.raw_stdout}
    assert not {"q", "never-asked"} & ids
    build.close()
    rules = [r.get("rule") for r in records(repo) if r.get("decision") == "deny"]
    assert "guard.mcp.malformed" in rules and "guard.mcp.unmatched_answer" in rules, rules


def test_file_uris_are_decided_as_every_server_reads_them(
    plan: RawClient, srv: Server, repo: Path
) -> None:
    """Attack: resources/read of file://<worktree>/src\\..\\.env (the Python SDK's WHATWG
    parser reads <worktree>/.env; guard used to decide on a harmless name), and the same
    with %2e%2e and a host; the secret must not come back."""
    base = repo.as_uri()
    for n, uri in enumerate(
        [f"{base}/src\\..\\.env", f"{base}/src/%2e%2e/.env", f"{base}/src/../.env",
         f"file://localhost{repo}/src/./../.env"]
    ):
        answer = plan.request("resources/read", {"uri": uri}, msg_id=f"r{n}")
        assert "error" in answer, answer
        assert "file URI" in answer["error"]["message"], answer
    still_serves(plan, srv, repo)
    nothing_secret(plan)
    assert not any("resources/read" in line for line in srv.acted_on())


def test_dotdot_after_a_symlink_is_decided_both_ways(
    build: RawClient, srv: Server, repo: Path
) -> None:
    """Attack: src/link -> src/a/b. "src/link/../../.git/hooks/pre-commit" is src/.git/...
    to the kernel (guard's reading: an allowed write) and .git/hooks/pre-commit to Node's
    path.resolve and Go's filepath.Clean, which remove ".." as text."""
    sneaky = str(repo / "src" / "link" / ".." / ".." / ".git" / "hooks" / "pre-commit")
    answer = build.call("write_file", {"path": sneaky, "content": HOOK_BODY}, msg_id="w")
    assert answer["result"]["isError"] is True, answer
    assert ".git/hooks" in answer["result"]["content"][0]["text"]
    still_serves(build, srv, repo)
    assert not hook(repo).exists()
    assert not (repo / "src" / ".git").exists()


def test_dotdot_after_a_symlink_cannot_read_outside_the_worktree(
    plan: RawClient, srv: Server, repo: Path
) -> None:
    """Attack (plan mode, where reading outside the worktree asks): "src/link/../../../
    outside.txt" is <worktree>/outside.txt to the kernel and ../outside.txt to a server
    that removes ".." as text."""
    outside = str(repo / "src" / "link" / ".." / ".." / ".." / "outside.txt")
    answer = plan.call(srv.read_tool, {"path": outside}, msg_id="r")
    assert answer["result"]["isError"] is True, answer
    assert "guard refused" in answer["result"]["content"][0]["text"]
    still_serves(plan, srv, repo)
    nothing_secret(plan)


def bare_attack(srv: Server, repo: Path) -> str:
    """Run this server's own weak spot on it without guard; what it gave away."""
    bare = Direct(srv, repo)
    try:
        bare.send(raw(INIT))
        bare.answer("init")
        bare.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        if srv.name == "python-sdk":  # a bare CR ends its lines; WHATWG file URIs
            bare.send(carriage_return_line(srv, repo))
            message = {"uri": f"{repo.as_uri()}/src\\..\\.env"}
            bare.send(raw({"jsonrpc": "2.0", "id": "u", "method": "resources/read",
                           "params": message}))
            return json.dumps(bare.answer("u")) + json.dumps(bare.answer("hidden"))
        if srv.name == "go":  # keys in any case, the last winning
            smuggled = write_hook(repo, "q")
            smuggled["Method"] = smuggled.pop("method")
            bare.send(raw(smuggled))
            return json.dumps(bare.answer("q"))
        sneaky = str(repo / "src" / "link" / ".." / ".." / ".git" / "hooks" / "pre-commit")
        bare.send(raw(call("w", "write_file", {"path": sneaky, "content": HOOK_BODY})))
        return json.dumps(bare.answer("w"))
    finally:
        bare.close()


def test_each_attack_works_on_its_bare_server(srv: Server, repo: Path) -> None:
    """Without guard each server acts on what guard refuses above: the parsers differ."""
    gave = bare_attack(srv, repo)
    if srv.name == "python-sdk":
        assert SECRET in gave
    assert hook(repo).read_text() == HOOK_BODY, gave
    os.unlink(hook(repo))
