"""A streaming parser for ``<proposed_plan>`` blocks in model output.

Feed it chunks of any size. A tag counts only when it stands alone on its
line (surrounding whitespace allowed), also when the line arrives split
across chunks. Blocks do not nest: inside a block an opening tag is plain
plan text, outside one a closing tag is plain text. A block left open is
closed at the end of the stream. The last block is *the* plan.

Normal text and plan text come out as separate deltas, as early as the
parser can be sure a partial line is not a tag line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import guard.planning.event_bus as events
from guard.planning._vocabulary import Mode
from guard.planning.artifact import write_plan
from guard.planning.session import Session

OPEN_TAG = "<proposed_plan>"
CLOSE_TAG = "</proposed_plan>"

SegmentKind = Literal["text", "plan_start", "plan", "plan_end"]


@dataclass(frozen=True, slots=True)
class Segment:
    """``text`` and ``plan`` carry deltas; ``plan_start``/``plan_end`` mark a block."""

    kind: SegmentKind
    text: str = ""


class ProposedPlanParser:
    def __init__(self) -> None:
        self._in_plan = False
        self._line = ""  # the current line, not yet emitted
        self._committed = False  # the current line is known not to be a tag line
        self._block: list[str] = []
        self._plans: list[str] = []
        self._finished = False

    @property
    def in_plan(self) -> bool:
        return self._in_plan

    @property
    def plans(self) -> list[str]:
        """Every completed block so far, in order."""
        return list(self._plans)

    @property
    def plan(self) -> str | None:
        """The last completed block (the last block wins), or None."""
        return self._plans[-1] if self._plans else None

    def feed(self, chunk: str) -> list[Segment]:
        if self._finished:
            raise ValueError("feed() after finish(): start a new parser for a new stream")
        out: list[Segment] = []
        while chunk:
            newline = chunk.find("\n")
            if newline < 0:
                self._partial(chunk, out)
                break
            self._partial(chunk[: newline + 1], out, ends_line=True)
            chunk = chunk[newline + 1 :]
        return out

    def finish(self) -> list[Segment]:
        """End of stream: flush the last line, close an open block."""
        if self._finished:
            return []
        out: list[Segment] = []
        if self._line:
            line, self._line = self._line, ""
            if not self._committed and self._is_tag(line):
                self._toggle(out)
            else:
                self._emit(line, out)
        self._committed = False
        if self._in_plan:
            self._close(out)
        self._finished = True
        return out

    def parse(self, chunks: Iterable[str]) -> list[Segment]:
        """Feed all ``chunks`` and finish; convenience for whole streams."""
        out: list[Segment] = []
        for chunk in chunks:
            out.extend(self.feed(chunk))
        out.extend(self.finish())
        return out

    # ---- internals -------------------------------------------------------------------------

    def _tag(self) -> str:
        return CLOSE_TAG if self._in_plan else OPEN_TAG

    def _is_tag(self, line: str) -> bool:
        return line.strip() == self._tag()

    def _could_be_tag(self, partial: str) -> bool:
        rest = partial.lstrip()
        if not rest:
            return True
        tag = self._tag()
        return tag.startswith(rest) or (rest.startswith(tag) and not rest[len(tag) :].strip())

    def _partial(self, piece: str, out: list[Segment], ends_line: bool = False) -> None:
        if self._committed:
            self._emit(piece, out)
        else:
            self._line += piece
            if ends_line:
                line, self._line = self._line, ""
                if self._is_tag(line):
                    self._toggle(out)
                else:
                    self._emit(line, out)
            elif not self._could_be_tag(self._line):
                line, self._line = self._line, ""
                self._committed = True
                self._emit(line, out)
        if ends_line:
            self._committed = False

    def _emit(self, text: str, out: list[Segment]) -> None:
        if not text:
            return
        if self._in_plan:
            self._block.append(text)
            out.append(Segment("plan", text))
        else:
            out.append(Segment("text", text))

    def _toggle(self, out: list[Segment]) -> None:
        if self._in_plan:
            self._close(out)
        else:
            self._in_plan = True
            self._block = []
            out.append(Segment("plan_start"))

    def _close(self, out: list[Segment]) -> None:
        self._plans.append("".join(self._block))
        self._block = []
        self._in_plan = False
        out.append(Segment("plan_end"))


def coalesce(segments: Iterable[Segment]) -> list[Segment]:
    """Merge adjacent deltas of the same kind (markers are kept as they are)."""
    out: list[Segment] = []
    for seg in segments:
        if out and seg.kind in ("text", "plan") and out[-1].kind == seg.kind:
            out[-1] = Segment(seg.kind, out[-1].text + seg.text)
        else:
            out.append(seg)
    return out


def split_proposed_plan(text: str) -> tuple[str, str | None]:
    """Whole-text helper: (the normal text, the last proposed plan or None)."""
    parser = ProposedPlanParser()
    segments = parser.parse([text])
    return "".join(s.text for s in segments if s.kind == "text"), parser.plan


def stream_into_session(
    session: Session,
    chunks: Iterable[str],
    on_segment: Callable[[Segment], None] | None = None,
) -> str | None:
    """Parse a model's streamed reply for a session: publish ``PlanDelta`` events for plan
    text, write the last block to the plan artifact (in plan mode, where its path is
    fixed) and publish ``PlanCompleted``. ``on_segment`` sees every segment (to draw the
    two lanes). Returns the last proposed plan, or None when the reply held none.
    """
    parser = ProposedPlanParser()

    def handle(segments: list[Segment]) -> None:
        for seg in segments:
            if seg.kind == "plan":
                events.publish(session, events.PlanDelta(delta=seg.text))
            if on_segment is not None:
                on_segment(seg)

    for chunk in chunks:
        handle(parser.feed(chunk))
    handle(parser.finish())
    plan = parser.plan
    if plan is None:
        return None
    session.refresh()
    path = write_plan(session, plan) if session.mode is Mode.PLAN and plan.strip() else None
    events.publish(
        session, events.PlanCompleted(text=plan, path=str(path) if path is not None else None)
    )
    return plan
