"""Plan mode belongs to the worktree it began in and to the agent run, not to a call's cwd.

Each test attacks plan mode's state the way issue 28 found it broken: the model
`cd`s into a submodule, a nested repository, another `git worktree` checkout of
the same repository or a symlinked path, then writes the outer worktree's
``src/``. Every answer comes from the real hook process fed the payload Claude
Code sends; afterwards the disk and the outer project's audit log are checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import HookRunner
from .payloads import answer_of, claude_payload

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
ORIGINAL = "print('hello')\n"


def git(env: dict[str, str], *args: str, cwd: Path) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, env=env, check=True, capture_output=True)


def guard_cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def outer(repo: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    """The repo with a real submodule (file://), a nested repository and a linked checkout."""
    origin = tmp_path / "lib-origin"
    origin.mkdir()
    (origin / "lib.py").write_text("X = 1\n")
    git(env, "init", "-q", ".", cwd=origin)
    git(env, "add", ".", cwd=origin)
    git(env, "commit", "-qm", "lib", cwd=origin)
    git(env, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
        f"file://{origin}", "sub", cwd=repo)  # fmt: skip
    git(env, "commit", "-qm", "add sub", cwd=repo)
    nested = repo / "tools" / "nested"
    nested.mkdir(parents=True)
    git(env, "init", "-q", ".", cwd=nested)
    git(env, "worktree", "add", "-q", str(tmp_path / "linked"), cwd=repo)
    (tmp_path / "link").symlink_to(repo)
    return repo


def plan_start(env: dict[str, str], where: Path) -> dict[str, Any]:
    proc = guard_cli(env, "plan", "start", "Refactor", "--json", cwd=where)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def decision(proc: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    out = answer_of(proc)["hookSpecificOutput"]
    return out["permissionDecision"], out.get("permissionDecisionReason", "")


def attack(run_hook: HookRunner, cwd: Path, target: Path) -> list[tuple[str, str]]:
    """Write, then Bash, to ``target`` from ``cwd``, as Claude Code in acceptEdits sends them."""
    write = claude_payload("Write", {"file_path": str(target), "content": "pwned\n"}, cwd)
    bash = claude_payload("Bash", {"command": f"echo pwned > {target}"}, cwd)
    return [decision(run_hook("claude-code", p, cwd=cwd)) for p in (write, bash)]


def test_without_a_plan_session_the_submodule_is_build(
    outer: Path, run_hook: HookRunner
) -> None:
    """The control: the same calls are allowed when no plan session is open (so the
    refusals below come from the outer worktree's plan session, nothing else)."""
    answers = attack(run_hook, outer / "sub", outer / "src" / "app.py")
    assert [a for a, _ in answers] == ["allow", "allow"]


@pytest.mark.parametrize("where", ["sub", "tools/nested", "../linked", "../link/src"])
def test_plan_mode_holds_in_every_checkout_inside_or_beside_the_worktree(
    outer: Path, env: dict[str, str], run_hook: HookRunner, where: str
) -> None:
    """Attack: `cd` into a submodule / nested repo / `git worktree` checkout / symlinked
    path, then write the outer worktree's src/. Both the Write and the Bash are refused."""
    session = plan_start(env, outer)
    cwd = outer / where
    targets = [outer / "src" / "app.py"]
    if where == "../linked":
        targets.append(cwd / "src" / "app.py")  # the checkout's own copy of the file
    for target in targets:
        for action, reason in attack(run_hook, cwd, target):
            assert action == "deny", reason
            assert session["plan_path"] in reason, "the refusal names the session's plan file"
    assert (outer / "src" / "app.py").read_text() == ORIGINAL
    assert not (outer / "sub" / ".openoxide").exists(), "no state in the submodule"
    log = Path(env["HOME"]) / ".local/share/openoxide/audit"
    records = [json.loads(line) for f in log.glob("repo-*.jsonl") for line in f.open()]
    denied = [r for r in records if r.get("decision") == "deny"]
    assert len(denied) == 2 * len(targets), "recorded in the outer project's audit log"


def test_a_changed_path_inside_the_plan_worktree_is_plan_whatever_the_cwd(
    outer: Path, tmp_path: Path, env: dict[str, str], run_hook: HookRunner
) -> None:
    """Attack: from a directory under no version control, write into the plan worktree."""
    plan_start(env, outer)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for action, reason in attack(run_hook, elsewhere, outer / "src" / "app.py"):
        assert action == "deny", reason
    assert (outer / "src" / "app.py").read_text() == ORIGINAL


def test_the_plan_file_stays_writable_from_the_submodule(
    outer: Path, env: dict[str, str], run_hook: HookRunner
) -> None:
    """The outer session's policy and plan directory apply: its plan file may be written."""
    session = plan_start(env, outer)
    payload = claude_payload(
        "Write", {"file_path": session["plan_path"], "content": "# Plan\n"}, outer / "sub"
    )
    action, reason = decision(run_hook("claude-code", payload, cwd=outer / "sub"))
    assert action == "allow", reason


def test_the_agent_run_is_bound_to_the_plan_session_wherever_it_goes(
    outer: Path, tmp_path: Path, env: dict[str, str], run_hook: HookRunner
) -> None:
    """Attack: leave every worktree (cwd under no version control) and write the plan
    worktree's src/ with a program whose target no analysis sees. The agent run's first
    call bound it to the plan session, so the call is still plan: it runs confined, and
    running the rewritten command for real leaves the file unchanged."""
    session = plan_start(env, outer)
    first = claude_payload("Read", {"file_path": str(outer / "src" / "app.py")}, outer)
    first["session_id"] = "cc-bound"
    assert decision(run_hook("claude-code", first, cwd=outer))[0] == "allow"
    from guard.planning import Session

    stored = Session.load(session["id"], outer)
    assert stored.host_sessions == ["cc-bound"], "the binding is stored in the session file"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    app = outer / "src" / "app.py"
    sneaky = f"python3 -c \"open('{app}', 'w').write('pwned')\""
    for host_session, bound in (("cc-other", False), ("cc-bound", True)):
        payload = claude_payload("Bash", {"command": sneaky}, elsewhere)
        payload["session_id"] = host_session
        out = answer_of(run_hook("claude-code", payload, cwd=elsewhere))["hookSpecificOutput"]
        rewritten = out.get("updatedInput")
        if not bound:  # an unbound run out here is the host's: build, the command as sent
            assert out["permissionDecision"] == "allow" and rewritten is None
            continue
        assert out["permissionDecision"] == "allow" and rewritten is not None, out
        assert f"--plans {outer}/.openoxide/plans" in rewritten["command"], "its plan dir"
        ran = subprocess.run(
            ["bash", "-c", rewritten["command"]], cwd=elsewhere, env=env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert ran.returncode != 0, ran
    assert app.read_text() == ORIGINAL, "the confined command could not write src/"


def test_each_turn_in_the_submodule_says_plan_mode_and_names_the_plan_file(
    outer: Path, env: dict[str, str]
) -> None:
    """The context a host injects at each turn, and `guard mode`, follow the outer plan."""
    session = plan_start(env, outer)
    from guard.planning.host import context_text

    text = context_text(str(outer / "sub"), {}, host="claude-code")
    assert f"write your plan to {session['plan_path']}" in text, text
    mode = guard_cli(env, "mode", cwd=outer / "sub")
    assert mode.returncode == 0 and mode.stdout.splitlines()[0] == "plan", mode.stdout


def test_a_run_seen_in_the_worktree_while_building_follows_it_into_plan_mode(
    outer: Path, tmp_path: Path, env: dict[str, str], run_hook: HookRunner
) -> None:
    """Attack: while building, the agent `cd`s into an `--add-dir` folder outside every
    worktree; the user then runs `guard plan start` in the worktree; the agent writes the
    worktree's src/ with a program whose target no analysis sees. The run was seen in the
    worktree (in build mode), so it is bound to it: the write is plan mode's, it runs
    confined with the worktree read-only, and the worktree's audit log records it."""
    app = outer / "src" / "app.py"
    added = tmp_path / "added"
    added.mkdir()
    building = claude_payload("Bash", {"command": f"cd {added}"}, outer)
    building["session_id"] = "cc-building"
    assert decision(run_hook("claude-code", building, cwd=outer))[0] == "allow"

    session = plan_start(env, outer)
    sneaky = f"python3 -c \"open('{app}', 'w').write('pwned')\""
    payload = claude_payload("Bash", {"command": sneaky}, added)
    payload["session_id"] = "cc-building"
    out = answer_of(run_hook("claude-code", payload, cwd=added))["hookSpecificOutput"]
    rewritten = out.get("updatedInput")
    assert out["permissionDecision"] == "allow" and rewritten is not None, out
    assert f"--plans {outer}/.openoxide/plans" in rewritten["command"], "the worktree's plans"
    ran = subprocess.run(
        ["bash", "-c", rewritten["command"]], cwd=added, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode != 0, ran
    assert app.read_text() == ORIGINAL, "the confined command could not write src/"
    from guard.planning import Session

    assert "cc-building" in Session.load(session["id"], outer).host_sessions
    log = Path(env["HOME"]) / ".local/share/openoxide/audit"
    records = [json.loads(line) for f in log.glob("repo-*.jsonl") for line in f.open()]
    confined = [r for r in records if r.get("decision") == "allow_confined"]
    assert confined and confined[-1]["agent"] == "plan", "recorded in the worktree's log"
    # each turn of that run says so too, naming the plan file, though its cwd is elsewhere
    from guard.planning.host import answer as planning_answer

    turn = {"session_id": "cc-building", "cwd": str(added), "prompt": "go on",
            "hook_event_name": "UserPromptSubmit", "transcript_path": "/dev/null"}
    said = planning_answer(json.dumps(turn), ["claude-code"], env, str(added)).stdout
    assert f"write your plan to {session['plan_path']}" in said, said
    other = planning_answer(json.dumps({**turn, "session_id": "cc-other"}), ["claude-code"],
                            env, str(added)).stdout
    assert session["plan_path"] not in other, other


def test_a_run_never_seen_in_the_worktree_stays_the_hosts(
    outer: Path, tmp_path: Path, env: dict[str, str], run_hook: HookRunner
) -> None:
    """The control: another agent run, seen only outside the worktree, is not bound to it
    (its call is decided as before: the host's build mode, unchanged)."""
    plan_start(env, outer)
    added = tmp_path / "added"
    added.mkdir()
    payload = claude_payload("Bash", {"command": "python3 -c 'print(1)'"}, added)
    payload["session_id"] = "cc-elsewhere"
    out = answer_of(run_hook("claude-code", payload, cwd=added))["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow" and out.get("updatedInput") is None, out


def test_a_run_seen_in_a_project_outside_version_control_follows_its_plan(
    tmp_path: Path, env: dict[str, str], decide_hook: HookRunner
) -> None:
    """Attack: the same, for a project under no version control (its sessions live in
    guard's data directory): seen there while building, then a write from elsewhere."""
    project = tmp_path / "plain"
    (project / "src").mkdir(parents=True)
    target = project / "src" / "app.py"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = claude_payload("Read", {"file_path": str(target)}, project)
    first["session_id"] = "cc-plain"
    assert decision(decide_hook("claude-code", first, cwd=project))[0] == "allow"
    plan_start(env, project)
    payload = claude_payload("Bash", {"command": f"python3 -c 'open(\"{target}\", \"w\")'"},
                             elsewhere)  # fmt: skip
    payload["session_id"] = "cc-plain"
    out = answer_of(decide_hook("claude-code", payload, cwd=elsewhere))["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow" and out.get("updatedInput"), out


def test_a_run_seen_in_one_checkout_follows_a_plan_in_another(
    outer: Path, tmp_path: Path, env: dict[str, str], decide_hook: HookRunner
) -> None:
    """Checkouts of one repository are one: seen in the main checkout, planned in a linked
    one (`git worktree`), the run's write from outside is plan mode's."""
    seen = claude_payload("Read", {"file_path": str(outer / "src" / "app.py")}, outer)
    seen["session_id"] = "cc-sibling"
    assert decision(decide_hook("claude-code", seen, cwd=outer))[0] == "allow"
    plan_start(env, tmp_path / "linked")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    payload = claude_payload("Bash", {"command": "python3 -c 'print(1)'"}, elsewhere)
    payload["session_id"] = "cc-sibling"
    out = answer_of(decide_hook("claude-code", payload, cwd=elsewhere))["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow" and out.get("updatedInput"), out
    assert f"--plans {tmp_path / 'linked'}/.openoxide/plans" in out["updatedInput"]["command"]


def test_a_corrupt_record_of_where_a_run_was_seen_is_a_deny(
    outer: Path, tmp_path: Path, env: dict[str, str], decide_hook: HookRunner
) -> None:
    """Fail closed: a record the binding cannot read denies the run's calls, naming the
    file and the fix."""
    payload = claude_payload("Read", {"file_path": str(outer / "src" / "app.py")}, outer)
    payload["session_id"] = "cc-corrupt"
    assert decision(decide_hook("claude-code", payload, cwd=outer))[0] == "allow"
    bindings = Path(env["HOME"]) / ".local/share/openoxide/bindings"
    (record,) = bindings.glob("*.seen/*.json")
    record.write_text("{not json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    payload["cwd"] = str(elsewhere)
    proc = decide_hook("claude-code", payload, cwd=elsewhere)
    assert proc.returncode == 2 or "deny" in proc.stdout, proc
    said = proc.stdout + proc.stderr
    assert str(record) in said and "remove the file" in said, said
