"""Scripted model servers on 127.0.0.1, one per wire format the real host CLIs speak.

* :class:`FakeResponses`: OpenAI Responses API (``POST /v1/responses``, SSE), Codex CLI.
* :class:`FakeGemini`: ``POST /v1beta/models/M:streamGenerateContent?alt=sse``, Gemini CLI.
* :class:`FakeChat`: OpenAI chat completions (``POST /v1/chat/completions``, streamed or
  not), OpenCode and aider.

Each agent-loop request is answered with the next step of a script: a tool call,
or a final text once the script is done. The step is read from the request
itself (one past the last of our calls whose result the request carries), never
from a counter side requests could disturb. Every request body is kept, so a test
can read back what the host sent the model as each tool's result.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    """One scripted tool call: ``id``, the tool ``name`` as the host offers it, its ``args``.

    For Codex, ``kind="custom"`` makes a custom tool call (apply_patch), whose
    ``args`` is ``{"input": "<patch>"}``. For aider (no tools), ``name`` is ``"text"``
    and ``args["text"]`` is the whole reply. ``args`` may be a function of the request
    body, for a model that acts on what the conversation told it.
    """

    id: str
    name: str
    args: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
    kind: str = "function"

    def args_for(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.args(body) if callable(self.args) else self.args


@dataclass
class Script:
    steps: list[Call]
    final_text: str = "Done."
    requests: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)


class _Server:
    """A threaded HTTP server on 127.0.0.1 that hands POST bodies to ``answer``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                status, ctype, data = outer.get(self.path)
                self._send(status, ctype, data)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                status, ctype, data = outer.post(self.path, body)
                self._send(status, ctype, data)

            def _send(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def get(self, path: str) -> tuple[int, str, bytes]:
        return 404, "application/json", b'{"error": {"message": "not found"}}'

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        raise NotImplementedError

    def record(self, body: dict[str, Any], results: dict[str, str]) -> int:
        """Keep the request, note the tool results it carries; the step to answer."""
        ids = [s.id for s in self.script.steps]
        with self.lock:
            self.script.requests.append(body)
            self.script.results.update(results)
        done = [ids.index(i) for i in results if i in ids]
        return max(done) + 1 if done else 0

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text_of(v.get("text", v)) if isinstance(v, dict) else _text_of(v)
                         for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return "" if value is None else str(value)


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = b""
    for name, data in events:
        if name:
            out += f"event: {name}\n".encode()
        out += f"data: {json.dumps(data)}\n\n".encode()
    return out


class FakeResponses(_Server):
    """The Responses API as Codex CLI 0.171 calls it (``wire_api = "responses"``)."""

    def get(self, path: str) -> tuple[int, str, bytes]:
        if path.startswith("/v1/models"):
            return 200, "application/json", b'{"models": [], "data": []}'
        return super().get(path)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        if not path.startswith("/v1/responses"):
            return 404, "application/json", b'{"error": {"message": "not found"}}'
        results = {
            str(item["call_id"]): _text_of(item.get("output"))
            for item in body.get("input", [])
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output")
            and "call_id" in item
        }
        step = self.record(body, results)
        if step < len(self.script.steps):
            c = self.script.steps[step]
            args = c.args_for(body)
            if c.kind == "custom":
                item = {"type": "custom_tool_call", "id": f"ctc_{c.id}", "status": "completed",
                        "name": c.name, "input": args["input"], "call_id": c.id}
            else:
                item = {"type": "function_call", "id": f"fc_{c.id}", "status": "completed",
                        "name": c.name, "arguments": json.dumps(args), "call_id": c.id}
        else:
            item = {"type": "message", "role": "assistant", "id": "msg_final",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": self.script.final_text,
                                 "annotations": []}]}
        events: list[tuple[str | None, dict[str, Any]]] = [
            ("response.created", {"type": "response.created",
                                  "response": {"id": f"resp_{step}"}}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {
                "id": f"resp_{step}",
                "usage": {"input_tokens": 10, "input_tokens_details": None,
                          "output_tokens": 5, "output_tokens_details": None,
                          "total_tokens": 15}}}),
        ]
        return 200, "text/event-stream", _sse(events)


class FakeGemini(_Server):
    """The Gemini API as Gemini CLI 0.61 calls it (``GOOGLE_GEMINI_BASE_URL``)."""

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        if ":countTokens" in path:
            return 200, "application/json", b'{"totalTokens": 10}'
        if ":streamGenerateContent" not in path:
            # side calls (model routing, summaries): a short text
            answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                      "finishReason": "STOP"}], "usageMetadata": usage}
            return 200, "application/json", json.dumps(answer).encode()
        results: dict[str, str] = {}
        for content in body.get("contents", []):
            for part in content.get("parts", []) if isinstance(content, dict) else []:
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if isinstance(response, dict):
                    key = str(response.get("id") or response.get("name"))
                    results[key] = _text_of(response.get("response"))
        # Gemini may not echo our ids: count the function responses instead
        ids = [s.id for s in self.script.steps]
        mapped = {ids[i]: text for i, text in enumerate(results.values()) if i < len(ids)}
        step = self.record(body, mapped)
        if body.get("tools") and step < len(self.script.steps):
            c = self.script.steps[step]
            part: dict[str, Any] = {"functionCall": {"name": c.name, "args": c.args_for(body),
                                                     "id": c.id}}
        else:
            part = {"text": self.script.final_text}
        chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": usage}
        return 200, "text/event-stream", _sse([(None, chunk)])


class FakeChat(_Server):
    """OpenAI chat completions, streamed or not (OpenCode, aider through litellm)."""

    def get(self, path: str) -> tuple[int, str, bytes]:
        if path.rstrip("/").endswith("/models"):
            return 200, "application/json", json.dumps(
                {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
        return super().get(path)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, "application/json", b'{"error": {"message": "not found"}}'
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        results = {str(m["tool_call_id"]): _text_of(m.get("content"))
                   for m in messages if m.get("role") == "tool" and "tool_call_id" in m}
        steps = self.script.steps
        if steps and steps[0].name == "text":
            # aider: no tools, its prompt holds example assistant turns; one reply per request
            with self.lock:
                step = len(self.script.requests)
                self.script.requests.append(body)
            text = steps[step].args_for(body)["text"] if step < len(steps) else \
                self.script.final_text
            return self._reply(body, {"role": "assistant", "content": text}, "stop")
        step = self.record(body, results)
        if body.get("tools") and step < len(steps):
            c = steps[step]
            call = {"id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args_for(body))}}
            return self._reply(body, {"role": "assistant", "content": None,
                                      "tool_calls": [call]}, "tool_calls")
        text = self.script.final_text if body.get("tools") else "Guarded run"
        return self._reply(body, {"role": "assistant", "content": text}, "stop")

    def _reply(self, body: dict[str, Any], message: dict[str, Any], finish: str
               ) -> tuple[int, str, bytes]:
        model = str(body.get("model", "fake-model"))
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                      "model": model, "choices": [{"index": 0, "message": message,
                                                   "finish_reason": finish}], "usage": usage}
            return 200, "application/json", json.dumps(answer).encode()
        delta: dict[str, Any] = {"role": "assistant"}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **c} for i, c in
                                   enumerate(message["tool_calls"])]
        else:
            delta["content"] = message["content"]
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": model}
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
             "usage": usage},
        ]
        data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
        return 200, "text/event-stream", data + b"data: [DONE]\n\n"
