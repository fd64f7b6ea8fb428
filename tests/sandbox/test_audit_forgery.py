"""Attack: from inside plan mode, forge an allow record in guard's audit log through hookd.

The warm hook daemon decides every call it is sent and records the verdict. A confined
plan-mode command that reaches its socket sends the request a hook client would, with
``GUARD_AGENT=build`` claimed for a Write of ``src/``: were it answered, the audit log
would hold an allow the user never gave. The command runs for real through the hook's
rewrite and through ``guard run``, in namespaces and in the Landlock-only fallback, as
root and as uid 65534. The walls are opened just enough for the attack to reach the
socket (the policy lists hookd's socket among the sockets the command may reach), so
that hookd's own check of its peer is what stops it (in the fallback the walls refuse
a listed socket with every other, so they stop it first); the same request sent by an
unconfined process of the same user is answered (the control: the attack is real).
Afterwards the audit log holds no record of the forged call and ``src/`` is unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import needs_landlock
from unprivileged import USERS, as_user, require_unprivileged
from walls_support import Project, bare, confined, install_hook, py, run_project

from guard.sandbox.confine import NO_NAMESPACES

pytestmark = needs_landlock

FORGE = """
import hashlib, json, socket, sys
from guard.hooks import hookclient as hc
root, home, marker, sock = sys.argv[1:5]
ident = hc.identity()
payload = json.dumps({
    "session_id": "forged", "cwd": root, "hook_event_name": "PreToolUse",
    "permission_mode": "default", "tool_name": "Write", "tool_use_id": "toolu_forged",
    "tool_input": {"file_path": root + "/src/" + marker + ".py", "content": "pwned"},
})
request = {
    "v": hc.PROTOCOL, "id": ident, "argv": ["claude-code"], "env": {"GUARD_AGENT": "build"},
    "same_env": hc.decision_env(),
    "cwd": root, "payload": payload, "digest": hashlib.sha256(payload.encode()).hexdigest(),
}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sock)
    s.sendall(json.dumps(request).encode() + b"\\n")
    s.shutdown(socket.SHUT_WR)
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    reply = json.loads(b"".join(chunks) or b"null")
except OSError as exc:
    reply = {"error": str(exc)}
print("FORGED " + json.dumps(reply))
"""


def forge(marker: str, proj: Project) -> str:
    """The shell command of the attack (a program the analysis cannot prove read-only)."""
    import shlex

    return " ".join(
        [py(FORGE), shlex.quote(str(proj.root)), shlex.quote(str(proj.home)), marker,
         shlex.quote(str(proj.base / "hookd.sock"))]
    )


def reply_of(proc: subprocess.CompletedProcess[str]) -> Any:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FORGED ")]
    assert lines, proc.stdout + proc.stderr
    return json.loads(lines[-1][len("FORGED ") :])


def audit_lines(proj: Project) -> list[str]:
    audit = proj.home / ".local/share/openoxide/audit"
    if not audit.is_dir():
        return []
    return [ln for f in sorted(audit.iterdir()) for ln in f.read_text().splitlines()]


def start_hookd(proj: Project) -> None:
    """Start the user's hookd through the installed hook (a harmless Read), as a host would."""
    payload = {
        "session_id": "s", "cwd": str(proj.root), "hook_event_name": "PreToolUse",
        "permission_mode": "default", "tool_name": "Read", "tool_use_id": "t",
        "tool_input": {"file_path": str(proj.victim)},
    }  # fmt: skip
    env = {**proj.env, "GUARD_HOOK_DAEMON": "1", "GUARD_HOOK_TRACE": "1",
           "GUARD_HOOKD_IDLE": "120"}  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        proc = subprocess.run(
            as_user(proj.user, ["/bin/sh", "-c", install_hook(proj)]),
            input=json.dumps(payload), cwd=proj.root, env=env, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        if "answered by hookd" in proc.stderr:
            return
        time.sleep(0.2)
    raise AssertionError("the user's hookd never answered")


def stop_hookd(proj: Project) -> None:
    for pidfile in (proj.home / ".local/share/openoxide/run").glob("hookd-*.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGTERM)


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    for p in run_project(str(request.param)):
        try:
            yield p
        finally:
            stop_hookd(p)


def _walls_open_to_hookd(proj: Project, namespaces: bool) -> Path:
    """Start hookd and open the walls to its socket on purpose (the policy lists a second
    name of it, a hard link beyond guard's data directory, which a confined command does
    not see), so that a forged request reaches hookd and hookd's own peer check is what is
    tested. Without ``namespaces`` the command runs in the Landlock-only fallback."""
    start_hookd(proj)
    [bound] = (proj.home / ".local/share/openoxide/run").glob("hookd-*.sock")
    assert bound.is_socket()
    sock = proj.base / "hookd.sock"
    os.link(bound, sock)
    policy = proj.root / ".openoxide" / "policy.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n'
        f'[agents.plan.sandbox]\nsockets = ["//{str(sock).lstrip("/")}"]\n'
    )
    os.chown(policy, proj.uid, proj.uid)
    proj.env["GUARD_POLICY"] = str(policy)
    if not namespaces:
        proj.switches = (NO_NAMESPACES,)
    return sock


@pytest.mark.parametrize(
    ("door", "namespaces"),
    [("hook", True), ("run", True), ("run", False)],
    ids=["hook-namespaces", "run-namespaces", "run-fallback"],
)
def test_confined_command_cannot_forge_a_build_allow_through_hookd(
    proj: Project, door: str, namespaces: bool
) -> None:
    _walls_open_to_hookd(proj, namespaces)

    control = f"control{uuid.uuid4().hex[:8]}"
    answered = reply_of(bare(proj, forge(control, proj)))
    assert answered.get("exit_code") == 0, answered
    assert '"permissionDecision": "allow"' in answered["stdout"], answered
    assert any(f"{control}.py" in line for line in audit_lines(proj)), "control not recorded"

    marker = f"forged{uuid.uuid4().hex[:8]}"
    proc = confined(proj, door, forge(marker, proj))
    if namespaces:
        assert proc.returncode == 0, proc.stderr
        reply = reply_of(proc)
        assert "error" not in reply, f"the walls stopped the attack before hookd: {reply}"
        assert reply["retry"] is True and reply["exit_code"] == 2, reply
        assert "confined command" in reply["why"], reply
        assert "stdout" not in reply
    else:
        # the fallback cannot open the listed socket alone (nothing would cover the
        # others), so it refuses it with every Unix socket: the walls stop the attack
        # before hookd, and say so
        assert proc.returncode != 0 and "PermissionError" in proc.stderr, proc.stderr
        assert "Unix sockets are refused, those the policy lists included" in proc.stderr
    # the plan agent's own record of the Bash command names the marker, never its file
    assert not [line for line in audit_lines(proj) if f"{marker}.py" in line]
    assert not [line for line in audit_lines(proj) if '"agent": "build"' in line and marker in line]
    assert not (proj.root / "src" / f"{marker}.py").exists()
    assert proj.victim.read_text() == "print('original')\n"


@pytest.mark.parametrize("door", ["hook", "run"])
def test_confined_command_cannot_read_the_audit_key(proj: Project, door: str) -> None:
    """Attack: read the key that chains the audit log (to forge MACs that verify), through
    its path and by listing its directory. In the namespaces' view the key's directory is
    an empty tmpfs nobody may open; the same read unconfined gets the 32 bytes (the
    control: the key is there, and the user's)."""
    key = proj.home / ".local/share/openoxide/keys/audit.key"
    source = (
        "import errno, os, sys\n"
        "out = []\n"
        "for how in ('read', 'list'):\n"
        "    try:\n"
        "        if how == 'read':\n"
        "            out.append(str(len(open(sys.argv[1], 'rb').read())))\n"
        "        else:\n"
        "            out.append(','.join(os.listdir(os.path.dirname(sys.argv[1]))) or 'empty')\n"
        "    except OSError as e:\n"
        "        out.append(errno.errorcode[e.errno])\n"
        "print('KEY ' + ' '.join(out))\n"
    )
    import shlex

    command = f"{py(source)} {shlex.quote(str(key))}"
    proc = confined(proj, door, command)  # the hook's and guard run's first record makes the key
    assert proc.returncode == 0, proc.stderr
    assert key.stat().st_size == 32
    seen = [ln for ln in proc.stdout.splitlines() if ln.startswith("KEY ")]
    assert seen and seen[-1].split()[1] in ("EACCES", "ENOENT"), proc.stdout
    assert seen[-1].split()[2] in ("EACCES", "empty"), proc.stdout
    control = [ln for ln in bare(proj, command).stdout.splitlines() if ln.startswith("KEY ")]
    assert control == ["KEY 32 audit.key"], control


HOOK_CLIENT = """
import json, os, subprocess, sys
root, marker, hook = sys.argv[1:4]
payload = json.dumps({
    "session_id": "forged", "cwd": root, "hook_event_name": "PreToolUse",
    "permission_mode": "default", "tool_name": "Write", "tool_use_id": "toolu_forged",
    "tool_input": {"file_path": root + "/src/" + marker + ".py", "content": "pwned"},
})
env = dict(os.environ, GUARD_AGENT="build", GUARD_HOOK_DAEMON="1", GUARD_HOOK_TRACE="1")
proc = subprocess.run(["/bin/sh", "-c", hook], input=payload, capture_output=True, text=True,
                      env=env)
print("HOOK " + json.dumps({"code": proc.returncode, "out": proc.stdout, "err": proc.stderr}))
"""


@pytest.mark.parametrize(
    ("door", "namespaces"),
    [("hook", True), ("run", False)],
    ids=["hook-namespaces", "run-fallback"],
)
def test_confined_hook_client_claiming_build_records_nothing(
    proj: Project, door: str, namespaces: bool
) -> None:
    """Attack: the same forged call through guard's own hook client, run from inside the
    confinement with ``GUARD_AGENT=build``: hookd refuses it, the client decides
    in-process, and that decision cannot be recorded (guard's data directory is read-only
    there), so it is a block, and the audit log holds nothing of it."""
    import shlex

    _walls_open_to_hookd(proj, namespaces)
    marker = f"forged{uuid.uuid4().hex[:8]}"
    command = " ".join(
        [py(HOOK_CLIENT), shlex.quote(str(proj.root)), marker, shlex.quote(install_hook(proj))]
    )
    proc = confined(proj, door, command)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("HOOK ")]
    assert lines, proc.stdout + proc.stderr
    hook = json.loads(lines[-1][len("HOOK ") :])
    assert "answered in-process" in hook["err"], hook
    assert hook["code"] == 2 or '"permissionDecision": "deny"' in hook["out"], hook
    assert '"permissionDecision": "allow"' not in hook["out"], hook
    assert "audit" in hook["err"] + hook["out"], hook  # the reason names the audit log
    assert not [line for line in audit_lines(proj) if f"{marker}.py" in line]
    assert not (proj.root / "src" / f"{marker}.py").exists()


def test_root_gets_no_answer_from_another_users_hookd() -> None:
    """Attack: root (who can reach any socket) sends uid 65534's hookd a forged build
    call; root is not special to another user's daemon: the connection is closed without
    an answer, and that user's audit log holds nothing of it."""
    require_unprivileged()
    for proj in run_project("nobody"):
        try:
            start_hookd(proj)
            marker = f"forged{uuid.uuid4().hex[:8]}"
            env = {**proj.env, "HOME": str(proj.home)}
            proc = subprocess.run(
                ["/bin/sh", "-c", forge(marker, proj)], cwd=proj.root, env=env,
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            reply = reply_of(proc)  # closed without an answer (or reset, unread)
            assert reply is None or set(reply) == {"error"}, reply
            assert not [line for line in audit_lines(proj) if f"{marker}.py" in line]
        finally:
            stop_hookd(proj)
