"""The cockpit's plan lane: the plan rendered a page at a time, and whether the user saw it all.

A plan is split into pages of about :data:`PAGE_BYTES` (at blank lines outside code
fences); the first page is drawn at once and the next one when the user scrolls to the
bottom of what is drawn, so a plan of megabytes paints as fast as a short one.
:attr:`PlanLane.seen_end` says whether the user has scrolled to the end of the last
page: the cockpit approves a plan of several pages only then (or after the whole plan
was opened in ``$PAGER``). Text is made visible and drawn as markdown with its hidden
parts shown (:func:`guard.planning.render.plan_markdown`).
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from guard.planning.render import plan_markdown

#: Bytes (about) of one page of the plan drawn at a time.
PAGE_BYTES = 8 * 1024


def pages(text: str, size: int = PAGE_BYTES) -> list[str]:
    """``text`` cut into pages of about ``size`` characters, at a blank line outside a code
    fence (or anywhere past four pages' worth, so a huge fence is cut too)."""
    out: list[str] = []
    page: list[str] = []
    length, fence = 0, False
    for line in text.splitlines(keepends=True):
        page.append(line)
        length += len(line)
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if length >= size and ((not fence and not line.strip()) or length >= 4 * size):
            out.append("".join(page))
            page, length = [], 0
    if page or not out:
        out.append("".join(page))
    return out


class PlanLane(VerticalScroll):
    """The plan document, drawn lazily; knows whether the user scrolled to its end."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._pages: list[str] = []
        self._drawn = 0
        self._more: Static | None = None
        self.seen_end = True

    @property
    def paged(self) -> bool:
        """The plan has more than one page: approving it needs :attr:`seen_end`."""
        return len(self._pages) > 1

    def show_message(self, message: Text) -> None:
        self._pages, self._drawn, self.seen_end = [], 0, True
        self.remove_children()
        self._more = None
        self.mount(Static(message))

    def show_plan(self, text: str) -> None:
        """Draw the first page of ``text`` (the rest as the user scrolls)."""
        self._pages = pages(text)
        self._drawn = 1
        self.seen_end = len(self._pages) == 1
        self.remove_children()
        self._more = None
        self.mount(Static(plan_markdown(self._pages[0]), classes="plan-page"))
        if self.paged:
            self._more = Static(self._more_text(), classes="plan-more")
            self.mount(self._more)
        self.scroll_home(animate=False)

    def _more_text(self) -> Text:
        left = sum(p.count("\n") for p in self._pages[self._drawn :])
        said = (f"... {left} more lines: scroll down to read them (o: the whole plan in"
                " $PAGER); the plan is approved only once read to its end")  # fmt: skip
        return Text(said, style="bold")

    def _next_page(self) -> None:
        if self._drawn >= len(self._pages):
            return
        page = Static(plan_markdown(self._pages[self._drawn]), classes="plan-page")
        self._drawn += 1
        if self._more is not None:
            self.mount(page, before=self._more)
            if self._drawn >= len(self._pages):
                self._more.remove()
                self._more = None
            else:
                self._more.update(self._more_text())
        else:
            self.mount(page)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new < self.max_scroll_y - 1:
            return
        if self._drawn < len(self._pages):
            self._next_page()
        elif self._pages:
            self.seen_end = True
