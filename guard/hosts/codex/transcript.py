"""``guard replay``: the reader of Codex's transcripts (:class:`guard.replay.model.Reader`).

Format followed (seen with the pinned CLI, see tests/replay/fixtures/README.md):
Codex 0.171 rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``):
``response_item`` records whose payload is a ``function_call`` (JSON ``arguments``)
or a ``custom_tool_call`` (text ``input``, apply_patch); the cwd comes from the
``session_meta`` record and each ``turn_context``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from guard.hosts.codex import HOST
from guard.replay.model import (
    ReplayCall,
    TranscriptError,
    json_lines,
    need,
    need_object,
    text_or_none,
)


class Codex:
    host = HOST.name

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        return first.get("type") == "session_meta" and isinstance(first.get("payload"), dict)

    def read(self, path: Path) -> Iterator[ReplayCall]:
        cwd: str | None = None
        session: str | None = None
        sidechain = False
        for n, rec in json_lines(path):
            kind = rec.get("type")
            payload = rec.get("payload")
            if kind in ("session_meta", "turn_context"):
                p = need_object(payload, path, n, f"a {kind} record's 'payload'")
                cwd = text_or_none(p.get("cwd")) or cwd
                if kind == "session_meta":
                    session = text_or_none(p.get("id")) or text_or_none(p.get("session_id"))
                    sidechain = isinstance(p.get("source"), dict)  # a sub-agent's thread
                continue
            if kind != "response_item" or not isinstance(payload, dict):
                continue
            item = payload.get("type")
            if item not in ("function_call", "custom_tool_call", "local_shell_call"):
                continue
            name = payload.get("name") or ("local_shell" if item == "local_shell_call" else None)
            need(isinstance(name, str) and bool(name), path, n, f"a {item} without a 'name'")
            args: Any
            if item == "function_call":
                raw = payload.get("arguments", "{}")
                try:
                    args = json.loads(raw) if isinstance(raw, str) else raw
                except json.JSONDecodeError as exc:
                    raise TranscriptError(
                        f"{path}:{n}: function_call {name!r}: 'arguments' is not JSON: {exc.msg}"
                    ) from None
            elif item == "custom_tool_call":
                args = {"input": payload.get("input", "")}
            else:
                args = payload.get("action", {})
            yield ReplayCall(
                self.host, HOST.dialect, str(name),
                need_object(args, path, n, f"{item} {name!r} arguments"),
                cwd, session, text_or_none(rec.get("timestamp")), str(path), n, sidechain,
                text_or_none(payload.get("call_id")),
            )


#: The reader ``guard replay`` uses for this host.
READER = Codex()
