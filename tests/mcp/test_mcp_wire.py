"""guard/mcp/wire.py: what the proxy refuses to read, and the line it forwards instead.

The rules themselves; their effect on real servers is tests/e2e/test_mcp_parsers.py,
and the proxy under random bytes is test_mcp_fuzz.py.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pydantic
import pytest

from guard.analysis import effects_for, guess_effects
from guard.analysis import mcp as mcp_dialect
from guard.analysis.dialect import ToolCall
from guard.mcp import wire
from guard.mcp.file_uris import file_uri_path

REQUEST = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}}}'


def refused(line: bytes) -> wire.Refused:
    with pytest.raises(wire.Refused) as caught:
        wire.read(line)
    return caught.value


def test_a_plain_request_is_read_and_rendered_as_canonical_ascii() -> None:
    line = b' {"jsonrpc": "2.0", "id": "a", "method": "m", "params": {"t": "\xc3\xa9\xe2\x80\xa8"}}'
    message = wire.read(line)
    assert message["params"]["t"] == "\u00e9\u2028"
    line = wire.render(message)
    assert line == b'{"jsonrpc":"2.0","id":"a","method":"m","params":{"t":"\\u00e9\\u2028"}}'
    assert all(0x20 <= b < 0x7F for b in line)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (REQUEST.replace(b',"params"', b',\r"params"'), "carriage return"),
        (REQUEST.replace(b'"x"', b'"\xff"'), "not UTF-8"),
        (REQUEST.replace(b'"x"', b'"\xed\xa0\x80"'), "not UTF-8"),  # a surrogate in UTF-8
        (REQUEST.replace(b'"x"', b'"\\ud800"'), "lone surrogate"),
        (REQUEST.replace(b'"x"', b'"\\udc00\\ud800"'), "lone surrogate"),
        (REQUEST.replace(b'"arguments"', b'"name":"y","arguments"'), "twice"),
        (REQUEST.replace(b'"arguments"', b'"Name":"y","arguments"'), "case"),
        (REQUEST.replace(b'"params"', b'"Params"'), "case"),
        (REQUEST.replace(b'"params"', b'"param\\u017f"'), "case"),  # long s folds to s
        (REQUEST.replace(b"{}}}", b'{"path":"a","PATH":"b"}}}'), "case"),
        (REQUEST.replace(b"{}}}", b'{"Path":"b"}}}'), "case"),
        (REQUEST.replace(b"{}}}", b'{"a":1,"A":2}}}'), "only in case"),
        (REQUEST.replace(b"{}}}", b'{"n":NaN}}}'), "NaN"),
        (REQUEST.replace(b"{}}}", b'{"n":1e400}}}'), "too large"),
        (REQUEST.replace(b"{}}}", b"[" * 200 + b"]" * 200 + b"}}"), "deeper"),
        (REQUEST.replace(b'"id":7', b'"id":{"a":1}'), "the id"),
        (REQUEST.replace(b'"id":7', b'"id":[7]'), "the id"),
        (REQUEST.replace(b'"id":7', b'"id":true'), "the id"),
        (REQUEST.replace(b'"id":7', b'"id":7.0'), "the id"),
        (REQUEST.replace(b'"id":7', b'"id":null'), "the id"),
        (REQUEST.replace(b'"id":7', b'"id":9007199254740993'), "the id"),
        (REQUEST.replace(b'"2.0"', b'"1.0"'), "jsonrpc"),
        (REQUEST.replace(b'"params"', b'"result":{},"params"'), "unexpected member"),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":[1]}', "params"),
        (b'{"jsonrpc":"2.0","id":3,"result":[]}', "result"),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":"x","message":"m"}}', "error"),
        (b'{"jsonrpc":"2.0","id":3}', "result or an error"),
        (b'{"jsonrpc":"2.0"}', "method"),
        (b"[" + REQUEST + b"]", "batches"),
        (b'"text"', "JSON object"),
    ],
)
def test_lines_other_readers_could_read_differently_are_refused(line: bytes, says: str) -> None:
    assert says in refused(line).reason


def test_a_refused_request_keeps_its_id_when_it_can_be_read_safely() -> None:
    deep = REQUEST.replace(b"{}}}", b"[" * 100_000 + b"]" * 100_000 + b"}}")
    assert (refused(deep).kind, refused(deep).msg_id) == ("request", 7)
    crlf = REQUEST.replace(b",", b",\r", 1)
    assert (refused(crlf).kind, refused(crlf).msg_id) == ("request", 7)
    twice = REQUEST.replace(b'"id":7', b'"id":7,"id":8')
    assert (refused(twice).kind, refused(twice).msg_id) == ("request", None)
    note = b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":1,"a":2}}'
    assert refused(note).kind == "notification"
    answer = b'{"jsonrpc":"2.0","id":"s1","result":{"a":1,"A":2}}'
    assert (refused(answer).kind, refused(answer).msg_id) == ("response", "s1")
    broken = b'{"jsonrpc":"2.0","id":9,"method":"x", BROKEN'
    assert (refused(broken).code, refused(broken).msg_id) == (wire.PARSE_ERROR, None)


def test_depth_is_measured_without_recursion_and_skips_strings() -> None:
    assert wire.depth(b"[" * 1_000_000 + b"]" * 1_000_000) == 1_000_000
    assert wire.depth(b'["' + b"[" * 500 + b'"]') <= wire.MAX_DEPTH
    wire.read(b'{"jsonrpc":"2.0","method":"n","params":{"s":"' + b"[{" * 300 + b'"}}')


def test_a_carriage_return_line_end_is_a_line_end() -> None:
    from guard.mcp.jsonrpc import line_body

    assert line_body(REQUEST + b"\r") == REQUEST
    assert b"\r" in line_body(REQUEST + b"\r\r")  # the first CR is bare: refused later


def _schema_names() -> set[str]:
    import importlib

    names: set[str] = set()
    for module in ("mcp_types._v2025_11_25", "mcp_types._v2026_07_28", "mcp_types.jsonrpc"):
        for _, cls in inspect.getmembers(importlib.import_module(module), inspect.isclass):
            if issubclass(cls, pydantic.BaseModel):
                names.update(f.alias or n for n, f in cls.model_fields.items())
    return names


def test_the_vocabulary_holds_every_name_of_the_mcp_schema() -> None:
    """Every property name the official SDK's types define is one a server may look up."""
    missing = _schema_names() - wire.VOCABULARY
    assert not missing, f"add to guard.mcp.wire.VOCABULARY: {sorted(missing)}"


class _Recorder(Mapping[str, Any]):
    """Arguments that remember every key looked up."""

    def __init__(self, data: dict[str, Any], seen: set[str]) -> None:
        self.data, self.seen = data, seen

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return self.data[key]

    def __contains__(self, key: object) -> bool:
        self.seen.add(str(key))
        return key in self.data

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return self.data.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_the_vocabulary_holds_every_argument_name_guards_analysis_reads() -> None:
    """A key guard looks up that a case-insensitive server could find under another case
    would be read by the server and missed by guard: every key the MCP dialect and the
    guesses for unknown tools look up must be in the vocabulary."""
    seen: set[str] = set()
    full = {"path": "a", "paths": ["a"], "source": "a", "destination": "b", "edits": [],
            "pattern": "*", "content": "x", "command": "ls", "file_path": "f"}
    for name in mcp_dialect.TOOLS:
        for args in ({}, full, {"path": "a", "edits": [], "dryRun": True}):
            with contextlib.suppress(Exception):  # malformed on purpose: only the lookups count
                effects_for("mcp", name, _Recorder(dict(args), seen), "/")
    guess_effects(ToolCall("mcp", "unknown_tool", _Recorder(dict(full), seen), "/"))
    assert seen, "the recorder saw nothing: the test does not reach the analysis"
    missing = sorted(seen - wire.VOCABULARY)
    assert not missing, f"add to guard.mcp.wire.VOCABULARY: {missing}"


def test_salvage_never_takes_a_nested_id() -> None:
    line = b'{"jsonrpc":"2.0","params":{"id":5},"method":"x","x":' + b"[" * 300 + b"]" * 300 + b"}"
    assert wire.salvage(line) == ("notification", None, "x")


def test_render_round_trips_through_a_plain_decoder() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"t": "a\r\n\u2028\U0001f600\x00\\\""}}
    assert json.loads(wire.render(message)) == message
    assert wire.read(wire.render(message)) == message


@pytest.mark.parametrize(
    "uri",
    ["file:///r/src\\..\\.env", "file:///r/src/../.env", "file:///r/%2e%2e/x", "file:///r/.%2E/x",
     "file://evil/x", "file:/r/.env", "file:r/.env", "file:////r", "file:///r//x",
     "file:///r/a%2Fb", "file:///r/a%5cb", "file:///C:/x", "file:///c|/x", "file:///r/.env?x",
     "file:///r/.env#f", " file:///x", "file:///r\t/x", "file:///a%ff", "file:///a%zz",
     "file:///r/%00", "file://localhost:1/x", "file://user@localhost/x"],
)
def test_file_uris_that_parsers_read_differently_are_refused(uri: str) -> None:
    from guard.effects import GuardError

    with pytest.raises(GuardError, match="file URI"):
        file_uri_path(uri)


def test_file_uris_in_the_one_form_are_read() -> None:
    assert file_uri_path("file:///r/.env") == "/r/.env"
    assert file_uri_path("FILE://LocalHost/r/a%20b/") == "/r/a b"
    assert file_uri_path("file:///caf%C3%A9/%25") == "/caf\u00e9/%"
