from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from guard.paths import data_dir, project_key
from guard.planning import Mode, Session, SessionError, current_mode, sessions_dir
from guard.planning.session import SessionNotFound


def test_session_persists_under_worktree_and_reloads(repo: Path) -> None:
    s = Session.start(repo / ".", "build")
    path = repo / ".openoxide" / "sessions" / f"{s.id}.json"
    assert path.is_file()
    data = json.loads(path.read_text())
    assert data["mode"] == "build" and data["worktree"] == str(repo)
    again = Session.load(s.id, repo)
    assert again.id == s.id and again.mode is Mode.BUILD and again.plan_path is None


def test_session_from_subdirectory_uses_the_worktree(repo: Path) -> None:
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    s = Session.start(sub)
    assert s.path.parent == repo / ".openoxide" / "sessions"
    assert Session.load(s.id, repo).id == s.id


def test_session_without_vcs_falls_back_to_data_dir(plain_dir: Path) -> None:
    s = Session.start(plain_dir)
    assert s.directory == data_dir() / "sessions" / project_key(plain_dir)
    assert s.worktree is None
    assert not (plain_dir / ".openoxide").exists()
    assert Session.load(s.id, plain_dir).id == s.id


def test_sessions_dir_is_gitignored(repo: Path, session: Session) -> None:
    import subprocess

    out = subprocess.run(
        ["git", "-C", str(repo), "check-ignore", "-q", str(session.path)], check=False
    )
    assert out.returncode == 0, "session state must not be committed by accident"


def test_start_in_plan_mode_fixes_plan_path_in_plans_dir(repo: Path) -> None:
    s = Session.start(repo, "plan", title="Refactor Auth / Login")
    assert s.mode is Mode.PLAN
    assert s.plan_path is not None
    p = Path(s.plan_path)
    assert p.parent == repo / ".openoxide" / "plans"
    assert p.name.endswith(f"-{s.id}-refactor-auth-login.md")
    assert p.parent.is_dir()


def test_load_rejects_path_like_session_id(repo: Path) -> None:
    """Attack: a session id that climbs out of the sessions directory."""
    for bad in ("../../etc/passwd", "a/b", "", ".hidden", "x" * 200):
        with pytest.raises(SessionError, match="invalid session id"):
            Session.load(bad, repo)


def test_missing_session_names_the_fix(repo: Path) -> None:
    with pytest.raises(SessionNotFound, match="guard session start"):
        Session.load("nope", repo)


def test_corrupt_session_file_is_a_clear_error(repo: Path, session: Session) -> None:
    session.path.write_text('{"id": "x", "mode": "sideways"')
    with pytest.raises(SessionError, match=str(session.path)):
        Session.load(session.id, repo)


def test_session_file_for_another_id_is_refused(repo: Path, session: Session) -> None:
    """Attack: a copied session file impersonating another session."""
    other = session.path.with_name("other.json")
    other.write_text(session.path.read_text())
    with pytest.raises(SessionError, match="rename the file"):
        Session.load("other", repo)


def test_duplicate_explicit_id_is_refused(repo: Path) -> None:
    Session.start(repo, id="host-session-1")
    with pytest.raises(SessionError, match="already exists"):
        Session.start(repo, id="host-session-1")
    assert Session.load_or_start("host-session-1", repo).id == "host-session-1"


def test_current_mode_is_none_without_sessions(repo: Path) -> None:
    assert current_mode(repo) is None


def test_current_mode_is_the_newest_open_sessions(repo: Path) -> None:
    a = Session.start(repo)
    b = Session.start(repo)
    found = current_mode(repo)
    assert found is not None and found[1].id == b.id and found[0] == "build"
    a.set_mode("plan", "test")
    found = current_mode(repo / ".")
    assert found is not None and found == ("plan", a), "an open plan session puts it in plan"
    b.set_mode("plan", "test")
    found = current_mode(repo / ".")
    assert found is not None and found == ("plan", found[1]) and found[1].id == b.id


def test_leaving_plan_mode_without_approved_exit_is_refused(plan_session: Session) -> None:
    """Attack: flipping a plan-mode session to build directly, skipping the user's approval."""
    with pytest.raises(SessionError, match="guard plan exit --approve"):
        plan_session.set_mode("build", "sneaky")
    assert Session.load(plan_session.id, plan_session.project).mode is Mode.PLAN


def test_transaction_writes_nothing_on_error(session: Session) -> None:
    before = session.path.read_bytes()
    with pytest.raises(RuntimeError), session.transaction() as s:
        s.notes.append("half")
        raise RuntimeError("boom")
    assert session.path.read_bytes() == before
    assert [p.name for p in session.directory.iterdir() if p.name.endswith(".tmp")] == []


def test_updates_leave_no_temp_files(session: Session) -> None:
    for n in range(5):
        with session.transaction() as s:
            s.notes.append(str(n))
    names = sorted(os.listdir(session.directory))
    assert names == sorted([".gitignore", f"{session.id}.json", f"{session.id}.lock"]), names
    assert Session.load(session.id, session.project).notes == ["0", "1", "2", "3", "4"]


def test_list_all_orders_by_activity(repo: Path) -> None:
    a, b, c = Session.start(repo), Session.start(repo), Session.start(repo)
    a.deliver("hi")
    assert [s.id for s in Session.list_all(repo)] == [a.id, c.id, b.id]
    assert sessions_dir(repo) == repo / ".openoxide" / "sessions"
