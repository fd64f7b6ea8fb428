"""The cockpit's activity lane: one :class:`Activity` line per audit record or session event.

:func:`from_audit` reads guard's audit records (decisions, monitor violations and
notices), :func:`from_event` a session's events; both return None for what the lane
does not show. Used by :mod:`guard.ui.state`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guard.planning import event_bus as ev


@dataclass(frozen=True, slots=True)
class Activity:
    """One line of the activity lane: a decision, a monitor violation or a plan event."""

    at: str
    kind: str  # decision | violation | notice | plan
    action: str  # allow | ask | deny | allow_confined | violation | notice | plan event
    host: str
    tool: str
    summary: str
    reason: str = ""
    rule: str = ""
    agent: str = ""
    source: str = ""
    effects: tuple[str, ...] = ()

    def explain(self) -> str:
        """What ``guard explain`` would say, in three lines: what, reason, rule and effects."""
        who = " · ".join(x for x in (self.agent and f"agent {self.agent}", self.host, self.source)
                         if x and x != "-")  # fmt: skip
        first = f"{self.action.upper()}  {self.summary}" + (f"  ({who}, {self.at})" if who else "")
        rule = f"rule    {self.rule or '-'}"
        if self.effects:
            rule += "  · effects " + "; ".join(self.effects)
        return "\n".join((first, f"reason  {self.reason or '-'}", rule))


def effect_text(effect: Any) -> str:
    if isinstance(effect, dict):
        kind = effect.get("kind", "?")
        target = effect.get("path") or effect.get("target") or effect.get("detail") or ""
        return f"{kind} {target}".strip()
    return str(effect)


def from_audit(record: dict[str, Any]) -> Activity | None:
    """The activity line for an audit record (None for records the lane does not show)."""
    kind = record.get("type")
    if kind == "verdict":
        effects = tuple(effect_text(e) for e in record.get("effects") or ())
        deciding = record.get("effect")
        target = effect_text(deciding) if deciding else (effects[0] if effects else "")
        tool = str(record.get("tool_name") or "-")
        return Activity(
            at=str(record.get("ts", "")),
            kind="decision",
            action=str(record.get("decision", "?")),
            host=str(record.get("host") or record.get("source") or "-"),
            tool=tool,
            summary=f"{tool} {target}".strip(),
            reason=str(record.get("reason", "")),
            rule=str(record.get("rule", "")),
            agent=str(record.get("agent") or ""),
            source=str(record.get("source", "")),
            effects=effects,
        )
    if kind == "violation":
        taken = str(record.get("action_taken", ""))
        return Activity(
            at=str(record.get("timestamp", "")),
            kind="violation",
            action="violation",
            host="monitor",
            tool=str(record.get("event", "")),
            summary=f"{record.get('event', '?')} {record.get('path', '')}"
            + (f" ({taken})" if taken else ""),
            reason=str(record.get("reason", "")),
            rule=str(record.get("rule", "")),
            agent=str(record.get("agent") or ""),
            source="monitor",
            effects=(f"{record.get('effect', 'write')} {record.get('path', '')}",),
        )
    if kind == "notice":
        return Activity(
            at=str(record.get("timestamp", "")),
            kind="notice",
            action="notice",
            host="monitor",
            tool=str(record.get("event", "")),
            summary=str(record.get("message", "")),
            source="monitor",
        )
    return None


def from_event(event: ev.Event) -> Activity | None:
    """The activity line for a session event (None for those shown in other lanes)."""
    if isinstance(event, ev.Decision):
        effect = effect_text(event.effect) if event.effect else ""
        return Activity(
            at=event.at,
            kind="decision",
            action=event.action.value,
            host=event.source or "-",
            tool=event.tool or "-",
            summary=f"{event.tool or '-'} {effect}".strip(),
            reason=event.reason,
            rule=event.rule,
            agent=event.agent or "",
            source=event.source,
            effects=(effect,) if effect else (),
        )
    if isinstance(event, ev.Violation):
        return Activity(
            at=event.at,
            kind="violation",
            action="violation",
            host=event.source or "monitor",
            tool=event.kind,
            summary=f"{event.kind} {event.path}",
            reason=event.detail,
            source=event.source,
            effects=(f"{event.kind} {event.path}",),
        )
    if isinstance(event, ev.ModeChanged):
        return Activity(
            at=event.at, kind="plan", action="mode", host="guard", tool="mode",
            summary=f"{event.old.value} -> {event.new.value}", reason=event.reason,
        )  # fmt: skip
    if isinstance(event, ev.PlanExit):
        return Activity(
            at=event.at, kind="plan", action="plan_exit", host="guard", tool="plan_exit",
            summary=f"{event.outcome} {event.plan_path or ''}".strip(), reason=event.text,
        )  # fmt: skip
    return None
