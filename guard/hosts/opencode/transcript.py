"""``guard replay``: the reader of OpenCode's transcripts (:class:`guard.replay.model.Reader`).

Format followed (seen with the pinned CLI, see tests/replay/fixtures/README.md):
OpenCode 1.18: a stored session as ``opencode export SESSION`` prints it
(``{"info": {"directory", ...}, "messages": [{"info", "parts": [...]}]}``), tool
parts ``{"type": "tool", "tool", "callID", "state": {"input", "time"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from guard.hosts.opencode import HOST
from guard.replay.model import ReplayCall, load_document, need, need_object, text_or_none


def _ms(value: Any) -> str | None:
    if not isinstance(value, int | float):
        return None
    return datetime.fromtimestamp(value / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class OpenCode:
    host = HOST.name

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        info = first.get("info")
        return isinstance(info, dict) and "messages" in first and "directory" in info

    def read(self, path: Path) -> Iterator[ReplayCall]:
        text, doc = load_document(path)
        pos = 0
        doc = need_object(doc, path, 1, "an OpenCode export")
        info = need_object(doc.get("info"), path, 1, "'info'")
        messages = doc.get("messages")
        need(isinstance(messages, list), path, 1, "'messages' must be a list")
        assert isinstance(messages, list)
        cwd, session = text_or_none(info.get("directory")), text_or_none(info.get("id"))
        sidechain = bool(info.get("parentID"))  # a sub-agent's session
        for m in messages:
            for part in need_object(m, path, 1, "a message").get("parts") or []:
                if not isinstance(part, dict) or part.get("type") != "tool":
                    continue
                name = part.get("tool")
                need(isinstance(name, str) and bool(name), path, 1,
                     "a tool part without a 'tool' name")
                state = need_object(part.get("state", {}), path, 1, f"tool part {name!r} 'state'")
                time = state.get("time")
                call_id = text_or_none(part.get("callID"))
                if call_id is not None:  # the line of the call, for FILE:LINE
                    found = text.find(json.dumps(call_id), pos)
                    pos = found if found >= 0 else pos
                line = text.count("\n", 0, pos) + 1
                yield ReplayCall(
                    self.host, HOST.dialect, str(name),
                    need_object(state.get("input", {}), path, 1, f"tool part {name!r} input"),
                    cwd, session, _ms(time.get("start")) if isinstance(time, dict) else None,
                    str(path), line, sidechain, call_id,
                )


#: The reader ``guard replay`` uses for this host.
READER = OpenCode()
