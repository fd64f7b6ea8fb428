"""``guard replay``: the reader of Gemini's transcripts (:class:`guard.replay.model.Reader`).

Format followed (seen with the pinned CLI, see tests/replay/fixtures/README.md):
Gemini CLI 0.61 chat JSONL (``~/.gemini/tmp/<project>/chats/session-*.jsonl``):
``type: "gemini"`` records with ``toolCalls`` (``name``, ``args``); the cwd is the
first workspace directory of the session context (else ``.project_root`` beside
``chats/``). The older one-document ``session-*.json`` is read as a whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from guard.hosts.gemini import HOST
from guard.replay.model import (
    ReplayCall,
    json_lines,
    load_document,
    need,
    need_object,
    text_or_none,
)

_WORKSPACE = re.compile(r"Workspace Directories:\*\*\s*\n\s*- (\S[^\n]*)")


class Gemini:
    host = HOST.name

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        return "projectHash" in first and "sessionId" in first

    def _project_root(self, path: Path) -> str | None:
        marker = path.parent.parent / ".project_root"
        try:
            return marker.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def _messages(self, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
        if path.suffix == ".json":  # the older format: one JSON document
            _, doc = load_document(path)
            chat = need_object(doc, path, 1, "the chat")
            yield 1, {k: v for k, v in chat.items() if k != "messages"}
            for msg in doc.get("messages") or []:
                if isinstance(msg, dict):
                    yield 1, msg
            return
        for n, rec in json_lines(path):
            if isinstance(rec.get("$set"), dict):  # an update: messages may be set in it
                for msg in rec["$set"].get("messages") or []:
                    if isinstance(msg, dict):
                        yield n, msg
                continue
            yield n, rec

    def read(self, path: Path) -> Iterator[ReplayCall]:
        cwd = self._project_root(path)
        session: str | None = None
        for n, rec in self._messages(path):
            if "projectHash" in rec:
                session = text_or_none(rec.get("sessionId"))
                continue
            if rec.get("type") == "user" and cwd is None:
                found = _WORKSPACE.search(json.dumps(rec.get("content"), ensure_ascii=False)
                                          .replace("\\n", "\n"))
                if found:
                    cwd = found.group(1).strip()
                continue
            calls = rec.get("toolCalls")
            if rec.get("type") != "gemini" or not isinstance(calls, list):
                continue
            for call in calls:
                c = need_object(call, path, n, "a toolCalls entry")
                name = c.get("name")
                need(isinstance(name, str) and bool(name), path, n,
                     "a toolCalls entry without a 'name' string")
                yield ReplayCall(
                    self.host, HOST.dialect, str(name), need_object(c.get("args", {}), path, n,
                                                         f"tool call {name!r} 'args'"),
                    cwd, session,
                    text_or_none(c.get("timestamp")) or text_or_none(rec.get("timestamp")),
                    str(path), n, False, text_or_none(c.get("id")),
                )


#: The reader ``guard replay`` uses for this host.
READER = Gemini()
