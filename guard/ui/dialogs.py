"""The cockpit's dialogs: one line of text, the model's questions, yes/no, sessions, help.

Every text in them that an agent could have written (a question, an option, a title)
is drawn as plain text (:func:`guard.plaintext.visible` in a ``Text``), never as markup.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from guard.plaintext import visible

HELP = """\
guard ui: the plan-mode cockpit (the same state as the guard CLI)

Pending
  a   approve the plan on screen (asks; guard plan exit --approve --digest), or
      accept plan mode; a long plan is approved once scrolled to its end
  o   read the whole plan in $PAGER
  r   reject the plan, with a reason (guard plan exit --reject REASON)
  f   ask for a refinement, with a note (guard plan exit --refine NOTE)
  i   answer the model's questions (guard plan answer ...)

Session
  p   start plan mode with a title (guard plan start TITLE)
  e   end the session (guard session end)
  s   switch to another session of this worktree

Activity
  d   filter by decision: all deny ask allow confined violation plan
  h   filter by host
  up/down  select a line: its reason, rule and effects show below it
  enter    the whole line in a dialog

  ?   this help      q   quit      escape  close a dialog
"""


class Prompt(ModalScreen[str | None]):
    """One line of text (a title, a reason, a note); escape cancels."""

    AUTO_FOCUS = "Input"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: str, placeholder: str = "") -> None:
        super().__init__()
        self.question = question
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(visible(self.question, lines=False)))
            yield Input(placeholder=self.placeholder, id="prompt")
            yield Label("enter: send   escape: cancel", classes="hint")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Questions(ModalScreen[list[str] | None]):
    """One answer per question of the model's request_user_input: the model's options are
    listed, numbered; a number picks that option, any other text is the answer as typed."""

    AUTO_FOCUS = "Input"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(
        self,
        questions: tuple[str, ...],
        options: tuple[tuple[tuple[str, str], ...], ...] = (),
    ) -> None:
        super().__init__()
        self.questions = questions
        self.options = options

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            for n, q in enumerate(self.questions):
                yield Label(Text(f"{n + 1}. {visible(q)}", style="bold"))
                for k, (label, about) in enumerate(self._options(n)):
                    shown = f"   {k + 1}) {visible(label, lines=False)}"
                    if about:
                        shown += f" — {visible(about, lines=False)}"
                    yield Label(Text(shown))
                yield Input(id=f"answer-{n}", placeholder="an option's number, or your answer")
            yield Label("enter: next / send   escape: cancel", classes="hint")

    def _options(self, n: int) -> tuple[tuple[str, str], ...]:
        return self.options[n] if n < len(self.options) else ()

    def answer(self, n: int, typed: str) -> str:
        """The option ``typed`` names by number, else ``typed`` itself."""
        options = self._options(n)
        words = typed.strip()
        if words.isdigit() and 1 <= int(words) <= len(options):
            return options[int(words) - 1][0]
        return typed

    @on(Input.Submitted)
    def _next(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        at = inputs.index(event.input)
        if at + 1 < len(inputs):
            inputs[at + 1].focus()
            return
        self.dismiss([self.answer(n, i.value) for n, i in enumerate(inputs)])

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """A yes/no question; ``detail`` (a diff, a note) shows under it, scrollable."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "yes", "yes"),
        Binding("n,escape", "no", "no"),
    ]

    def __init__(self, question: str, detail: Text | None = None) -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(visible(self.question)))
            if self.detail is not None:
                with VerticalScroll(classes="detail"):
                    yield Static(self.detail)
            yield Label("y: yes   n/escape: no", classes="hint")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class Sessions(ModalScreen[str | None]):
    """Pick a session of the worktree; the first entry follows the deciding one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    FOLLOW = "(follow the deciding session)"

    def __init__(self, sessions: list[tuple[str, str, str, str]]) -> None:
        super().__init__()
        self.sessions = sessions

    def compose(self) -> ComposeResult:
        options = [Option(self.FOLLOW, id="")]
        for sid, mode, state, title in self.sessions:
            line = visible(f"{sid}  {mode:5}  {state:8}  {title}", lines=False)
            options.append(Option(Text(line), id=sid))
        with Vertical(classes="dialog"):
            yield Label(Text("Sessions of this worktree (newest first)"))
            yield OptionList(*options, id="sessions")
            yield Label("enter: show   escape: cancel", classes="hint")

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id or "")

    def action_cancel(self) -> None:
        self.dismiss(None)


class Help(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "close")
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="help"):
            yield Static(Text(HELP))

    def action_close(self) -> None:
        self.dismiss(None)


