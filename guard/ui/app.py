"""The cockpit's screens, drawn with Textual from a :class:`guard.ui.state.Source`.

Layout (fits 80x24; the activity lane takes a third of the screen)::

    header     worktree, session, mode, the hooks' agent and why, hosts, shell
    checklist  | plan document (markdown a page at a time; the file, or the streamed
    pending    | <proposed_plan>)
    activity   decisions, violations, plan events (filter: d decision, h host)
    detail     the selected line: reason, rule, effects (enter: all of it)
    keys       two lines, always on screen

Keys: a approve (asks, binds to the digest of the plan on screen), r reject, f refine,
i answer questions, o the plan in $PAGER, p start plan mode, e end the session, s switch
session, d/h filters, ? help, q quit. The state is polled (the plan file re-read by
content) every :data:`POLL` seconds; no network port is opened. Agent text is drawn as
text (:func:`guard.plaintext.visible`), never as markup.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from guard.effects import GuardError
from guard.plaintext import visible
from guard.planning.answer import PlanChanged
from guard.planning.checklist import StepStatus
from guard.ui.activity import Activity
from guard.ui.cells import at_time, cut, keep_name, one_line, plan_diff
from guard.ui.dialogs import Confirm, Help, Prompt, Questions, Sessions
from guard.ui.plan_lane import PlanLane
from guard.ui.state import HostLine, Source

#: Lines the activity table holds at most (the newest; the lane keeps more for filtering).
TABLE_ROWS = 200
#: Seconds between two looks at the files (a stat per file) when nothing woke the app first:
#: a change in a watched directory (inotify) makes it look at once.
POLL = 1.0

MARKS = {
    StepStatus.COMPLETED: ("[x]", "green"),
    StepStatus.IN_PROGRESS: ("[>]", "bold yellow"),
    StepStatus.PENDING: ("[ ]", ""),
}
ACTION_STYLE = {
    "allow": "green",
    "allow_confined": "cyan",
    "ask": "yellow",
    "deny": "bold red",
    "violation": "bold red",
    "notice": "magenta",
}
#: What `d` shows, in turn: refusals first, the lines a user looks for.
DECISION_FILTERS = ("all", "deny", "ask", "allow", "allow_confined", "violation", "plan")

class CockpitApp(App[None]):
    """``guard ui``."""

    TITLE = "guard ui"
    CSS = """
    Screen { layout: vertical; }
    #header { height: 4; padding: 0 1; background: $boost; text-wrap: nowrap;
              text-overflow: ellipsis; }
    #lanes { height: 1fr; min-height: 6; }
    #left { width: 2fr; }
    #checklist { height: 1fr; border: round $success; padding: 0 1; }
    #pending { height: auto; max-height: 7; border-top: round $warning; padding: 0 1; }
    #plan { width: 3fr; border: round $primary; padding: 0 1; }
    #activity { height: 34%; min-height: 8; border: round $secondary; overflow-x: hidden; }
    #detail { height: 3; padding: 0 1; background: $boost; text-wrap: nowrap;
              text-overflow: ellipsis; }
    .dialog { width: 70; height: auto; max-height: 20; border: thick $accent;
              background: $surface; padding: 1 2; }
    #help { width: 80; max-height: 24; }
    .dialog .detail { height: auto; max-height: 12; }
    .hint { color: $text-muted; }
    #keys { height: 2; padding: 0 1; background: $panel; text-wrap: nowrap;
            text-overflow: ellipsis; }
    Prompt, Questions, Confirm, Sessions, Help { align: center middle; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "approve", "approve"),
        Binding("r", "reject", "reject"),
        Binding("f", "refine", "refine"),
        Binding("i", "answer", "answer"),
        Binding("p", "plan", "plan"),
        Binding("e", "end", "end"),
        Binding("s", "switch", "session"),
        Binding("o", "pager", "pager", show=False),
        Binding("d", "filter_decision", "decision", show=False),
        Binding("h", "filter_host", "host", show=False),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, source: Source, *, poll: float = POLL, check_hosts: bool = True) -> None:
        super().__init__()
        self.source = source
        self.poll = poll
        self.check_hosts = check_hosts
        self.decision_filter = "all"
        self.host_filter = "all"
        self._shown: list[Activity] = []
        self._count = 0  # activity lines drawn, to add only the new ones
        self._generation = -1
        self._plan_shown: tuple[str | None, str | None, bool] | None = None
        #: the plan file on screen: its digest and text (what `a` approves), the text shown
        #: before its last change (diffed in the approve dialog), the text of a refused approval
        self._plan_digest_drawn: str | None = None
        self._plan_text_drawn: str | None = None
        self._plan_before: str | None = None
        self._plan_refused_text: str | None = None
        self._paged_through: str | None = None  # the digest of the plan read in $PAGER
        self.renders = 0  # how many times the state was drawn (benchmarks read it)
        self._observer: Any = None
        self._handler: Any = None
        self._watching: set[str] = set()
        self._woken = False

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Horizontal(id="lanes"):
            with Vertical(id="left"):
                yield Static(id="checklist")
                yield Static(id="pending")
            yield PlanLane(id="plan")
        table: DataTable[Text] = DataTable(id="activity", cursor_type="row", zebra_stripes=False)
        yield table
        yield Static(id="detail")
        yield Static(id="keys")

    def on_mount(self) -> None:
        table: DataTable[Text] = self.query_one("#activity", DataTable)
        table.add_columns("time", "decision", "host", "what", "reason")
        self.query_one("#checklist").border_title = "Checklist"
        self.query_one("#pending").border_title = "Pending"
        self.query_one("#plan").border_title = "Plan"
        table.border_title = "Activity"
        self.draw(full=True)
        table.focus()
        self.set_interval(self.poll, self.tick)
        self._watch()
        if self.check_hosts:
            self.load_hosts()

    def _watch(self) -> None:
        """Wake on any change in the directories of the state (inotify, no polling)."""
        wanted = self.source.watched() if hasattr(self.source, "watched") else set()
        if wanted == self._watching:
            return
        try:
            if self._observer is None:
                app = self

                class Wake(FileSystemEventHandler):
                    def on_any_event(self, event: FileSystemEvent) -> None:
                        app.wake()

                self._handler = Wake()
                self._observer = Observer()
                self._observer.daemon = True
                self._observer.start()
            self._observer.unschedule_all()
            for directory in wanted:
                self._observer.schedule(self._handler, directory, recursive=False)
            self._watching = wanted
        except Exception:  # no inotify here: the poll still sees every change, later
            self._watching = wanted

    def wake(self) -> None:
        """From the watcher's thread: look at the files soon (once per burst of changes)."""
        if self._woken:
            return
        self._woken = True
        try:
            self._loop.call_soon_threadsafe(self._woke)  # type: ignore[union-attr]
        except (AttributeError, RuntimeError):  # the app is closing
            self._woken = False

    def _woke(self) -> None:
        self._woken = False
        self.tick()

    def on_unmount(self) -> None:
        if self._observer is not None:
            self._observer.stop()

    @work(thread=True, exclusive=True)
    def load_hosts(self) -> None:
        try:
            hosts = self.source.hosts()
        except Exception as exc:  # the header says so; the cockpit keeps working
            self.call_from_thread(self._hosts_failed, str(exc))
            return
        self.call_from_thread(self._hosts_loaded, hosts)

    def _hosts_loaded(self, hosts: list[HostLine]) -> None:
        self.source.view.hosts = hosts
        self.draw_header()

    def _hosts_failed(self, why: str) -> None:
        self.source.view.hosts = []
        self.notify(f"could not check the hosts: {why}", severity="warning")
        self.draw_header()

    def tick(self) -> None:
        if self.source.refresh():
            self.draw()
            self._watch()  # another session, another plan file: other directories

    # ---- drawing -------------------------------------------------------------------------------

    def draw(self, *, full: bool = False) -> None:
        self.renders += 1
        self.draw_header()
        self.draw_checklist()
        self.draw_pending()
        self.draw_plan()
        self.draw_activity(full=full)
        self.draw_keys()

    def draw_keys(self) -> None:
        """The keys, always on screen: two lines that fit 80 columns."""
        first = [("a", "approve"), ("r", "reject"), ("f", "refine"), ("i", "answer"),
                 ("o", "pager"), ("enter", "full line")]  # fmt: skip
        if not self.check_action("approve", ()):
            first = first[1:]
        second = [("p", "plan"), ("e", "end"), ("s", "session"), ("d", "filter"),
                  ("h", "host"), ("?", "help"), ("q", "quit")]  # fmt: skip
        t = Text(no_wrap=True, overflow="ellipsis")
        for n, keys in enumerate((first, second)):
            if n:
                t.append("\n")
            for key, what in keys:
                t.append(key, style="bold reverse")
                t.append(f" {what}  ")
        self.query_one("#keys", Static).update(t)

    def draw_header(self) -> None:
        v = self.source.view
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("worktree ", style="bold")
        t.append(one_line(v.worktree))
        t.append("\nsession ", style="bold")
        if v.session_id:
            t.append(f"{one_line(v.session_id)} ({one_line(v.session_status)})  ")
            t.append(f" {one_line(v.mode or '?').upper()} ", style="bold reverse")
            if v.title:
                t.append(f"  {one_line(v.title)}")
        else:
            t.append("none open (p: start plan mode)")
        t.append("\nhooks ", style="bold")
        t.append(one_line(f"{v.agent or '(host decides)'}: {v.agent_why}"))
        if v.problem:  # instead of the hosts: what cannot be read matters more
            t.append(f"\nproblem: {one_line(v.problem)}", style="bold red")
        else:
            t.append("\nhosts ", style="bold")
            if v.hosts is not None:
                wired = [f"{h.host} {h.status}" for h in v.hosts if h.status != "off"]
                t.append(one_line(", ".join(wired) or "none wired here (guard install HOST)"))
            t.append(("  | " if v.hosts else "") + one_line(v.shell))
        self.query_one("#header", Static).update(t)

    def draw_checklist(self) -> None:
        v = self.source.view
        widget = self.query_one("#checklist", Static)
        if not v.checklist:
            widget.update(Text("no checklist yet (update_plan, TodoWrite, ...)", style="dim"))
            widget.border_subtitle = ""
            widget.border_title = "Checklist"
            return
        t = Text()
        title = Text("Checklist")
        if v.explanation:  # in the title: the lane's rows are for the steps
            title.append(": " + one_line(v.explanation), style="italic")
        widget.border_title = title
        for n, item in enumerate(v.checklist):
            mark, style = MARKS[item.status]
            if n:
                t.append("\n")
            t.append(f"{mark} ", style=style)
            finished = item.status is StepStatus.COMPLETED
            t.append(one_line(item.step), style="strike" if finished else style)
        widget.update(t)
        done = sum(1 for i in v.checklist if i.status is StepStatus.COMPLETED)
        source = one_line(v.checklist_from)
        widget.border_subtitle = Text(f"{done}/{len(v.checklist)} done · {source}")

    def draw_pending(self) -> None:
        v = self.source.view
        t = Text()
        if not v.pending:
            t.append("nothing waits for you", style="dim")
        for n, p in enumerate(v.pending):
            if n:
                t.append("\n")
            t.append(one_line(p.text), style="bold yellow")
            keys = {
                "plan_exit": "a approve r reject f refine",
                "request_user_input": "i answer",
                "plan_enter": "a accept",
            }
            t.append("\n" + keys.get(p.kind, ""), style="bold")
            for q in p.questions:
                t.append(f"\n  ? {one_line(q)}")
        if v.mode == "plan" and not any(p.kind == "plan_exit" for p in v.pending):
            t.append("\nplan mode: a approves the plan file when it is ready", style="dim")
        self.query_one("#pending", Static).update(t)

    def draw_plan(self) -> None:
        v = self.source.view
        streamed = getattr(self.source, "streamed_plan", "")
        text = v.plan_text if v.plan_text and v.plan_text.strip() else streamed or None
        key = (text, v.plan_path, v.plan_streaming)
        from_file = bool(v.plan_text and v.plan_text.strip())
        digest = v.plan_digest if from_file else None
        if key == self._plan_shown and digest == self._plan_digest_drawn:
            return
        if (from_file and self._plan_text_drawn and self._plan_before is None
                and self._plan_shown is not None and self._plan_shown[1] == v.plan_path
                and self._plan_text_drawn != v.plan_text):  # fmt: skip
            self._plan_before = self._plan_text_drawn
        self._plan_shown = key
        self._plan_digest_drawn = digest
        self._plan_text_drawn = v.plan_text if from_file else None
        self.refresh_bindings()
        self.draw_keys()
        lane = self.query_one("#plan", PlanLane)
        if text:
            lane.show_plan(text)
        elif v.plan_path:
            lane.show_message(Text("the plan file is not written yet", style="dim"))
        else:
            lane.show_message(Text("no plan: the session is not in plan mode", style="dim"))
        where = v.plan_path.rsplit("/", 1)[-1] if v.plan_path else ""
        if v.plan_streaming:
            where = "streaming <proposed_plan>"
        if lane.paged:
            where = f"{v.plan_lines} lines, read to the end to approve · {where}"
        lane.border_subtitle = Text(cut(one_line(where), 44))

    def _visible(self, a: Activity) -> bool:
        if self.host_filter != "all" and a.host != self.host_filter:
            return False
        f = self.decision_filter
        if f == "all":
            return True
        if f == "plan":
            return a.kind == "plan"
        return a.action == f

    def draw_activity(self, *, full: bool = False) -> None:
        v = self.source.view
        table: DataTable[Text] = self.query_one("#activity", DataTable)
        gap = v.appended - self._count
        following = table.cursor_row >= table.row_count - 1
        if (full or v.generation != self._generation or gap < 0 or gap > len(v.activity)
                or table.row_count + gap > 2 * TABLE_ROWS):  # fmt: skip
            table.clear()
            self._shown = []
            new = [a for a in v.activity if self._visible(a)][-TABLE_ROWS:]
        else:
            new = [a for a in list(v.activity)[len(v.activity) - gap :] if self._visible(a)]
            new = new if gap else []
        self._count, self._generation = v.appended, v.generation
        for a in new:
            style = ACTION_STYLE.get(a.action, "")
            label = "confined" if a.action == "allow_confined" else a.action
            wide = max(34, self.size.width // 3)
            table.add_row(
                Text(one_line(at_time(a.at))),
                Text(one_line(label), style=style),
                Text(one_line(a.host)),
                Text(keep_name(self._here(a.summary), wide)),
                Text(cut(self._here(a.reason), 2 * wide)),
            )
            self._shown.append(a)
        filters = f"decision: {self.decision_filter} · host: {self.host_filter}"
        table.border_subtitle = Text(one_line(f"last {len(self._shown)} · {filters}"))
        if following and table.row_count:
            table.move_cursor(row=table.row_count - 1)
        self.draw_detail()

    def _here(self, text: str) -> str:
        """``text`` on one line, made visible, with the worktree's paths relative to it."""
        root = self.source.view.worktree.rstrip("/") + "/"
        return one_line(text.replace(root, ""))

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        """enter on a line: all of it (the whole reason, rule and effects) in a dialog."""
        row = event.cursor_row
        if 0 <= row < len(self._shown):
            whole = Text(visible(self._shown[row].explain()))
            self.push_screen(Confirm("The whole line (y or n closes):", whole))

    def draw_detail(self) -> None:
        table: DataTable[Text] = self.query_one("#activity", DataTable)
        detail = self.query_one("#detail", Static)
        row = table.cursor_row
        if 0 <= row < len(self._shown):
            shown = self._shown[row].explain()
            detail.update(Text(visible(shown), no_wrap=True, overflow="ellipsis"))
        else:
            detail.update(Text("no activity yet", style="dim"))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self.draw_detail()

    # ---- actions -------------------------------------------------------------------------------

    def _do(self, action: str, *args: object) -> None:
        """Run a source action; its summary or its error is shown, never a traceback."""
        try:
            said = getattr(self.source, action)(*args)
        except PlanChanged as exc:
            self.say(str(exc), severity="error")
            self.source.refresh()  # the plan as it is now, for the diff
            self.draw(full=True)
            self._show_change()
            return
        except GuardError as exc:
            self.say(str(exc), severity="error")
        except Exception as exc:
            self.say(f"{type(exc).__name__}: {exc}", severity="error")
        else:
            self.say(str(said))
        self.draw(full=True)

    def say(self, text: str, severity: Any = "information") -> None:
        """A notification whose text (it quotes the agent: notes, paths) is never markup."""
        self.notify(visible(text), severity=severity, timeout=10 if severity == "error" else 6,
                    markup=False)  # fmt: skip

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`a` is offered only when there is something to approve: a plan file on screen in
        plan mode, or the model's request to enter plan mode."""
        if action == "approve":
            v = self.source.view
            if v.mode != "plan":
                return self._pending("plan_enter")
            return bool(self._plan_digest_drawn)
        return True

    def _pending(self, kind: str) -> bool:
        return any(p.kind == kind for p in self.source.view.pending)

    def action_approve(self) -> None:
        """Ask "Approve plan TITLE (N lines, digest …)?" about the plan on screen; yes
        approves that text only (its digest), so a plan changed since is refused."""
        v = self.source.view
        if v.mode != "plan" and self._pending("plan_enter"):
            self._do("accept_plan_mode")
            return
        if v.mode != "plan":
            self.say("no plan to approve: the session is not in plan mode", "warning")
            return
        digest, text = self._plan_digest_drawn, self._plan_text_drawn
        if not digest or not text or not text.strip():
            self.say("no plan to approve yet: the plan file is missing or empty", "warning")
            return
        lane = self.query_one("#plan", PlanLane)
        if not v.plan_whole:
            self.say("the plan is too large to show whole here: read it and approve it with"
                     f" `guard plan exit --approve --digest {digest}`", "warning")  # fmt: skip
            return
        if lane.paged and not lane.seen_end and self._paged_through != digest:
            self.say(f"the plan is {v.plan_lines} lines: scroll the plan lane to its end, or"
                     " press o to read it in $PAGER, before approving it", "warning")  # fmt: skip
            return
        title = v.title or (v.plan_path or "plan").rsplit("/", 1)[-1]
        question = f"Approve plan {one_line(title)} ({v.plan_lines} lines, digest {digest[:12]})?"
        before, self._plan_before = self._plan_before, None
        detail = None
        if before is not None:
            question += "\nThe plan changed since it was first shown; the change:"
            detail = plan_diff(before, text)

        def done(yes: bool | None) -> None:
            if yes:
                self._plan_refused_text = text
                self._do("answer_exit", "approve", "", digest)

        self.push_screen(Confirm(question, detail), done)

    def action_pager(self) -> None:
        """The whole plan, control characters made visible, in ``$PAGER`` (default less)."""
        digest, text = self._plan_digest_drawn, self._plan_text_drawn
        if not digest or text is None:
            self.say("no plan file to show yet", "warning")
            return
        with tempfile.TemporaryDirectory(prefix="guard-plan-") as where:
            path = os.path.join(where, "plan.md")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(visible(text))
            command = [*shlex.split(os.environ.get("PAGER") or "less"), path]
            try:
                with self.suspend():
                    done = subprocess.run(command, check=False).returncode == 0
            except Exception as exc:  # no terminal to hand over (headless), no such pager
                self.say(f"could not open the pager ({' '.join(command)}): {exc}", "error")
                return
        if done and self.source.view.plan_whole:
            self._paged_through = digest  # read whole: `a` may approve this text

    def _show_change(self) -> None:
        """After a refused approval: the diff between the plan shown and the plan now."""
        shown, now = self._plan_refused_text, self.source.view.plan_text or ""
        self._plan_before = None
        question = ("The plan changed since it was shown and was NOT approved. The change"
                    " (y or n closes; a approves the new text after you read it):")  # fmt: skip
        self.push_screen(Confirm(question, plan_diff(shown or "", now)))

    def action_reject(self) -> None:
        def done(reason: str | None) -> None:
            if reason is not None:
                self._do("answer_exit", "reject", reason)

        self.push_screen(Prompt("Reject the plan: the reason", "what is wrong with it"), done)

    def action_refine(self) -> None:
        def done(note: str | None) -> None:
            if note is not None:
                self._do("answer_exit", "refine", note)

        self.push_screen(Prompt("Refine the plan: the note", "what to change"), done)

    def action_answer(self) -> None:
        asked = [p for p in self.source.view.pending if p.kind == "request_user_input"]
        if not asked:
            self.notify("no questions wait for an answer", severity="warning")
            return

        def done(answers: list[str] | None) -> None:
            if answers is not None:
                self._do("answer_questions", answers)

        self.push_screen(Questions(asked[-1].questions, asked[-1].options), done)

    def action_plan(self) -> None:
        def done(title: str | None) -> None:
            if title is not None:
                self._do("start_plan", title)

        self.push_screen(Prompt("Start plan mode: the plan's title", "e.g. Add caching"), done)

    def action_end(self) -> None:
        v = self.source.view
        if not v.session_id:
            self.notify("no session to end", severity="warning")
            return

        def done(yes: bool | None) -> None:
            if yes:
                self._do("end_session")

        if v.mode == "plan":
            state = "it is in plan mode and its plan is not approved"
        elif v.plan_approved:
            state = "its plan was approved; it is in build mode"
        else:
            state = f"{one_line(v.mode)} mode"
        self.push_screen(Confirm(f"End session {one_line(v.session_id)}? ({state})"), done)

    def action_switch(self) -> None:
        def done(sid: str | None) -> None:
            if sid is not None:
                self._do("switch", sid or None)

        self.push_screen(Sessions(self.source.view.sessions), done)

    def action_filter_decision(self) -> None:
        i = DECISION_FILTERS.index(self.decision_filter)
        self.decision_filter = DECISION_FILTERS[(i + 1) % len(DECISION_FILTERS)]
        self.draw_activity(full=True)

    def action_filter_host(self) -> None:
        hosts = ["all", *sorted({a.host for a in self.source.view.activity})]
        i = hosts.index(self.host_filter) if self.host_filter in hosts else 0
        self.host_filter = hosts[(i + 1) % len(hosts)]
        self.draw_activity(full=True)

    def action_help(self) -> None:
        self.push_screen(Help())
