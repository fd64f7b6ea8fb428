"""One reader per host transcript format, behind :class:`guard.replay.model.Reader`.

Formats followed (seen here with the pinned CLIs, see tests/replay/fixtures/README.md):

- Claude Code 2.1 session JSONL (``~/.claude/projects/<project>/<session>.jsonl``):
  records of ``type: "assistant"`` whose ``message.content`` holds ``tool_use``
  blocks; each record carries ``cwd``, ``sessionId``, ``timestamp``, ``isSidechain``.
- Codex 0.171 rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``):
  ``response_item`` records whose payload is a ``function_call`` (JSON ``arguments``)
  or a ``custom_tool_call`` (text ``input``, apply_patch); the cwd comes from the
  ``session_meta`` record and each ``turn_context``.
- Gemini CLI 0.61 chat JSONL (``~/.gemini/tmp/<project>/chats/session-*.jsonl``):
  ``type: "gemini"`` records with ``toolCalls`` (``name``, ``args``); the cwd is the
  first workspace directory of the session context (else ``.project_root`` beside
  ``chats/``). The older one-document ``session-*.json`` is read as a whole.
- OpenCode 1.18: a stored session as ``opencode export SESSION`` prints it
  (``{"info": {"directory", ...}, "messages": [{"info", "parts": [...]}]}``), tool
  parts ``{"type": "tool", "tool", "callID", "state": {"input", "time"}}``.
- guard's audit log (``<data>/audit/<project>.jsonl``): the connections the egress
  proxy decided (``dialect: "egress"`` records with their input under ``egress``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from guard import hosts
from guard.replay.model import ReplayCall, TranscriptError, json_lines, load_document, need


def _obj(value: Any, path: Path, line: int, what: str) -> dict[str, Any]:
    need(isinstance(value, dict), path, line, f"{what} must be a JSON object")
    assert isinstance(value, dict)
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class ClaudeCode:
    host = hosts.CLAUDE_CODE.name

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        return "sessionId" in first and ("parentUuid" in first or first.get("type") in (
            "queue-operation", "summary", "user", "assistant", "system", "file-history-snapshot"))

    def read(self, path: Path) -> Iterator[ReplayCall]:
        for n, rec in json_lines(path):
            if rec.get("type") != "assistant":
                continue
            msg = _obj(rec.get("message"), path, n, "an assistant record's 'message'")
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
                    self.host, hosts.CLAUDE_CODE.dialect, str(name),
                    _obj(block.get("input", {}), path, n, f"tool_use {name!r} 'input'"),
                    _str(rec.get("cwd")), _str(rec.get("sessionId")), _str(rec.get("timestamp")),
                    str(path), n, bool(rec.get("isSidechain")), _str(block.get("id")),
                )


class Codex:
    host = hosts.CODEX.name

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
                p = _obj(payload, path, n, f"a {kind} record's 'payload'")
                cwd = _str(p.get("cwd")) or cwd
                if kind == "session_meta":
                    session = _str(p.get("id")) or _str(p.get("session_id"))
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
                self.host, hosts.CODEX.dialect, str(name),
                _obj(args, path, n, f"{item} {name!r} arguments"),
                cwd, session, _str(rec.get("timestamp")), str(path), n, sidechain,
                _str(payload.get("call_id")),
            )


_WORKSPACE = re.compile(r"Workspace Directories:\*\*\s*\n\s*- (\S[^\n]*)")


class Gemini:
    host = hosts.GEMINI.name

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
            yield 1, {k: v for k, v in _obj(doc, path, 1, "the chat").items() if k != "messages"}
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
                session = _str(rec.get("sessionId"))
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
                c = _obj(call, path, n, "a toolCalls entry")
                name = c.get("name")
                need(isinstance(name, str) and bool(name), path, n,
                     "a toolCalls entry without a 'name' string")
                yield ReplayCall(
                    self.host, hosts.GEMINI.dialect, str(name), _obj(c.get("args", {}), path, n,
                                                         f"tool call {name!r} 'args'"),
                    cwd, session, _str(c.get("timestamp")) or _str(rec.get("timestamp")),
                    str(path), n, False, _str(c.get("id")),
                )


def _ms(value: Any) -> str | None:
    if not isinstance(value, int | float):
        return None
    return datetime.fromtimestamp(value / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class OpenCode:
    host = hosts.OPENCODE.name

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        info = first.get("info")
        return isinstance(info, dict) and "messages" in first and "directory" in info

    def read(self, path: Path) -> Iterator[ReplayCall]:
        text, doc = load_document(path)
        pos = 0
        doc = _obj(doc, path, 1, "an OpenCode export")
        info = _obj(doc.get("info"), path, 1, "'info'")
        messages = doc.get("messages")
        need(isinstance(messages, list), path, 1, "'messages' must be a list")
        assert isinstance(messages, list)
        cwd, session = _str(info.get("directory")), _str(info.get("id"))
        sidechain = bool(info.get("parentID"))  # a sub-agent's session
        for m in messages:
            for part in _obj(m, path, 1, "a message").get("parts") or []:
                if not isinstance(part, dict) or part.get("type") != "tool":
                    continue
                name = part.get("tool")
                need(isinstance(name, str) and bool(name), path, 1,
                     "a tool part without a 'tool' name")
                state = _obj(part.get("state", {}), path, 1, f"tool part {name!r} 'state'")
                time = state.get("time")
                call_id = _str(part.get("callID"))
                if call_id is not None:  # the line of the call, for FILE:LINE
                    found = text.find(json.dumps(call_id), pos)
                    pos = found if found >= 0 else pos
                line = text.count("\n", 0, pos) + 1
                yield ReplayCall(
                    self.host, hosts.OPENCODE.dialect, str(name),
                    _obj(state.get("input", {}), path, 1, f"tool part {name!r} input"),
                    cwd, session, _ms(time.get("start")) if isinstance(time, dict) else None,
                    str(path), line, sidechain, call_id,
                )


class GuardAudit:
    """guard's own audit log: the connections its egress proxy decided. They are the
    records that keep their call's input (under ``egress``); every other record is
    skipped (a hook's record leaves the tool input out: it may hold secrets)."""

    host = "audit"

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        return "ts" in first and "source" in first and first.get("type") in (
            "verdict", "violation", "notice")

    def read(self, path: Path) -> Iterator[ReplayCall]:
        for n, rec in json_lines(path):
            data = rec.get("egress")
            if rec.get("type") != "verdict" or rec.get("dialect") != "egress" or \
                    not isinstance(data, dict):
                continue
            name = rec.get("tool_name")
            need(isinstance(name, str) and bool(name), path, n,
                 "an egress record without a 'tool_name' string")
            yield ReplayCall(
                self.host, "egress", str(name), data, _str(rec.get("cwd")),
                _str(rec.get("session_id")), _str(rec.get("ts")), str(path), n,
            )


#: Per host of :mod:`guard.hosts` with a reader (in the registry's order), then guard's audit log.
READERS: dict[str, ClaudeCode | Codex | Gemini | OpenCode | GuardAudit] = {
    **{h.name: hosts.load(h.reader)() for h in hosts.HOSTS if h.reader},
    GuardAudit.host: GuardAudit(),
}
HOSTS: tuple[str, ...] = tuple(READERS)
