from __future__ import annotations

import io

from rich.console import Console

from guard.planning import Session, update_plan
from guard.planning.event_bus import ModeChanged, Violation
from guard.planning.render import event_line, session_view
from guard.planning.session import Mode

from .conftest import write_plan_file


def render(session: Session, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(session_view(session))
    return out.getvalue()


def _prepared(repo_session: Session) -> Session:
    write_plan_file(repo_session, "# Ship it\n\n1. **first**\n")
    return repo_session


def test_lanes_side_by_side_when_wide_stacked_when_narrow(plan_session: Session) -> None:
    s = _prepared(plan_session)
    wide = render(s, 140).splitlines()
    assert any("Checklist" in line and "Plan document" in line for line in wide)
    narrow = render(s, 80).splitlines()
    assert not any("Checklist" in line and "Plan document" in line for line in narrow)
    c = next(i for i, line in enumerate(narrow) if "Checklist" in line)
    p = next(i for i, line in enumerate(narrow) if "Plan document" in line)
    assert c < p
    assert "Ship it" in "\n".join(narrow) and "**first**" not in "\n".join(narrow)


def test_checklist_marks(session: Session) -> None:
    update_plan(
        session,
        {
            "plan": [
                {"step": "done one", "status": "completed"},
                {"step": "doing one", "status": "in_progress"},
                {"step": "todo one", "status": "pending"},
            ]
        },
    )
    text = render(session.refresh(), 80)
    assert "✓ done one" in text and "→ doing one" in text and "• todo one" in text
    assert "1/3 done" in text
    assert "no plan artifact" in text


def test_event_lines_are_single_line_summaries() -> None:
    line = event_line(ModeChanged(old=Mode.BUILD, new=Mode.PLAN, reason="r")).plain
    assert "build → plan" in line
    assert "VIOLATION" in event_line(Violation(path="/x", kind="chmod")).plain
