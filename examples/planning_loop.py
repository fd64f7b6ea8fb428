"""A scripted agent loop through guard's planning runtime; no model needed.

    python examples/planning_loop.py

It makes a scratch git repository in a temp dir, then: enters plan mode (the
"user" approves), streams a proposed plan that the parser splits from the
chat text, writes the plan artifact, asks to exit (the user first asks for a
refinement, then approves), and works through a checklist in build mode.
Both lanes are shown: the checklist (green) and the plan document (blue).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from guard.planning import Segment, Session, UserDecision, event_bus, handle_tool_call
from guard.planning.event_bus import project_todo_list
from guard.planning.handshake import EnterRequest, ExitRequest
from guard.planning.render import checklist_panel, session_view
from guard.planning.stream import stream_into_session

console = Console(highlight=False)

FIRST_REPLY = """I looked at the code. Here is what I propose:
<proposed_plan>
# Add a greeting command

1. Add `greet(name)` to `hello.py`.
2. Wire it to the CLI as `hello greet NAME`.
</proposed_plan>
Shall I go ahead?
"""
SECOND_REPLY = """Good point, revised:
<proposed_plan>
# Add a greeting command

1. Add `greet(name)` to `hello.py`.
2. Wire it to the CLI as `hello greet NAME`.
3. Test `greet` with an empty name and a unicode name.
</proposed_plan>
"""


def tokens(text: str, size: int = 7) -> Iterator[str]:
    """Cut text like a model stream does: at arbitrary places, tags included."""
    for start in range(0, len(text), size):
        yield text[start : start + size]


def stream_reply(session: Session, reply: str) -> None:
    """Stream a reply through the parser: chat text and plan text go to separate lanes,
    the last proposed plan becomes the plan artifact."""
    stream_into_session(session, tokens(reply), on_segment=show)
    console.print()
    console.print(f"[dim]plan artifact written: {Path(str(session.plan_path)).name}[/]")


def show(seg: Segment) -> None:
    if seg.kind == "text":
        console.print(seg.text, end="", style="white")
    elif seg.kind == "plan":
        console.print(seg.text, end="", style="bold blue")
    elif seg.kind == "plan_start":
        console.print("[blue]┌─ proposed plan ─[/]")
    else:
        console.print("[blue]└─────────────────[/]")


def model(text: str) -> None:
    console.print(f"[bold]model>[/] {text}")


def tool(session: Session, name: str, args: dict[str, object], **ask: object) -> None:
    result = handle_tool_call(session, name, args, **ask)  # type: ignore[arg-type]
    style = "red" if result.is_error else "green"
    console.print(f"[{style}]{name} → {result.text}[/]")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="guard-planning-") as tmp:
        repo = Path(tmp) / "hello"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "hello.py").write_text("def main() -> None:\n    print('hello')\n")
        session = Session.start(repo)
        console.print(Rule(f"session {session.id} in {repo} (mode: {session.mode.value})"))

        def user_enter(req: EnterRequest) -> bool:
            console.print(f"[yellow]user> enter plan mode for {req.title!r}? yes[/]")
            return True

        answers = iter(
            [UserDecision.refine("also test the edge cases"), UserDecision.approve("ship it")]
        )

        def user_exit(req: ExitRequest) -> UserDecision:
            decision = next(answers)
            console.print(f"[yellow]user> {decision.choice.value} {decision.text}[/]")
            return decision

        console.print(Rule("plan mode"))
        model("this needs a plan first.")
        tool(session, "plan_enter", {"title": "Add a greeting command"}, ask_enter=user_enter)
        model("let me track this with a checklist...")
        tool(session, "update_plan", {"plan": [{"step": "Explore", "status": "in_progress"}]})
        tool(session, "plan_exit", {}, ask_exit=user_exit)  # refused: no plan written yet
        stream_reply(session, FIRST_REPLY)
        tool(session, "plan_exit", {"summary": "two steps"}, ask_exit=user_exit)
        stream_reply(session, SECOND_REPLY)
        tool(session, "plan_exit", {"summary": "three steps"}, ask_exit=user_exit)
        session.end_turn()

        console.print(Rule(f"build mode (mode: {session.refresh().mode.value})"))
        steps = ["Add greet(name)", "Wire the CLI", "Test edge cases"]
        for current in range(len(steps) + 1):
            plan = [
                {
                    "step": step,
                    "status": "completed"
                    if n < current
                    else "in_progress"
                    if n == current
                    else "pending",
                }
                for n, step in enumerate(steps)
            ]
            tool(session, "update_plan", {"plan": plan})
            console.print(checklist_panel(session.refresh().checklist))
        session.end_turn()

        console.print(Rule("both lanes: guard session show"))
        console.print(session_view(session.refresh()))
        console.print(Rule("todo_list items projected from the checklist events"))
        for item in project_todo_list(event_bus.read_events(session)):
            done = sum(i.completed for i in item.items)
            console.print(f"{item.type:15} {item.item_id}  {done}/{len(item.items)} completed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
