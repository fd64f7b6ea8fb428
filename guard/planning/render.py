"""Two lanes on screen: the checklist and the plan document, visibly distinct.

Everything the agent wrote is drawn as plain text made visible
(:func:`guard.plaintext.visible`), never as Rich markup; the plan's markdown is
rendered with what markdown hides shown and marked (:func:`plan_markdown`).
"""

# Lazy imports: rich's markdown renderer and markdown-it's tokens only when a plan is shown
# (CLI start-up).
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

import guard.planning.event_bus as events
from guard.plaintext import visible
from guard.planning._vocabulary import Mode
from guard.planning.artifact import read_plan
from guard.planning.checklist import PlanItem, StepStatus
from guard.planning.session import Session
from guard.planning.todos import shown_checklist

if TYPE_CHECKING:
    from markdown_it.token import Token
    from rich.markdown import Markdown

MARKS = {
    StepStatus.COMPLETED: ("✓", "green"),
    StepStatus.IN_PROGRESS: ("→", "bold yellow"),
    StepStatus.PENDING: ("•", "dim"),
}


#: A link reference definition (``[//]: # (comment)``): markdown shows nothing of it.
REFERENCE_LINE = re.compile(r"^( {0,3})(\[[^\]\n]*\]:)", re.MULTILINE)
HIDDEN_STYLE = "bold magenta"


def _revealed(tokens: list[Token]) -> Iterator[Token]:
    """The tokens with markdown's hidden parts (HTML blocks, inline HTML and comments) turned
    into code that shows them, labelled as hidden."""
    from markdown_it.token import Token

    for token in tokens:
        if token.type == "html_block":
            yield Token("fence", "code", 0, content="(hidden in rendering: HTML)\n"
                        + token.content, info="", markup="```", block=True)  # fmt: skip
            continue
        if token.type == "html_inline":
            yield Token("code_inline", "code", 0, content=f"(hidden: {token.content})",
                        markup="`")  # fmt: skip
            continue
        if token.children:
            token.children = list(_revealed(token.children))
        yield token


def plan_markdown(text: str) -> Markdown:
    """The plan rendered as markdown, with every part markdown would hide shown and marked:
    control, zero-width and bidi characters as escapes, HTML blocks and comments as code
    labelled hidden, link reference definitions as text, link targets after their text."""
    from rich.markdown import Markdown

    shown = REFERENCE_LINE.sub(r"\1(hidden link definition) \\\2", visible(text))
    markdown = Markdown(shown, hyperlinks=False)
    markdown.parsed = list(_revealed(markdown.parsed))
    return markdown


def checklist_lines(items: list[PlanItem]) -> Text:
    text = Text()
    for n, item in enumerate(items):
        mark, style = MARKS[item.status]
        if n:
            text.append("\n")
        text.append(f"{mark} ", style=style)
        text.append(visible(item.step, lines=False),
                    style="strike dim" if item.status is StepStatus.COMPLETED else "")  # fmt: skip
    return text


def checklist_panel(
    items: list[PlanItem], explanation: str | None = None, source: str = "update_plan"
) -> Panel:
    body: RenderableType
    if items:
        done = sum(1 for i in items if i.status is StepStatus.COMPLETED)
        parts: list[RenderableType] = [checklist_lines(items)]
        if explanation:
            parts.insert(0, Text(visible(explanation), style="italic"))
        body = Group(*parts)
        subtitle = f"{done}/{len(items)} done"
    else:
        body = Text("no checklist yet (update_plan in build mode)", style="dim")
        subtitle = None
    return Panel(
        body,
        title=Text.assemble(("Checklist", "bold green"), f" ({visible(source, lines=False)})"),
        subtitle=subtitle,
        border_style="green",
        title_align="left",
    )


def plan_panel(markdown: str | None, path: str | None) -> Panel:
    body: RenderableType
    if markdown and markdown.strip():
        body = plan_markdown(markdown)
    elif path:
        body = Text("the plan file is empty or not written yet", style="dim")
    else:
        body = Text("no plan artifact: the session has not entered plan mode", style="dim")
    return Panel(
        body,
        title="[bold blue]Plan document[/]",
        subtitle=Text(visible(path, lines=False)) if path else None,
        border_style="blue",
        title_align="left",
    )


def session_header(session: Session) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    style = "bold magenta" if session.mode is Mode.PLAN else "bold cyan"
    table.add_row("session", Text(visible(session.id, lines=False)))
    if session.title:
        table.add_row("title", Text(visible(session.title, lines=False)))
    table.add_row("mode", Text(session.mode.value, style=style))
    where = session.worktree or f"(none; project {session.project})"
    table.add_row("worktree", Text(visible(where, lines=False)))
    table.add_row("updated", Text(session.updated_at))
    for pending in session.pending:
        table.add_row("waiting", Text(f"{pending.kind} since {pending.at}", style="yellow"))
    if session.decisions:
        last = session.decisions[-1]
        table.add_row("last exit", Text(visible(f"{last.decision} {last.text}".strip())))
    return table


class Lanes:
    """Checklist and plan side by side on wide terminals (>= 110 columns), stacked otherwise."""

    def __init__(self, checklist: Panel, plan: Panel, side_by_side_from: int = 110) -> None:
        self.checklist = checklist
        self.plan = plan
        self.side_by_side_from = side_by_side_from

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width >= self.side_by_side_from:
            grid = Table.grid(expand=True, padding=(0, 1))
            grid.add_column(ratio=2)
            grid.add_column(ratio=3)
            grid.add_row(self.checklist, self.plan)
            yield grid
        else:
            yield self.checklist
            yield self.plan


def session_view(session: Session) -> Group:
    """The session header, then the two lanes: the checklist and the plan document."""
    return Group(
        session_header(session),
        Lanes(
            checklist_panel(*shown_checklist(session)),
            plan_panel(read_plan(session), session.plan_path),
        ),
    )


def _one(text: str) -> str:
    """Agent text on one line, every control character made visible."""
    return visible(str(text), lines=False)


def event_line(event: events.Event) -> Text:
    """One line per event, for ``guard events``."""
    when = event.at[11:19]
    text = Text(f"{when} ", style="dim")
    if isinstance(event, events.ModeChanged):
        text.append("mode ", style="bold")
        text.append(f"{event.old.value} → {event.new.value}", style="magenta")
        text.append(f"  {_one(event.reason)}")
    elif isinstance(event, events.PlanUpdate):
        text.append("checklist ", style="bold green")
        text.append_text(
            Text("  ").join(
                Text(f"{MARKS[i.status][0]} {_one(i.step)}", style=MARKS[i.status][1])
                for i in event.plan
            )
        )
    elif isinstance(event, events.PlanDelta):
        text.append("plan Δ ", style="bold blue")
        text.append(repr(event.delta))
    elif isinstance(event, events.PlanCompleted):
        text.append("plan complete ", style="bold blue")
        text.append(f"{len(event.text)} chars" + (f" → {_one(event.path)}" if event.path else ""))
    elif isinstance(event, events.UserInputRequested):
        text.append("question ", style="bold yellow")
        text.append("; ".join(_one(q.question) for q in event.questions))
    elif isinstance(event, events.PlanExit):
        text.append(f"plan exit {event.outcome} ", style="bold yellow")
        text.append(_one(event.text))
    elif isinstance(event, events.Decision):
        style = {"allow": "green", "ask": "yellow", "deny": "bold red"}[event.action.value]
        text.append(f"{event.action.value} ", style=style)
        target = event.effect or {}
        what = f"{event.agent or '?'} {target.get('kind', '')} {target.get('target', '')}"
        text.append(_one(what))
        text.append(f"  {_one(event.reason)}", style="dim")
    elif isinstance(event, events.Violation):
        text.append("VIOLATION ", style="bold red")
        text.append(_one(f"{event.kind} {event.path} {event.detail}"))
    elif isinstance(event, events.TurnEnded):
        text.append(f"turn {event.turn} ended", style="dim")
    return text
