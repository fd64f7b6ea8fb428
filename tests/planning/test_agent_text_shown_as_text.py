"""Nothing the agent writes is interpreted by the screen: every surface that shows agent
text (the plan, a checklist step, a question, a title, a file name, a reason) shows
terminal control as visible escapes and markup as the characters it is made of.

The corpus holds the escape sequences an agent could use against the user's terminal
(OSC 52 writes the clipboard, OSC 8 hides a link target, CSI moves the cursor or hides
text, DCS, an 8-bit CSI, a carriage return that overwrites a line, a bell, a backspace)
and the invisible characters that make the text read differ from the text approved
(bidi overrides, zero-width characters, Unicode tags), plus Rich/Textual markup
(``[@click=app.approve]``).
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from guard.cli import app
from guard.fleet.pages import to_table
from guard.fleet.report import FleetReport
from guard.plaintext import HIDDEN, HIDDEN_BUT_LINES, has_hidden, visible
from guard.planning import Session, event_bus, publish
from guard.planning.answer import answer_exit

from .conftest import write_plan_file

#: name -> an attack string, each with a marker word that must stay readable
CORPUS = {
    "osc52 clipboard (BEL)": "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07clip",
    "osc52 clipboard (ST)": "\x1b]52;c;Y3VybA==\x1b\\clip",
    "osc8 hidden link": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "csi clear screen": "\x1b[2J\x1b[Hclear",
    "csi conceal": "\x1b[8mconcealed\x1b[0m",
    "csi 8-bit": "\x9b31mred",
    "dcs": "\x1bP+q544e\x1b\\dcs",
    "title set": "\x1b]0;pwned\x07title",
    "carriage return": "safe plan\rEVIL",
    "backspace": "rm -rf /\x08\x08\x08\x08\x08\x08\x08\x08echo ok",
    "bell": "ring\x07",
    "bidi override": "access = \u202euser\u202c",
    "bidi isolate": "x \u2066admin\u2069 y",
    "zero width": "git\u200bpush\u200d\ufeff",
    "unicode tags": "ok\U000e0041\U000e0042",
    "line separator": "one\u2028two",
}
MARKUP = "[@click=app.approve]approve[/] [link=https://evil.example]x[/link] [bold red]loud[/]"


def _assert_inert(out: str) -> None:
    """No control or invisible character of the corpus reaches the output."""
    bad = HIDDEN_BUT_LINES.search(out)
    assert bad is None, f"{bad.group()!r} reached the output at {bad.start()}: {out!r}"


def test_visible_escapes_every_control_format_and_separator_character() -> None:
    missed = [
        hex(n)
        for n in range(0x110000)
        if unicodedata.category(chr(n)) in ("Cc", "Cf", "Zl", "Zp", "Cs")
        and not HIDDEN.match(chr(n))
    ]
    assert not missed


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_visible_makes_each_attack_readable_and_inert(name: str) -> None:
    shown = visible(CORPUS[name])
    _assert_inert(shown)
    assert has_hidden(CORPUS[name])
    assert "\\x1b" in shown or "\\u" in shown or "\\U" in shown or "\\x" in shown or "\\r" in shown


def test_visible_keeps_lines_and_tabs_unless_asked_for_one_line() -> None:
    assert visible("a\n\tb") == "a\n\tb"
    assert visible("a\n\tb", lines=False) == "a\\n\\tb"
    assert visible("\x1b[31m") == "\\x1b[31m"
    assert visible("plain [bold]text[/] é 中") == "plain [bold]text[/] é 中"


def _plan_with_corpus() -> str:
    body = "\n".join(f"- {name}: {attack}" for name, attack in CORPUS.items())
    return f"# Plan {MARKUP}\n\n{body}\n"


runner = CliRunner()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_plan_show_shows_escapes_and_markup_as_text(plan_session: Session, repo: Path) -> None:
    """Attack: OSC 52 in the plan would put attacker text on the user's clipboard."""
    write_plan_file(plan_session, _plan_with_corpus())
    out = _run("plan", "show", "--cwd", str(repo))
    _assert_inert(out)
    assert "\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07clip" in out
    assert "[@click=app.approve]approve[/]" in out
    assert "\\u202euser\\u202c" in out and "git\\u200bpush" in out


def test_plan_status_session_show_and_events_show_agent_text_as_text(
    plan_session: Session, repo: Path
) -> None:
    write_plan_file(plan_session, "# Plan\n\n1. ok\n")
    with plan_session.transaction() as s:
        s.title = "Title \x1b]52;c;ZXZpbA==\x07 " + MARKUP
    publish(plan_session, event_bus.PlanExit(outcome="requested", text=CORPUS["csi conceal"],
                                             plan_path=plan_session.plan_path))  # fmt: skip
    answer_exit(plan_session, "refine", "note " + CORPUS["osc52 clipboard (BEL)"])
    for args in (("plan", "status"), ("session", "show"), ("events",), ("events", "--audit")):
        out = _run(*args, "--cwd", str(repo))
        _assert_inert(out)
    assert "\\x1b]52" in _run("session", "show", "--cwd", str(repo))
    assert "\\x1b]52" in _run("events", "--cwd", str(repo))


def test_plan_exit_echoes_a_note_with_escapes_made_visible(
    plan_session: Session, repo: Path
) -> None:
    write_plan_file(plan_session)
    out = _run("plan", "exit", "--refine", CORPUS["title set"], "--cwd", str(repo))
    _assert_inert(out)
    assert "\\x1b]0;pwned\\x07title" in out


def test_fleet_text_report_shows_machine_and_agent_names_as_text() -> None:
    rep = FleetReport()
    rep.add({"type": "verdict", "hostname": "box\x1b]52;c;ZXZpbA==\x07", "agent": "plan\x1b[2J",
             "decision": "deny", "rule": "r", "session": "s", "policy_digest": "d"})  # fmt: skip
    out = to_table(rep)
    _assert_inert(out)
    assert "box\\x1b]52" in out


def test_replay_text_report_shows_tool_inputs_as_text(tmp_path: Path, repo: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    call = {"type": "assistant", "timestamp": "2026-12-05T09:00:00Z", "message": {
        "content": [{"type": "tool_use", "id": "t1", "name": "Write",
                     "input": {"file_path": "\x1b]52;c;eA==\x07a.py",
                               "content": "x"}}]}}  # fmt: skip
    transcript.write_text(json.dumps(call) + "\n")
    result = runner.invoke(app, ["replay", str(transcript), "--host", "claude-code",
                                 "--cwd", str(repo)])  # fmt: skip
    _assert_inert(result.output)
    assert "\\x1b]52" in result.output, result.output
