"""A scripted Anthropic Messages API on 127.0.0.1, streaming server-sent events.

The agent loop's requests (those that offer tools) get the next step of a
script: a ``tool_use`` block, or a final text once the script is done. The
step is the number of assistant turns already in the conversation, so each
request is answered from its own content, not from a counter that side
requests could disturb. Requests without tools (titles, summaries, command
classification) get a short text. Every request body is kept for assertions.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One scripted tool call. ``input`` may be a function of the request body: a scripted
    model that reads something from the conversation (e.g. the path it was told)."""

    id: str
    name: str
    input: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]

    def input_for(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.input(body) if callable(self.input) else self.input


@dataclass
class Script:
    steps: list[ToolUse]
    final_text: str = "Done."
    requests: list[dict[str, Any]] = field(default_factory=list)

    def tool_results(self) -> dict[str, str]:
        """tool_use_id -> the text Claude Code sent back as that tool's result."""
        out: dict[str, str] = {}
        for body in self.requests:
            for msg in body.get("messages", []):
                content = msg.get("content")
                if msg.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out[block["tool_use_id"]] = _text(block.get("content"))
        return out


def conversation_text(body: dict[str, Any]) -> str:
    """Everything the model is shown in one request: system prompt, messages, tool results."""
    parts: list[str] = [_text(body.get("system"))]
    for msg in body.get("messages", []):
        content = msg.get("content")
        parts.append(_text(content))
        if isinstance(content, list):
            parts += [_text(b.get("content")) for b in content if isinstance(b, dict)]
    return "\n".join(parts)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _message(blocks: list[dict[str, Any]], stop_reason: str, model: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        }
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            {"type": "content_block_start", "index": i, "content_block": start},
            {"type": "content_block_delta", "index": i, "delta": delta},
            {"type": "content_block_stop", "index": i},
        ]
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return events


def _plain(blocks: list[dict[str, Any]], stop_reason: str, model: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


class FakeAnthropic:
    """``with FakeAnthropic(script) as api: ... api.url``"""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._json(
                    404,
                    {"type": "error", "error": {"type": "not_found_error", "message": self.path}},
                )

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if "/count_tokens" in self.path:
                    self._json(200, {"input_tokens": 10})
                    return
                if not self.path.startswith("/v1/messages"):
                    self._json(
                        404,
                        {
                            "type": "error",
                            "error": {"type": "not_found_error", "message": self.path},
                        },
                    )
                    return
                with outer.lock:
                    outer.script.requests.append(body)
                blocks, stop = outer.reply(body)
                model = str(body.get("model", "claude-fake"))
                if body.get("stream"):
                    data = _sse(_message(blocks, stop, model))
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self._json(200, _plain(blocks, stop, model))

            def _json(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        if not body.get("tools"):
            return [{"type": "text", "text": "ok"}], "end_turn"
        step = self.next_step(body)
        if step < len(self.script.steps):
            t = self.script.steps[step]
            block = {"type": "tool_use", "id": t.id, "name": t.name, "input": t.input_for(body)}
            return [block], "tool_use"
        return [{"type": "text", "text": self.script.final_text}], "end_turn"

    def next_step(self, body: dict[str, Any]) -> int:
        """One past the step whose tool_result came last; 0 before any result."""
        ids = [s.id for s in self.script.steps]
        last = -1
        for msg in body.get("messages", []):
            content = msg.get("content")
            if msg.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("tool_use_id") in ids:
                    last = max(last, ids.index(block["tool_use_id"]))
        return last + 1

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
