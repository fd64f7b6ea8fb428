"""Attack: a confined command holds a lock guard waits on, and every hook hangs.

Issue 39's reproduction: a plan-mode command (the Claude Code hook's rewrite, run with
``bash -c`` as the host runs it, and ``guard run``) opens guard's audit log read-only,
takes its ``flock`` and sleeps; each hook call then waited on that lock with no limit,
the host's hook timed out and the tool ran. Under confinement guard's whole data
directory (but the fallback plans) and the worktree's sessions are out of view, so
the command can neither read nor lock any of guard's state; the same command without
guard can (the control). Run as root and as uid 65534.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import needs_landlock
from unprivileged import USERS, as_user, chown_tree, require_unprivileged
from walls_support import DOORS, Project, bare, confined, hook_answer, py, run_project

pytestmark = needs_landlock

STATE = ("audit", "keys", "sessions", "bindings", "missed", "spool", "run", "cache")


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    yield from run_project(str(request.param))


def data_dir(proj: Project) -> Path:
    return proj.home / ".local" / "share" / "openoxide"


def lock_probe(targets: dict[str, str]) -> str:
    """A command that opens each target read-only and tries to lock it (or lists it,
    for a directory), printing {name: "locked" | "listed" | errno name}."""
    return py(f"""
import errno, fcntl, json, os
out = {{}}
for name, path in {json.dumps(targets)}.items():
    try:
        if os.path.isdir(path):
            entries = os.listdir(path)
            out[name] = "listed" if entries else "empty"
            continue
        fd = os.open(path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        out[name] = "locked"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(out))
""")


def outcome(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines, f"no result: {proc.stdout!r} {proc.stderr!r}"
    result: dict[str, str] = json.loads(lines[-1])
    return result


def plant_state(proj: Project) -> tuple[list[Path], dict[str, str]]:
    """guard's state as a confined command would find it: a hook call made the audit log
    and its key, a session holds a lock file, the global fallback has a plan; all owned
    by the project's user. The audit logs, and the files a command must not lock or read
    (by name)."""
    hook_answer(proj, "ls")  # a hook call: the audit log and its key exist
    data = data_dir(proj)
    logs = sorted((data / "audit").glob("*.jsonl"))
    assert logs and (data / "keys" / "audit.key").exists(), "the hook wrote no audit log"
    session = proj.root / ".openoxide" / "sessions" / "s1"
    session.mkdir(parents=True)
    (session / "lock").write_text("")
    (data / "plans").mkdir(exist_ok=True)
    (data / "plans" / "global.md").write_text("# plan\n")
    # what tomllib parsed from a policy text, trusted by content (guard/policy/valid.py)
    parsed = data / "cache" / "toml" / f"{'0' * 64}.json"
    parsed.parent.mkdir(parents=True, exist_ok=True)
    parsed.write_text('{"toml": "' + "0" * 64 + '", "data": {}}')
    chown_tree(proj.base, proj.user)
    targets = {"audit_log": str(logs[0]), "audit_key": str(data / "keys" / "audit.key"),
               "session_lock": str(session / "lock"), "toml_cache": str(parsed)}
    return logs, targets


@pytest.mark.parametrize("door", DOORS)
def test_attack_confined_command_cannot_read_or_lock_guards_state(
    proj: Project, door: str
) -> None:
    logs, planted = plant_state(proj)
    data = data_dir(proj)
    targets = {**planted, **{name: str(data / name) for name in STATE}}
    control = outcome(bare(proj, lock_probe(targets)))
    assert control["audit_log"] == "locked" and control["session_lock"] == "locked", control

    result = outcome(confined(proj, door, lock_probe({**targets,
                                                       "plans": str(data / "plans")})))
    for name in ("audit_log", "audit_key", "session_lock", "toml_cache"):
        assert result[name] in ("ENOENT", "EACCES"), (name, result)
    for name in STATE:
        assert result[name] in ("empty", "EACCES"), (name, result)
    assert result["plans"] == "listed", result  # the global fallback's plans stay in view
    # and guard still answers: the log it writes is the one the command could not lock
    before = logs[0].stat().st_size
    assert hook_answer(proj, "ls")["permissionDecision"] == "allow"
    assert logs[0].stat().st_size > before


def test_a_held_audit_log_costs_a_deny_not_an_answer_given_late(proj: Project) -> None:
    """Another of the user's processes, outside any confinement, may hold the audit log's
    lock: the hook then answers a deny naming the lock, in time, and the verdict is kept
    beside the log; nothing blocks the host's timeout."""
    hook_answer(proj, "ls")
    log = sorted((data_dir(proj) / "audit").glob("*.jsonl"))[0]
    holder = subprocess.Popen(
        as_user(proj.user, ["python3", "-c",
                            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY);"
                            " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True);"
                            " time.sleep(600)", str(log)]),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        payload = {
            "session_id": "0b7c6f2e-0000-4000-8000-000000000003", "cwd": str(proj.root),
            "permission_mode": "plan", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "ls"}, "tool_use_id": "toolu_01HELD",
            "transcript_path": str(proj.base / "transcript.jsonl"),
        }  # fmt: skip
        from walls_support import install_hook

        proc = subprocess.run(
            as_user(proj.user, ["/bin/sh", "-c", install_hook(proj)]),
            input=json.dumps(payload), cwd=proj.root, env={**proj.env, "GUARD_AGENT": "plan"},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "stayed locked" in proc.stderr and str(log) in proc.stderr, proc.stderr
    assert "held by pid" in proc.stderr, proc.stderr
    held = log.with_name(log.name + ".held")
    kept = [json.loads(x) for x in held.read_text().splitlines()]
    assert kept[-1]["tool_use_id"] == "toolu_01HELD" and kept[-1]["answered"] == "deny"


def _fallback_argv(proj: Project, door: str, command: str) -> list[str]:
    """``command`` behind ``door`` as uid 65534 in a user namespace where no further one may
    be made: the Landlock-only fallback, for real (the hook's rewrite, guard run in plan
    mode, guard confine)."""
    from sandbox_support import guard_argv
    from walls_support import PYTHON, install_hook

    if door == "hook":
        payload = {
            "session_id": "0b7c6f2e-0000-4000-8000-000000000004", "cwd": str(proj.root),
            "permission_mode": "plan", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command}, "tool_use_id": "toolu_01FALLBACK",
            "transcript_path": str(proj.base / "transcript.jsonl"),
        }  # fmt: skip
        answer = subprocess.run(
            as_user(proj.user, ["/bin/sh", "-c", install_hook(proj)], no_user_namespaces=True),
            input=json.dumps(payload), cwd=proj.root, env={**proj.env, "GUARD_AGENT": "plan"},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        out = json.loads(answer.stdout)["hookSpecificOutput"]
        assert out["permissionDecision"] == "allow", out
        rewritten = out["updatedInput"]["command"]
        assert "run_confined.py" in rewritten and "--namespaces" not in rewritten, rewritten
        argv = ["bash", "-c", rewritten]
    elif door == "run":
        argv = guard_argv("run", "-q", "--agent", "plan", "--", "bash", "-c", command)
    else:
        argv = [PYTHON, "-m", "guard", "confine", "--", "bash", "-c", command]
    return as_user(proj.user, argv, no_user_namespaces=True)


@pytest.mark.parametrize("door", ["hook", "run", "confine"])
def test_attack_in_the_fallback_guards_state_can_be_neither_read_nor_locked(door: str) -> None:
    """The Landlock-only fallback has no mount namespace to cover guard's state: there the
    same command read the audit key (whose holder can forge the audit log's chain) and
    took the audit log's and a session's lock. Landlock handles reading in the fallback,
    and guard's state is left out of what it allows: nothing of it opens, so nothing is
    read or locked; the global fallback's plans (writable) stay in view."""
    require_unprivileged()
    for proj in run_project("nobody"):
        logs, targets = plant_state(proj)
        data = data_dir(proj)
        targets["hosts"] = str(data / "hosts.json")
        key = (data / "keys" / "audit.key").read_bytes()
        control = outcome(bare(proj, lock_probe(targets)))
        assert set(control.values()) == {"locked"}, control  # the attack is real
        command = lock_probe({**targets, "plans": str(data / "plans")}) + " && " + py(
            f"print(open({str(data / 'keys' / 'audit.key')!r}, 'rb').read().hex())"
        )
        proc = subprocess.run(_fallback_argv(proj, door, command), cwd=proj.root, env=proj.env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert "Landlock-only fallback" in proc.stderr or door == "hook", proc.stderr
        result = outcome(proc)
        assert {k: result[k] for k in targets} == dict.fromkeys(targets, "EACCES"), result
        assert result["plans"] == "listed", result
        assert key.hex() not in proc.stdout and proc.returncode != 0, proc.stdout
        before = logs[0].stat().st_size
        assert hook_answer(proj, "ls")["permissionDecision"] == "allow"
        assert logs[0].stat().st_size > before


SHARED = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
out = {{}}
def attempt(name, fn):
    try:
        res = fn()
        if isinstance(res, int) and res < 0:
            raise OSError(ctypes.get_errno(), name)
        out[name] = "ok"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
covered = {covered!r}
out["devices"] = len({{os.stat(p).st_dev for p in covered}})
for i, path in enumerate(covered):
    attempt(f"chmod {{i}}", lambda: os.chmod(path, 0o777))
    attempt(f"mkdir {{i}}", lambda: os.mkdir(os.path.join(path, "planted")))
    attempt(f"remount rw {{i}}", lambda: libc.mount(None, path.encode(), None,
                                                   ctypes.c_ulong(0x20 | 0x1000), None))
    attempt(f"umount {{i}}", lambda: libc.umount2(path.encode(), 2))  # MNT_DETACH
seen = {{}}
for path in covered:
    try:
        seen[path] = os.listdir(path)
    except OSError as exc:
        seen[path] = errno.errorcode[exc.errno]
out["seen"] = sorted(set(map(str, seen.values())))
out["modes"] = sorted({{oct(os.stat(p).st_mode & 0o7777) for p in covered}})
print(json.dumps(out))
"""


@pytest.mark.parametrize("door", DOORS)
def test_attack_the_one_tmpfs_over_guards_state_is_read_only_from_every_path(
    proj: Project, door: str
) -> None:
    """Guard's hidden state shares one empty tmpfs (one superblock bound over each
    directory): as its owner (root) a command could chmod it open and plant an entry that
    would show in every other covered directory. Each is read-only from every path: chmod
    is EROFS, mkdir fails, it can be neither remounted writable nor unmounted, and every
    covered directory stays empty and mode 0; on disk guard's directories are unchanged."""
    hook_answer(proj, "ls")
    data = data_dir(proj)
    session = proj.root / ".openoxide" / "sessions"
    session.mkdir(parents=True, exist_ok=True)
    for cache in ("policy", "toml"):  # guard run fills its own caches while the command runs
        (data / "cache" / cache).mkdir(parents=True, exist_ok=True)
    chown_tree(proj.base, proj.user)
    covered = [str(data / name) for name in STATE] + [str(session)]
    before = {p: (os.stat(p).st_mode, sorted(os.listdir(p))) for p in covered}
    result = outcome(confined(proj, door, py(SHARED.format(covered=covered))))
    assert result["devices"] == 1, result  # one superblock: what holds for one holds for all
    for i in range(len(covered)):
        assert result[f"chmod {i}"] == "EROFS", result
        assert result[f"mkdir {i}"] in ("EACCES", "EROFS"), result
        assert result[f"remount rw {i}"] == "EPERM", result
        assert result[f"umount {i}"] == "EPERM", result
    assert result["modes"] == ["0o0"], result
    assert result["seen"] in (["EACCES"], ["[]"]), result
    assert {p: (os.stat(p).st_mode, sorted(os.listdir(p))) for p in covered} == before


def test_the_fallbacks_readable_roots_leave_out_guards_state_and_nothing_else(
    tmp_path: Path,
) -> None:
    """What Landlock lets a fallback command read: every root but the hidden paths, which a
    root holding them gives way to the entries around them, level by level; a symlink is
    never a root (its target, the hidden directory, would be allowed through it)."""
    from guard.sandbox import terminals

    data = tmp_path / "home" / ".local" / "share" / "openoxide"
    (data / "keys").mkdir(parents=True)
    (data / "plans").mkdir()
    (data / "hosts.json").write_text("{}")
    (tmp_path / "home" / "notes.txt").write_text("")
    (tmp_path / "home" / "link").symlink_to(data / "keys")
    (tmp_path / "other").mkdir()
    hidden = [str(data / "keys"), str(data / "hosts.json")]
    roots = terminals._around([str(tmp_path), "/usr"], hidden[0])
    roots = terminals._around(roots, hidden[1])
    assert sorted(roots) == sorted([
        "/usr", str(tmp_path / "other"), str(tmp_path / "home" / "notes.txt"),
        str(tmp_path / "home" / ".local" / "share" / "openoxide" / "plans"),
    ]), roots  # fmt: skip
    assert terminals._around([str(data / "keys")], str(data / "keys")) == []
    every = terminals.readable_roots(None, hidden)
    assert not any(r == h or h.startswith(r + "/") for r in every for h in hidden), every
    assert "/usr" in every and "/etc" in every
