"""The plain session reader (guard/planning/session_file.py, what ``guard mode`` uses)
agrees with the session model on every file: the same facts for a good one, the very
same SessionError for a bad one (a bad file fails closed with one line naming it)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guard.planning._vocabulary import SessionError
from guard.planning.deciding import (
    deciding_facts,
    deciding_session,
    facts_of,
    list_facts,
    read_facts,
)
from guard.planning.owner import Owner
from guard.planning.session import Session


def _started(repo: Path, mode: str = "build", sid: str = "s-1") -> Session:
    return Session.start(repo, mode, id=sid, title="Add caching")


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _error(read: Callable[[], object]) -> str:
    with pytest.raises(SessionError) as exc:
        read()
    return str(exc.value)


@pytest.mark.parametrize("mode", ["build", "plan"])
def test_a_good_file_gives_the_models_facts(repo: Path, mode: str) -> None:
    s = _started(repo, mode)
    with s.transaction() as t:
        t.owner = Owner.this_process("guard mcp")
        t.checklist = []
    assert read_facts(s.path) == facts_of(Session.load_file(s.path))
    assert read_facts(s.path).owner_alive and read_facts(s.path).decides


def test_the_same_session_decides_with_the_same_reason(repo: Path) -> None:
    _started(repo, "build", "b-1")
    _started(repo, "plan", "p-1")
    _started(repo, "build", "b-2")
    model = deciding_session(repo)
    plain = deciding_facts(repo)
    assert model is not None and plain is not None
    assert (plain[0].id, plain[1]) == (model[0].id, model[1])
    assert plain[0].id == "p-1"
    assert [f.id for f in list_facts(repo)] == [s.id for s in Session.list_all(repo)]


def test_an_orphaned_plan_session_decides_for_both(repo: Path) -> None:
    s = _started(repo, "plan")
    with s.transaction() as t:  # an owner that does not run: orphaned
        t.owner = Owner(pid=2**22 + 7, started=1, boot="another boot", host=os.uname().nodename)
    facts = read_facts(s.path)
    assert facts.status == Session.load_file(s.path).status == "orphaned"
    model, plain = deciding_session(repo), deciding_facts(repo)
    assert model is not None and plain is not None and plain[1] == model[1]
    assert "orphaned" in plain[1]


BAD: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("a mode guard does not know", lambda d: d.update(mode="review")),
    ("a missing required field", lambda d: d.pop("worktree")),
    ("a field the model does not have", lambda d: d.update(colour="red")),
    ("a number for a string", lambda d: d.update(title=7)),
    ("a string that is no number", lambda d: d.update(active_ns="soon")),
    ("another version", lambda d: d.update(version=2)),
    ("an owner without its pid", lambda d: d.update(owner={"started": 1, "boot": "b",
                                                           "host": "h"})),
    ("a blank checklist step", lambda d: d.update(checklist=[{"step": "  ",
                                                              "status": "pending"}])),
    ("a checklist step status unknown", lambda d: d.update(checklist=[{"step": "x",
                                                                       "status": "done"}])),
    ("a pending request of no known kind", lambda d: d.update(pending=[{"kind": "x",
                                                                        "at": "t"}])),
    ("an exit record with an extra key", lambda d: d.update(decisions=[
        {"at": "t", "decision": "approve", "extra": 1}])),
    ("plans seen that are no numbers", lambda d: d.update(plans_seen={"a.md": ["x"]})),
    ("a list for a state", lambda d: d.update(state=["open"])),
    ("another id than the file's name", lambda d: d.update(id="s-2")),
]


@pytest.mark.parametrize(("what", "change"), BAD, ids=[w for w, _ in BAD])
def test_a_bad_file_fails_with_the_models_error(
    repo: Path, what: str, change: Callable[[dict[str, Any]], None]
) -> None:
    s = _started(repo)
    _edit(s.path, change)
    model = _error(lambda: Session.load_file(s.path))
    assert _error(lambda: read_facts(s.path)) == model, what
    assert _error(lambda: deciding_facts(repo)) == model
    assert str(s.path) in model and "\n" not in model


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '{"id": "s-1"}', "\ufeff{}"])
def test_a_file_that_is_no_session_fails_with_the_models_error(repo: Path, text: str) -> None:
    s = _started(repo)
    s.path.write_text(text)
    assert _error(lambda: read_facts(s.path)) == _error(lambda: Session.load_file(s.path))


def test_a_form_the_model_coerces_reads_as_the_model_reads_it(repo: Path) -> None:
    """The hand check accepts only exact JSON types; what the model coerces (a number in a
    string) it leaves to the model, and both read the same facts."""
    s = _started(repo)
    _edit(s.path, lambda d: d.update(active_ns="12", turn=1.0, version=True))
    assert read_facts(s.path) == facts_of(Session.load_file(s.path))
    assert read_facts(s.path).active_ns == 12


def test_an_unreadable_or_missing_file_fails_as_the_model_says(repo: Path) -> None:
    s = _started(repo)
    gone = s.path.with_name("nosuch.json")
    assert _error(lambda: read_facts(gone)) == _error(lambda: Session.load_file(gone))
    s.path.unlink()
    s.path.mkdir()  # a directory where the file should be: cannot be read
    assert _error(lambda: read_facts(s.path)) == _error(lambda: Session.load_file(s.path))
