"""Each host's own checklist tool, captured into the session's events as ``PlanUpdate``.

Claude Code's ``TodoWrite``, Codex's ``update_plan``, Gemini CLI's ``write_todos``
and OpenCode's ``todowrite`` each send the whole list in their tool input. The
policy hook sees that input at the host's post-tool event (the tool ran), and
:func:`capture` publishes it to the session that decides for the worktree, with
``source`` naming the host and tool, so that ``guard ui`` and ``guard events
--follow`` show the model's checklist whichever host it runs in.

Shapes (as sent by the versions guard follows)::

    TodoWrite    {"todos": [{"content", "status", "activeForm"}]}
    update_plan  {"explanation"?, "plan": [{"step", "status"}]}
    write_todos  {"todos": [{"description", "status"}]}   status may be "cancelled"
    todowrite    {"todos": [{"content", "status", "priority", "id"}]}

Capturing never decides anything: a list it cannot read is left out, not refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard import hosts
from guard.planning.checklist import PlanItem, StepStatus
from guard.planning.deciding import deciding_session
from guard.planning.event_bus import PlanUpdate, read_events
from guard.planning.session import Session

#: (host, tool name) -> the key of the list in the tool input and of each step's text.
CHECKLIST_TOOLS: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    (h.name, h.checklist.tool): (h.checklist.key, h.checklist.text_keys)
    for h in hosts.HOSTS if h.checklist
}
#: Longest checklist kept; a longer one is cut (the lane is for reading).
MAX_STEPS = 200
MAX_STEP_CHARS = 500
STATUSES = {s.value: s for s in StepStatus}


def is_checklist_tool(host: str, tool: str) -> bool:
    return (host, tool) in CHECKLIST_TOOLS


def parse(
    host: str, tool: str, tool_input: Mapping[str, Any]
) -> tuple[list[PlanItem], str | None] | None:
    """The steps and explanation of a host's checklist call; None when it is not one."""
    shape = CHECKLIST_TOOLS.get((host, tool))
    if shape is None:
        return None
    key, text_keys = shape
    raw = tool_input.get(key)
    if not isinstance(raw, list):
        return None
    items: list[PlanItem] = []
    for entry in raw[:MAX_STEPS]:
        if not isinstance(entry, Mapping):
            continue
        text = next((entry[k] for k in text_keys if isinstance(entry.get(k), str)), "")
        text = " ".join(text.split())[:MAX_STEP_CHARS]
        if not text:
            continue
        status = str(entry.get("status", "pending"))
        if status == "cancelled":
            text += " (cancelled)"
        items.append(PlanItem(step=text, status=STATUSES.get(status, StepStatus.PENDING)))
    explanation = tool_input.get("explanation")
    return items, explanation if isinstance(explanation, str) and explanation.strip() else None


def capture(host: str, tool: str, tool_input: Mapping[str, Any], cwd: str) -> bool:
    """Publish the checklist of this call to the deciding session; True if one was."""
    parsed = parse(host, tool, tool_input)
    if parsed is None:
        return False

    found = deciding_session(cwd)
    if found is None:
        return False
    session = found[0]
    items, explanation = parsed
    session.publish(
        PlanUpdate(
            turn=session.turn, explanation=explanation, plan=items, source=f"{host} {tool}"
        )
    )
    return True


def shown_checklist(session: Session) -> tuple[list[PlanItem], str | None, str]:
    """The checklist the cockpit shows for ``session``: the latest ``PlanUpdate`` of its
    events (update_plan, or a host's own tool captured above), else the session's own; with
    its explanation and where it came from. ``guard session show`` prints this, and ``guard
    plan status`` the same list read by hand (guard.planning.status_view.events_of), so the
    three never disagree."""
    latest: PlanUpdate | None = None
    try:
        for event in read_events(session):
            if isinstance(event, PlanUpdate):
                latest = event
    except Exception:  # a damaged log: the session's own list, as the cockpit falls back
        latest = None
    if latest is not None:
        return list(latest.plan), latest.explanation, latest.source or "update_plan"
    return list(session.checklist), session.explanation, "update_plan"
