"""``guard replay``: the reader of ClaudeCode's transcripts (:class:`guard.replay.model.Reader`).

Format followed (seen with the pinned CLI, see tests/replay/fixtures/README.md):
Claude Code 2.1 session JSONL (``~/.claude/projects/<project>/<session>.jsonl``):
records of ``type: "assistant"`` whose ``message.content`` holds ``tool_use``
blocks; each record carries ``cwd``, ``sessionId``, ``timestamp``, ``isSidechain``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from guard.hosts.claude_code import HOST
from guard.replay.model import ReplayCall, json_lines, need, need_object, text_or_none


class ClaudeCode:
    host = HOST.name

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        return "sessionId" in first and ("parentUuid" in first or first.get("type") in (
            "queue-operation", "summary", "user", "assistant", "system", "file-history-snapshot"))

    def read(self, path: Path) -> Iterator[ReplayCall]:
        for n, rec in json_lines(path):
            if rec.get("type") != "assistant":
                continue
            msg = need_object(rec.get("message"), path, n, "an assistant record's 'message'")
            content = msg.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict) or block.get("type") != "tool_use":
                    continue
                name = block.get("name")
                need(isinstance(name, str) and bool(name), path, n,
                     "a tool_use block without a 'name' string")
                yield ReplayCall(
                    self.host, HOST.dialect, str(name),
                    need_object(block.get("input", {}), path, n, f"tool_use {name!r} 'input'"),
                    text_or_none(rec.get("cwd")), text_or_none(rec.get("sessionId")),
                    text_or_none(rec.get("timestamp")),
                    str(path), n, bool(rec.get("isSidechain")), text_or_none(block.get("id")),
                )


#: The reader ``guard replay`` uses for this host.
READER = ClaudeCode()
