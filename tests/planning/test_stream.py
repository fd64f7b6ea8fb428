from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from guard.planning import ProposedPlanParser, Session, event_bus, read_events, read_plan
from guard.planning.stream import Segment, coalesce, split_proposed_plan, stream_into_session


def run(chunks: list[str]) -> tuple[list[Segment], ProposedPlanParser]:
    parser = ProposedPlanParser()
    return coalesce(parser.parse(chunks)), parser


def test_text_and_plan_are_separated() -> None:
    segs, parser = run(["Intro\n<proposed_plan>\n# Plan\n- a\n</proposed_plan>\nBye\n"])
    assert segs == [
        Segment("text", "Intro\n"),
        Segment("plan_start"),
        Segment("plan", "# Plan\n- a\n"),
        Segment("plan_end"),
        Segment("text", "Bye\n"),
    ]
    assert parser.plan == "# Plan\n- a\n"


def test_tag_split_across_chunks_is_recognised() -> None:
    segs, parser = run(["Intro\n<prop", "osed_pl", "an>\n# P\n</propos", "ed_plan>", "\nend"])
    assert parser.plan == "# P\n"
    assert [s.kind for s in segs] == ["text", "plan_start", "plan", "plan_end", "text"]
    assert segs[-1] == Segment("text", "end")


def test_tag_with_surrounding_whitespace_counts() -> None:
    _, parser = run(["  <proposed_plan>  \r\nx\n\t</proposed_plan>\n"])
    assert parser.plan == "x\n"


def test_tag_not_alone_on_its_line_is_text() -> None:
    text = "see <proposed_plan> here\n<proposed_plan> x\n`<proposed_plan>`\n"
    segs, parser = run([text])
    assert parser.plan is None
    assert segs == [Segment("text", text)]


def test_no_nesting_inner_open_tag_is_plan_text() -> None:
    _, parser = run(["<proposed_plan>\na\n<proposed_plan>\nb\n</proposed_plan>\nafter\n"])
    assert parser.plan == "a\n<proposed_plan>\nb\n"


def test_close_tag_outside_a_block_is_text() -> None:
    segs, parser = run(["</proposed_plan>\nhello\n"])
    assert parser.plan is None and segs == [Segment("text", "</proposed_plan>\nhello\n")]


def test_unterminated_block_closes_at_end_of_stream() -> None:
    segs, parser = run(["<proposed_plan>\n# Plan\n- never closed"])
    assert parser.plan == "# Plan\n- never closed"
    assert segs[-1] == Segment("plan_end")


def test_close_tag_without_trailing_newline_at_end() -> None:
    _, parser = run(["<proposed_plan>\nx\n</proposed_plan>"])
    assert parser.plan == "x\n" and parser.plans == ["x\n"]


def test_last_block_wins() -> None:
    text = (
        "<proposed_plan>\nfirst\n</proposed_plan>\nhmm\n<proposed_plan>\nsecond\n</proposed_plan>\n"
    )
    _, parser = run([text])
    assert parser.plans == ["first\n", "second\n"] and parser.plan == "second\n"
    assert split_proposed_plan(text) == ("hmm\n", "second\n")


def test_text_is_emitted_before_the_line_ends() -> None:
    """Streaming: a partial line that cannot be a tag is emitted at once."""
    parser = ProposedPlanParser()
    assert parser.feed("Hello wor") == [Segment("text", "Hello wor")]
    assert parser.feed("<proposed_plan>") == [Segment("text", "<proposed_plan>")]
    assert parser.feed("\n<propo") == [Segment("text", "\n")]  # held: may become a tag
    assert parser.feed("sed_plan>\n") == [Segment("plan_start")]
    assert parser.feed("step") == [Segment("plan", "step")]


def test_empty_chunks_and_empty_stream() -> None:
    segs, parser = run(["", "", ""])
    assert segs == [] and parser.plan is None


# Texts built from pieces that stress tag detection.
PIECES = st.sampled_from(
    [
        "<proposed_plan>",
        "</proposed_plan>",
        "\n",
        "\r\n",
        " ",
        "\t",
        "text",
        "<",
        ">",
        "<proposed",
        "_plan>",
        "</",
        "# Plan",
        "- step",
        "é",
        "<proposed_plan>x",
    ]
)
TEXTS = st.lists(PIECES, max_size=30).map("".join) | st.text(max_size=60)


@st.composite
def text_and_cuts(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(TEXTS)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=len(text) + 1)))
    chunks, prev = [], 0
    for cut in [*cuts, len(text)]:
        chunks.append(text[prev:cut])
        prev = cut
    return text, chunks


@settings(max_examples=500, deadline=None)
@given(text_and_cuts())
def test_any_chunking_gives_the_same_segments(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    whole, whole_parser = run([text])
    pieces, piece_parser = run(chunks)
    chars, char_parser = run(list(text))
    assert pieces == whole == chars
    assert piece_parser.plans == whole_parser.plans == char_parser.plans
    assert pieces == oracle(text), "the streaming parser disagrees with the line-based rule"


def oracle(text: str) -> list[Segment]:
    """The rule stated plainly, on whole lines: a tag counts when alone on its line."""
    out: list[Segment] = []
    in_plan = False
    lines = [line for line in re.split(r"(?<=\n)", text) if line]
    for line in lines:
        tag = "</proposed_plan>" if in_plan else "<proposed_plan>"
        if line.strip() == tag:
            out.append(Segment("plan_end" if in_plan else "plan_start"))
            in_plan = not in_plan
        else:
            out.append(Segment("plan" if in_plan else "text", line))
    if in_plan:
        out.append(Segment("plan_end"))
    return coalesce(out)


def test_stream_into_session_writes_the_last_block_and_publishes(plan_session: Session) -> None:
    seen: list[Segment] = []
    reply = "thinking\n<proposed_plan>\n# v1\n</proposed_plan>\n<proposed_plan>\n# v2\n"
    plan = stream_into_session(
        plan_session, [reply[i : i + 5] for i in range(0, len(reply), 5)], on_segment=seen.append
    )
    assert plan == "# v2\n"
    assert read_plan(plan_session) == "# v2\n"
    evs = read_events(plan_session)
    deltas = "".join(e.delta for e in evs if isinstance(e, event_bus.PlanDelta))
    assert deltas == "# v1\n# v2\n"
    done = evs[-1]
    assert isinstance(done, event_bus.PlanCompleted) and done.path == plan_session.plan_path
    assert [s.kind for s in coalesce(seen)] == [
        "text",
        "plan_start",
        "plan",
        "plan_end",
        "plan_start",
        "plan",
        "plan_end",
    ]


def test_stream_into_session_in_build_mode_writes_no_artifact(session: Session) -> None:
    """A plan proposed outside plan mode is reported, but there is no artifact path to write."""
    plan = stream_into_session(session, ["<proposed_plan>\nx\n</proposed_plan>\n"])
    assert plan == "x\n" and session.refresh().plan_path is None
    done = read_events(session)[-1]
    assert isinstance(done, event_bus.PlanCompleted) and done.path is None
