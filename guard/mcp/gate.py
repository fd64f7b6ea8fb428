"""The MCP side of the gate: what a ``tools/call`` or ``resources/read`` is, and its records.

The proxy builds a :class:`~guard.effects.ToolCall` for each message it must
check and asks :class:`guard.gate.Gate` for a verdict; this module supplies
the MCP parts the gate needs:

* :func:`tool_call` / :func:`resource_call`: the message as a ``ToolCall``
  (dialect ``mcp`` for tools, ``mcp-resource`` for ``resources/read``);
* :class:`McpAnalyser`: its effects. guard's own planning tools are the tool
  alone; a ``file://`` resource is a read of that path; other tools go to the
  MCP dialect (:mod:`guard.mcp.effects`), with relative paths refused when the
  server would resolve them elsewhere;
* :class:`McpSink`: the proxy's audit sink. Each verdict record goes to the
  project's audit log and, as a ``decision`` event, to the session's event log
  (``guard events``), written in order by one thread so that the proxy's loop
  never waits on the disk; a write that fails is logged on stderr.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from guard import audit
from guard.effects import PATH_KINDS, Action, Effect, GuardError, ToolCall
from guard.mcp.effects import EffectsFn
from guard.paths import Roots
from guard.planning import events
from guard.planning.session import Session
from guard.planning.tools import TOOL_NAMES

TOOLS = "mcp"
RESOURCES = "mcp-resource"


def tool_call(name: str, arguments: Any, cwd: str, session: str | None) -> ToolCall:
    """A ``tools/call``; arguments that are not an object are refused by the analysis."""
    return ToolCall(TOOLS, name, {} if arguments is None else arguments, cwd, session)


def resource_call(uri: str, cwd: str, session: str | None) -> ToolCall:
    return ToolCall(RESOURCES, "resources/read", {"uri": uri}, cwd, session)


def is_file_uri(uri: str) -> bool:
    return urlsplit(uri).scheme.lower() == "file"


class McpAnalyser:
    """The effects of what the proxy checks (see the module docstring)."""

    def __init__(self, effects_fn: EffectsFn, relative_mismatch: Callable[[], str | None]):
        self.effects_fn = effects_fn
        self.relative_mismatch = relative_mismatch

    def __call__(self, call: ToolCall) -> list[Effect]:
        if not isinstance(call.input, Mapping):
            raise GuardError(
                f"tools/call {call.name!r}: arguments must be a JSON object,"
                f" got {type(call.input).__name__}"
            )
        if call.dialect == RESOURCES:
            uri = str(call.input["uri"])
            parts = urlsplit(uri)
            if parts.netloc not in ("", "localhost"):
                raise GuardError(f"file URI {uri!r} names a remote host")
            return [
                Effect.tool("read", "mcp resources/read"),
                Effect.read(unquote(parts.path), f"resources/read {uri}"),
            ]
        if call.name in TOOL_NAMES:
            return [Effect.tool(call.name, "guard planning tool")]
        effects = self.effects_fn(call.name, call.input, call.cwd or os.getcwd())
        self._check_relative(effects)
        return effects

    def _check_relative(self, effects: list[Effect]) -> None:
        """Refuse relative paths when guard and the server would resolve them differently."""
        mismatch = self.relative_mismatch()
        if mismatch is None:
            return
        for e in effects:
            target = e.target
            if e.kind in PATH_KINDS and target and not target.startswith(("/", "~")):
                raise GuardError(f"relative path {target!r}: {mismatch}; give an absolute path")


@dataclass
class McpStats:
    forwarded: int = 0
    allowed: int = 0
    denied: int = 0
    asked: int = 0
    planning: int = 0
    decisions: list[dict[str, Any]] = field(default_factory=list)


class McpSink:
    """The proxy's audit sink: stderr, the stats, the audit log and the session's events."""

    def __init__(
        self,
        session: Session,
        stats: McpStats,
        log: Callable[[str], None],
        *,
        verbose: bool = False,
        audit_allowed: bool = True,
        audit_path: Path | None = None,
    ) -> None:
        self.session = session
        self.stats = stats
        self.log = log
        self.verbose = verbose
        self.audit_allowed = audit_allowed
        self.audit_path = audit_path
        self._queue: queue.Queue[tuple[dict[str, Any], Roots | None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def write(self, record: Mapping[str, Any], roots: Roots | None = None) -> None:
        action = str(record.get("decision"))
        agent, tool = record.get("agent", "?"), record.get("tool_name", "?")
        entry = {
            "agent": agent,
            "tool": tool,
            "decision": action,
            "reason": record.get("reason"),
            "rule": record.get("rule"),
        }
        if len(self.stats.decisions) < 10000:
            self.stats.decisions.append(entry)
        if action != "allow" or self.verbose:
            effect = record.get("effect")
            target = f" {effect['kind']} {effect['target']}" if isinstance(effect, dict) else ""
            reason, rule = record.get("reason"), record.get("rule")
            self.log(f"{action} {tool}{target} for {agent}: {reason} [{rule}]")
        if action == "allow" and not self.audit_allowed:
            return
        item = (dict(record), roots)
        if self._thread is not None:
            self._queue.put(item)  # written in order by the audit thread
        else:
            self._persist(item)

    def _persist(self, item: tuple[dict[str, Any], Roots | None]) -> None:
        record, roots = item
        try:
            audit.append(record, self.audit_path, roots=roots or Roots.discover(record.get("cwd")))
        except Exception as exc:
            self.log(f"cannot write the audit log: {exc}")
        try:
            events.publish(self.session, session_event(record))
        except Exception as exc:
            self.log(f"cannot write the session's event log: {exc}")

    def _worker(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._persist(item)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._worker, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(30)
            if thread.is_alive():
                self.log(f"audit log: {self._queue.qsize()} decisions not yet written")
            self._thread = None


def session_event(record: Mapping[str, Any]) -> events.Decision:
    """A verdict record as the session's ``decision`` event (what ``guard events`` shows)."""
    action = str(record.get("decision"))
    effect = record.get("effect")
    return events.Decision(
        action=Action.ALLOW if action == "allow_confined" else Action(action),
        reason=str(record.get("reason", "")),
        rule=str(record.get("rule", "")),
        agent=record.get("agent"),
        tool=record.get("tool_name"),
        effect=effect if isinstance(effect, dict) else None,
        source=str(record.get("source", "")),
    )
