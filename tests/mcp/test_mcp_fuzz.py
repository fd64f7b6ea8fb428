"""A byte-level fuzzer against `guard mcp` in front of a scripted server (hypothesis).

Lines are made from real client messages, then mutated byte by byte (bytes inserted
from a set that parsers disagree on: CR, backslashes, quotes, brackets, surrogates in
escapes and in UTF-8, invalid UTF-8, NUL; spans deleted or doubled; keys recased;
values nested 100,000 deep), and sent through one proxy. After each example a
sentinel request must be answered, and:

* **no input ends the proxy**: it still answers;
* **every request gets exactly one answer**: each line that a plain JSON reader takes
  for a request with a usable id (a string, or an integer within 2**53 - 1, named once)
  is answered exactly once with that id, and no id is ever answered twice;
* **only canonical lines pass**: every line the server received and every line the
  client received is printable ASCII JSON-RPC 2.0, and the server's lines are guard's
  rendering (:func:`guard.mcp.wire.render`) of what it read.

``GUARD_MCP_FUZZ_EXAMPLES`` sets the number of examples (CI: the default, 40).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fsserver import served_project
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rawclient import RawClient

from guard.mcp import wire

SCRIPTED = Path(__file__).with_name("scripted_server.py")
EXAMPLES = int(os.environ.get("GUARD_MCP_FUZZ_EXAMPLES", "40"))
MAX_ID = 2**53 - 1
_SERIAL = itertools.count(1)


class Proxy:
    """One `guard mcp --mode build` with the scripted server, and every answer it gave."""

    def __init__(self, client: RawClient, log: Path, repo: Path) -> None:
        self.client = client
        self.log = log
        self.repo = repo
        self.answered: Counter[str] = Counter()  # json of an id -> answers with it
        self.checked_log = 0
        self.unique: set[str] = set()  # ids sent once only (made unique): answered at most once

    def drain(self, until: set[str], before: Counter[str], timeout: float) -> None:
        """Take the proxy's output until every id in ``until`` got an answer since ``before``."""
        deadline = time.monotonic() + timeout
        while waiting := sorted(i for i in until if self.answered[i] <= before[i]):
            try:
                line = self.client.lines.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no answer to {waiting}; stderr:\n{self.client.stderr()[-3000:]}"
                ) from None
            assert line is not None, f"guard mcp ended; stderr:\n{self.client.stderr()[-3000:]}"
            self.take(line)

    def take(self, line: bytes) -> None:
        assert line.endswith(b"\n") and all(0x20 <= b < 0x7F for b in line[:-1]), line[:300]
        message = json.loads(line)
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
        if "method" not in message:
            self.answered[json.dumps(message.get("id"))] += 1

    def server_lines(self) -> list[bytes]:
        """The lines the server received since the last call (whole lines only)."""
        with self.log.open("rb") as log:
            log.seek(self.checked_log)
            data = log.read()
        whole = data[: data.rfind(b"\n") + 1]
        self.checked_log += len(whole)
        return whole.splitlines()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    repo = served_project(tmp_path_factory.mktemp("fuzz"), {".env": "TOKEN=secret\n"})
    log = repo.parent / "server-received.jsonl"
    log.touch()
    client = RawClient(["--mode", "build"], repo, [sys.executable, str(SCRIPTED), str(log)])
    client.initialize()
    yield Proxy(client, log, repo)
    client.close()


def bases(repo_uri: str) -> list[dict[str, Any]]:
    def req(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method}
        if params is not None:
            message["params"] = params
        return message

    return [
        req("tools/call", {"name": "echo", "arguments": {"text": "h\u00e9llo", "n": [1, 2.5]}}),
        req("tools/call", {"name": "run_shell", "arguments": {"command": "ls src"}}),
        req("tools/call", {"name": "echo", "arguments": {"path": "src/x", "uri": repo_uri}}),
        req("resources/read", {"uri": f"{repo_uri}/src/app.py"}),
        req("resources/read", {"uri": "memo://notes/1"}),
        req("tools/list"),
        req("ping", {}),
        req("prompts/list", {"cursor": "c"}),
        {"jsonrpc": "2.0", "method": "notifications/progress",
         "params": {"progressToken": 1, "progress": 0.5}},
        {"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}},
    ]


INTERESTING = [
    b"\r", b"\n", b"\\", b'"', b"{", b"}", b"[", b"]", b":", b",", b"\x00", b"\x1f", b"\xff",
    b"\xc3", b"\xed\xa0\x80", b"\xe2\x80\xa8", b"\\ud800", b"\\udc00", b"\\u0000", b"NaN",
    b"1e999", b'"id":', b'"method":', b'"Method":"tools/call",', b'"ID":1,', b"\\u017f",
    b"9007199254740993", b"true", b"null", b'"params":{},', b"\xef\xbb\xbf",
]


@st.composite
def fuzz_line(draw: st.DrawFn, base_list: list[dict[str, Any]]) -> bytes:
    message = json.loads(json.dumps(draw(st.sampled_from(base_list))))
    if "id" in message:  # a placeholder, made unique over the run once mutated (unique())
        message["id"] = draw(st.sampled_from(PLACEHOLDERS))
    compact = draw(st.booleans())
    text = json.dumps(message, separators=(",", ":") if compact else None,
                      ensure_ascii=draw(st.booleans()))
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "insert", "random", "delete", "double", "recase",
                                   "deep"]))
        if op == "insert":
            data[at:at] = draw(st.sampled_from(INTERESTING))
        elif op == "random":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        elif op == "double":
            span = data[at:at + draw(st.integers(1, 24))]
            data[at:at] = span
        elif op == "recase":
            data[at:at + 8] = bytes(data[at:at + 8]).swapcase()
        else:
            depth = draw(st.sampled_from([50, 129, 5000, 100_000]))
            data[at:at] = b"[" * depth + b"]" * depth
    return unique(bytes(data).replace(b"\n", b" "))


#: ids of a fixed width: the serial that replaces the zeros keeps every draw's length
PLACEHOLDERS: list[Any] = ["fz-0000000000", 10**12, 2**60, -(10**12)]


#: the unique ids made so far, as JSON
_FRESH: set[str] = set()


def unique(line: bytes) -> bytes:
    """``line`` with its id placeholder (if still whole) made unique over the run."""
    n = next(_SERIAL)
    for old, new in ((b'"fz-0000000000"', f'"fz-{n:010d}"'), (b"1000000000000", str(10**12 + n)),
                     (b"1152921504606846976", str(2**60 + n))):
        if old in line:
            _FRESH.add(new)
            return line.replace(old, new.encode(), 1)
    return line


def request_id(line: bytes) -> str | None:
    """The id (as JSON) a plain JSON reader sees on a request line, when a client can expect
    an answer carrying it: usable, named once at the top level. None otherwise."""
    names: list[list[str]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        names.append([k for k, _ in items])
        return dict(items)

    try:
        message = json.loads(line.decode("utf-8"), object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    if names[-1].count("id") != 1:
        return None
    msg_id = message["id"]
    if isinstance(msg_id, str):
        try:
            msg_id.encode("utf-8")
        except UnicodeEncodeError:
            return None
    elif type(msg_id) is not int or abs(msg_id) > MAX_ID:
        return None
    return json.dumps(msg_id)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
    derandomize=os.environ.get("CI", "") != "",
)
@given(data=st.data())
def test_no_input_ends_the_proxy_and_every_request_gets_one_answer(
    proxy: Proxy, data: st.DataObject
) -> None:
    lines = data.draw(st.lists(fuzz_line(bases(proxy.repo.as_uri())), min_size=1, max_size=6))
    before = Counter(proxy.answered)
    expected: set[str] = set()
    for line in lines:
        proxy.client.send_raw(line)
        found = request_id(line)
        if found is not None:
            expected.add(found)
    sentinel = f"sentinel-{time.monotonic_ns()}"
    proxy.client.send({"jsonrpc": "2.0", "id": sentinel, "method": "tools/list"})
    proxy.drain(expected | {json.dumps(sentinel)}, before, timeout=60)
    # an id made unique is answered exactly once; one a mutation spoilt may recur (in this
    # example or an earlier one), so only its answer is checked
    for found in expected & _FRESH:
        assert proxy.answered[found] - before[found] == 1, (found, lines)
    proxy.unique |= expected & _FRESH
    twice = [i for i in proxy.unique if proxy.answered[i] > 1]
    assert not twice, (twice, lines)
    for line in proxy.server_lines():
        assert all(0x20 <= b < 0x7F for b in line), line[:300]
        assert wire.render(wire.read(line)) == line, line[:300]
