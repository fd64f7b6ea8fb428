"""The MCP side of the gate: what a ``tools/call`` or ``resources/read`` is, and its records.

The proxy builds a :class:`~guard.effects.ToolCall` for each message it must
check and asks :class:`guard.gate.Gate` for a verdict; this module supplies
the MCP parts the gate needs:

* :func:`tool_call` / :func:`resource_call`: the message as a ``ToolCall``
  (dialect ``mcp`` for tools, ``mcp-resource`` for ``resources/read``);
* :class:`McpGate`: the proxy's gate, a :class:`guard.gate.Gate` with the proxy's own
  two readings. Its effects (:meth:`McpGate.effects`): guard's own planning tools are
  the tool alone; a ``file://`` resource is a read of that path; other tools go to the
  MCP dialect (:mod:`guard.mcp.call_effects`), with relative paths refused when the
  server would resolve them elsewhere. Its session's mode
  (:meth:`McpGate.session_mode`): the proxy's own session, re-read when its file changed;
* :class:`McpSink`: the proxy's audit sink. Each verdict record goes to the
  project's audit log and, as a ``decision`` event, to the session's event log
  (``guard events``), queued while the call is decided and written (in order,
  in batches, by :class:`guard.audit.buffered.BufferedWriter`) once the call has been
  forwarded, while the server works; fsync is left to a thread of the writer.
  The router holds a checked call's answer until its record is written, and a
  write that fails withholds the answer and refuses later calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from guard.analysis import is_guessed
from guard.audit import logfile
from guard.audit.buffered import BufferedWriter
from guard.audit.logfile import Appender
from guard.effects import PATH_KINDS, Action, Effect, GuardError, ToolCall
from guard.fleet.syslog import ship
from guard.gate import Gate
from guard.mcp.bridge import PlanningBridge
from guard.mcp.call_effects import EffectsFn
from guard.mcp.file_uris import file_uri_path, readings
from guard.paths import Roots
from guard.planning import event_bus
from guard.planning.found import ModeFound
from guard.planning.session import Session
from guard.planning.tools import TOOL_NAMES

TOOLS = "mcp"
RESOURCES = "mcp-resource"


def tool_call(name: str, arguments: Any, cwd: str, session: str | None) -> ToolCall:
    """A ``tools/call``; arguments that are not an object are refused by the analysis."""
    return ToolCall(TOOLS, name, {} if arguments is None else arguments, cwd, session)


def resource_call(uri: str, cwd: str, session: str | None) -> ToolCall:
    return ToolCall(RESOURCES, "resources/read", {"uri": uri}, cwd, session)


class McpProxySide(Protocol):
    """What the proxy's gate reads of its proxy at each call (:class:`McpGate`)."""

    #: the MCP dialect's reading of a tool's arguments
    effects_fn: EffectsFn
    #: why relative paths are refused (guard and the server resolve them differently), or None
    relative_base_mismatch: str | None
    #: the proxy's planning session
    bridge: PlanningBridge


#: the session's mode as the gate reads it, one answer per mode (the same object while the
#: mode stays, so the gate's agent memo finds it at once)
_FOUND: dict[str, ModeFound] = {}


@dataclass(frozen=True)
class McpGate(Gate):
    """The MCP proxy's gate: the gate's pipeline, with the proxy's reading of its calls
    (:meth:`effects`) and its own session's mode (:meth:`session_mode`)."""

    proxy: McpProxySide = field(kw_only=True, compare=False, repr=False)

    def effects(self, call: ToolCall) -> list[Effect]:
        """The effects of what the proxy checks (see the module docstring)."""
        if not isinstance(call.input, Mapping):
            raise GuardError(
                f"tools/call {call.name!r}: arguments must be a JSON object,"
                f" got {type(call.input).__name__}"
            )
        if call.dialect == RESOURCES:
            uri = str(call.input["uri"])
            return [
                Effect.tool("read", "mcp resources/read"),
                Effect.read(file_uri_path(uri), f"resources/read {uri}"),
            ]
        if call.name in TOOL_NAMES:
            return [Effect.tool(call.name, "guard planning tool")]
        cwd = call.cwd or os.getcwd()
        effects = self.proxy.effects_fn(call.name, call.input, cwd)
        effects = readings(effects, cwd, guessed=is_guessed(effects), arguments=call.input)
        self._check_relative(effects)
        return effects

    def _check_relative(self, effects: list[Effect]) -> None:
        """Refuse relative paths when guard and the server would resolve them differently."""
        mismatch = self.proxy.relative_base_mismatch
        if mismatch is None:
            return
        for e in effects:
            target = e.target
            if e.kind in PATH_KINDS and target and not target.startswith(("/", "~")):
                raise GuardError(f"relative path {target!r}: {mismatch}; give an absolute path")

    def session_mode(self, call: ToolCall, effects: Sequence[Effect]) -> ModeFound:
        """The mode of this proxy's session, re-read when its file changed (a session file
        that cannot be read raises: the call is refused)."""
        mode = self.proxy.bridge.sync().value
        found = _FOUND.get(mode)
        if found is None:
            found = _FOUND[mode] = ModeFound(mode, f"guard mode {mode!r} of this worktree")
        return found


@dataclass
class McpStats:
    forwarded: int = 0
    allowed: int = 0
    denied: int = 0
    asked: int = 0
    planning: int = 0
    decisions: list[dict[str, Any]] = field(default_factory=list)


Item = tuple[dict[str, Any], Roots | None]


class McpSink:
    """The proxy's audit sink: stderr, the stats, the audit log and the session's events.

    Records are written by an :class:`guard.audit.buffered.BufferedWriter` (in order, in
    batches); :meth:`write` only queues them, and they are written on the proxy's
    loop once the call is forwarded: at :meth:`end_batch` when the router handles the
    lines of one read of the client (:attr:`batch`), else when the loop's turn is over
    (:meth:`start`'s ``defer``); the loop's page-cache writes, the fsync is the writer's
    sync thread. Without a loop they are written on the writer's thread. The
    router holds each answer of a checked call until its record is written
    (:attr:`last` is that record's number, :meth:`ready` asks), so a killed proxy
    never leaves an answered call unrecorded. Once a write has failed, the next
    records are written on the caller's path, and one that fails again raises
    :class:`guard.audit.AuditError` (the gate then refuses the call).
    """

    def __init__(
        self,
        session: Session,
        stats: McpStats,
        log: Callable[[str], None],
        *,
        verbose: bool = False,
        audit_allowed: bool = True,
        audit_path: Path | None = None,
        shipping: Any = None,
        data: Path | None = None,
    ) -> None:
        self.data = data
        self.session = session
        #: [audit] settings: records written are shipped (guard.fleet.syslog)
        self.shipping = shipping
        #: the client's (name, version) from its initialize request, for the fleet fields
        self.client: tuple[str | None, str | None] = (None, None)
        self.stats = stats
        self.log = log
        self.verbose = verbose
        self.audit_allowed = audit_allowed
        self.audit_path = audit_path
        self.writer: BufferedWriter[Item] = BufferedWriter(self._persist, log=log)
        #: The number of the last record queued (0: none yet).
        self.last = 0
        self._defer: Callable[[Callable[[], None]], object] | None = None
        self._kick_due = False
        #: Set by the owner while it handles messages that came together (the calls
        #: forwarded first): records are written at :meth:`end_batch`, not deferred.
        self.batch = False
        #: Set by the owner while it records the verdict of a call already forwarded: the
        #: record is queued even when the last write failed (its failure withholds the answer).
        self.queue_only = False
        self._paths: dict[Roots, Path] = {}
        self._logs: dict[Path, Appender] = {}
        self._events = Appender(session.events_path, audit=False)

    #: this sink ships what it writes (after the write): the gate does not
    ships = True

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
        if self.writer.broken is not None and not self.queue_only:
            # the last write failed: this one is written on the caller's path (and raises)
            self.last = self.writer.write_now(item)
            return
        if self._defer is None:
            self.last = self.writer.submit(item)
            return
        # the writer is woken once the caller's turn is over (the call forwarded first)
        self.last = self.writer.submit(item, wake=False)
        if not self._kick_due:
            self._kick_due = True
            if not self.batch:  # else end_batch() writes it
                self._defer(self._kick)

    def end_batch(self) -> None:
        """The end of a :attr:`batch`: write its records now, on the caller's thread."""
        self.batch = False
        if self._kick_due:
            self._kick()

    def _kick(self) -> None:
        """On the loop, once the call is forwarded: write the records now, while the server
        works (no hand-off to the writer thread, whose wake-up the answer would wait for)."""
        self._kick_due = False
        self.writer.drain()

    def ready(self, seq: int) -> bool:
        return self.writer.ready(seq)

    def failure(self, seq: int) -> str | None:
        return self.writer.failure(seq)

    def _persist(self, items: list[Item]) -> tuple[list[str | None], set[Path]]:
        """Write a batch: one append to each audit log, one to the session's event log.

        The files stay open between batches (:class:`guard.audit.logfile.Appender`: a lock,
        a check that the path still names the file, one write).
        """
        errors: list[str | None] = [None] * len(items)
        dirty: set[Path] = set()
        by_path: dict[Path, list[int]] = {}
        for i, (record, roots) in enumerate(items):
            try:
                path = self.audit_path or self._log_path(record, roots)
            except Exception as exc:
                errors[i] = f"cannot write the audit log: {exc}"
                continue
            by_path.setdefault(path, []).append(i)
        for path, indexes in by_path.items():
            log = self._appender(path)
            try:
                logfile.append_records(log, [items[i][0] for i in indexes])
                dirty.add(path)
                continue
            except Exception:
                pass
            for i in indexes:  # one record that cannot be written must not take the others
                try:
                    logfile.append_records(log, [items[i][0]])
                    dirty.add(path)
                except Exception as exc:
                    errors[i] = f"cannot write the audit log: {exc}"
        decisions: list[event_bus.Event] = []
        for i, (record, _roots) in enumerate(items):
            try:
                decisions.append(session_event(record, self.session.id))
            except Exception as exc:
                errors[i] = errors[i] or f"cannot write the session's event log: {exc}"
        if decisions:  # like events.publish_many: all in the log or none, then delivered
            try:
                lines = "".join(f"{e.model_dump_json()}\n" for e in decisions)
                self._events.append(lines.encode("utf-8"))
                dirty.add(self._events.path)
            except Exception as exc:
                text = f"cannot write the session's event log: {exc}"
                errors = [e if e is not None else text for e in errors]
            else:
                for event in decisions:
                    event_bus.deliver(event)
        for e in dict.fromkeys(e for e in errors if e is not None):
            self.log(e)
        shipped = [items[i][0] for i, e in enumerate(errors) if e is None]
        if shipped and self.shipping is not None:
            why = ship(self.shipping, shipped, self.data)  # never raises, never waits
            if why is not None:
                self.log(why)
        return errors, dirty

    def _appender(self, path: Path) -> Appender:
        log = self._logs.get(path)
        if log is None:
            log = self._logs[path] = Appender(path)
        return log

    def _log_path(self, record: Mapping[str, Any], roots: Roots | None) -> Path:
        if roots is None:
            cwd = record.get("cwd")
            return logfile.default_log_path(Roots.discover(cwd if isinstance(cwd, str) else None))
        path = self._paths.get(roots)
        if path is None:
            path = self._paths[roots] = logfile.default_log_path(roots)
        return path

    def start(
        self,
        notify: Callable[[], None] | None = None,
        defer: Callable[[Callable[[], None]], object] | None = None,
    ) -> None:
        """Start the writer. ``notify``: see :meth:`guard.audit.buffered.BufferedWriter.start`;
        ``defer`` runs a function once the caller's turn is over (the loop's ``call_soon``)."""
        self._defer = defer
        self.writer.start(notify)

    def stop(self) -> None:
        """Write and sync every queued record (shutdown, signals, exit paths)."""
        self.writer.close()
        with self.writer.persisting():  # a batch written after this reopens its files
            for log in [*self._logs.values(), self._events]:
                log.close()


def session_event(record: Mapping[str, Any], session: str | None = None) -> event_bus.Decision:
    """A verdict record as the session's ``decision`` event (what ``guard events`` shows)."""
    action = str(record.get("decision"))
    effect = record.get("effect")
    return event_bus.Decision(
        action=Action.ALLOW if action == "allow_confined" else Action(action),
        reason=str(record.get("reason", "")),
        rule=str(record.get("rule", "")),
        agent=record.get("agent"),
        tool=record.get("tool_name"),
        effect=effect if isinstance(effect, dict) else None,
        source=str(record.get("source", "")),
        session=session,
    )
