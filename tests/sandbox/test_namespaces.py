"""The namespaces around a confined command: the helper's own tests, the fallback and its
refusal, the egress listener's hand-off, and the Unix sockets a policy lists.

The fallback is made for real: uid 65534 in a user namespace whose
``user.max_user_namespaces`` is 0 (``userns_limit.py``), the way a machine without
unprivileged user namespaces looks. (The no-namespaces test switch, tests/switched.py,
forces it in other tests where a real limit would not change what they show.)
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from sandbox_support import Tree, clean_env, needs_landlock
from unprivileged import USERS, as_user, require_unprivileged
from walls_support import Project, SocketDaemon, confined, py, run_project

from guard.sandbox import confine, helper_dirs, namespaces

pytestmark = needs_landlock
PYTHON = sys.executable


def helper(*args: str, command: list[str]) -> list[str]:
    return [PYTHON, "-E", "-s", "-S", confine.HELPER, *args, "--", *command]


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    yield from run_project(str(request.param))


@pytest.fixture
def nobody() -> Iterator[Project]:
    require_unprivileged()
    yield from run_project("nobody")


# -- the probe, and the fallback where namespaces cannot be made ---------------------


def test_the_probe_finds_namespaces_here() -> None:
    assert confine.namespaces_unavailable() == ""
    proc = subprocess.run([PYTHON, "-E", "-s", "-S", confine.HELPER, "--probe"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok")


def test_without_unprivileged_user_namespaces_the_probe_says_why(nobody: Project) -> None:
    argv = as_user("nobody", [PYTHON, "-E", "-s", "-S", confine.HELPER, "--probe"],
                   no_user_namespaces=True)  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "unshare" in proc.stdout and "No space left on device" in proc.stdout
    assert "unprivileged user namespaces are off here" in proc.stdout


def test_the_fallback_is_said_by_the_hook_guard_run_and_doctor_and_landlock_holds(
    nobody: Project,
) -> None:
    """No user namespaces for uid 65534: the hook's reason says "Landlock-only fallback"
    and its rewrite runs without namespaces, guard run says it loudly, guard doctor
    says it; Landlock still refuses the write."""
    proj = nobody
    write = py("open('src/app.py', 'a').write('# pwned')")

    def as_nobody(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            as_user("nobody", argv, no_user_namespaces=True), cwd=proj.root, env=proj.env,
            capture_output=True, text=True, timeout=120, **kw,  # type: ignore[call-overload]
        )  # fmt: skip

    from walls_support import install_hook

    payload = {
        "session_id": "s", "cwd": str(proj.root), "permission_mode": "plan",
        "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": write},
        "tool_use_id": "t",
    }  # fmt: skip
    answer = as_nobody(["/bin/sh", "-c", install_hook(proj)], input=json.dumps(payload))
    out = json.loads(answer.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow", out
    assert "Landlock-only fallback" in out["permissionDecisionReason"], out
    rewritten = out["updatedInput"]["command"]
    assert "--namespaces" not in rewritten and "--walls" in rewritten
    ran = as_nobody(["bash", "-c", rewritten])
    assert ran.returncode == 1 and "Permission denied" in ran.stderr, ran.stderr
    run = as_nobody([PYTHON, "-m", "guard", "run", "--no-monitor", "--", "bash", "-c", write])
    assert run.returncode == 1 and "Landlock-only fallback" in run.stderr, run.stderr
    assert "Permission denied" in run.stderr
    doctor = as_nobody([PYTHON, "-m", "guard", "doctor", "--json"])
    layers = {c["name"]: c for c in json.loads(doctor.stdout)["layers"]}
    assert layers["namespaces"]["status"] == "off"
    assert "Landlock-only fallback" in layers["namespaces"]["detail"]
    review = as_nobody([PYTHON, "-m", "guard", "review", "--format", "json"])
    (spaces,) = [x for x in json.loads(review.stdout)["layers"] if x["layer"] == "namespaces"]
    assert spaces["active"] is False and "Landlock-only fallback" in spaces["detail"]
    assert proj.victim.read_text() == "print('original')\n"


def test_a_policy_that_requires_walls_refuses_rather_than_weaken(nobody: Project) -> None:
    """``[agents.plan.sandbox] require = ["network", "ipc"]`` where no namespace can be
    made: the hook denies, naming what is missing; guard run refuses to start."""
    proj = nobody
    policy = proj.root / ".openoxide" / "policy.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n'
        '[agents.plan.sandbox]\nrequire = ["network", "ipc"]\n'
    )
    os.chown(policy, 65534, 65534)
    marker = proj.plans / "ran.md"
    env = {**proj.env, "GUARD_POLICY": str(policy)}
    from walls_support import install_hook

    command = py(f"open({str(marker)!r}, 'w').write('ran')")
    payload = {
        "session_id": "s", "cwd": str(proj.root), "permission_mode": "plan",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_use_id": "t",
    }  # fmt: skip
    answer = subprocess.run(
        as_user("nobody", ["/bin/sh", "-c", install_hook(proj)], no_user_namespaces=True),
        input=json.dumps(payload), cwd=proj.root, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    out = json.loads(answer.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny", out
    reason = out["permissionDecisionReason"]
    assert "network, ipc" in reason and "require" in reason and "No space left" in reason
    run = subprocess.run(
        as_user("nobody", [PYTHON, "-m", "guard", "run", "--", "bash", "-c", command],
                no_user_namespaces=True),
        cwd=proj.root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "requires the network, ipc wall(s)" in run.stderr and "Nothing was started" in run.stderr
    assert "Traceback" not in run.stderr
    assert not marker.exists()
    # the same policy where namespaces exist: it runs, with them
    ok = subprocess.run(
        as_user("nobody", [PYTHON, "-m", "guard", "run", "--", "bash", "-c", command]),
        cwd=proj.root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert marker.read_text() == "ran"


# -- the helper itself -----------------------------------------------------------------


def test_the_egress_listener_is_the_only_way_out_and_reaches_the_outer_process(
    tree: Tree,
) -> None:
    """``--listen PORT --egress-fd FD``: pid 1 makes a listener on 127.0.0.1:PORT inside
    the network namespace and hands it over; a connection from inside reaches whoever
    holds it outside, and nothing else on the host's loopback is reachable."""
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen(4)
    host_port = host.getsockname()[1]
    ours, theirs = socket.socketpair()
    port = 18000 + uuid.uuid4().int % 2000
    source = f"""
import socket
s = socket.create_connection(("127.0.0.1", {port}), timeout=10)
s.sendall(b"hello")
print(s.recv(100).decode())
try:
    socket.create_connection(("127.0.0.1", {host_port}), timeout=5)
    print("host reached")
except OSError as exc:
    print("host", exc.errno)
"""
    proc = subprocess.Popen(
        helper("--plans", str(tree.plans), "--devices", "--namespaces", "--walls",
               "--listen", str(port), "--egress-fd", str(theirs.fileno()),
               command=[PYTHON, "-c", source]),
        pass_fds=(theirs.fileno(),), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    theirs.close()
    fd = namespaces.receive_fd(ours.fileno())
    assert fd is not None
    listener = socket.socket(fileno=fd)
    assert listener.getsockname() == ("127.0.0.1", port)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"proxied:" + conn.recv(100))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    out, err = proc.communicate(timeout=60)
    thread.join(timeout=10)
    assert proc.returncode == 0, err
    assert out.split("\n")[:2] == ["proxied:hello", "host 111"], out  # ECONNREFUSED
    host.settimeout(0.5)
    with pytest.raises(TimeoutError):
        host.accept()  # nothing came through to the host's listener
    listener.close()
    host.close()
    ours.close()


def test_host_ipc_objects_are_out_of_reach(tree: Tree) -> None:
    """A System V shared memory segment of the host: visible bare, absent in the IPC
    namespace (an attack could otherwise write to another program's shared memory)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x6A7E00 + uuid.uuid4().int % 0xFF
    shmid = libc.shmget(key, 4096, 0o1600)
    assert shmid >= 0
    source = (
        "import ctypes, errno; libc = ctypes.CDLL(None, use_errno=True);"
        f" r = libc.shmget({key}, 0, 0o600);"
        " print('found' if r >= 0 else errno.errorcode[ctypes.get_errno()])"
    )
    try:
        bare = subprocess.run([PYTHON, "-c", source], capture_output=True, text=True, timeout=60)
        assert bare.stdout.strip() == "found"
        inside = subprocess.run(
            helper("--plans", str(tree.plans), "--devices", "--namespaces", "--walls",
                   command=[PYTHON, "-c", source]),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert inside.stdout.strip() == "ENOENT", inside.stderr
    finally:
        libc.shmctl(shmid, 0, None)


@pytest.mark.parametrize("door", ["hook", "run"])
def test_a_socket_the_policy_lists_works_and_no_other_does(proj: Project, door: str) -> None:
    """``[agents.plan.sandbox] sockets`` lists one daemon's socket: the command reaches it;
    another daemon's pathname socket on the host is covered in its view (ECONNREFUSED),
    and an abstract one belongs to another network namespace."""
    allowed = str(proj.base / "allowed.sock")
    other = str(proj.base / "other.sock")
    abstract = b"\0guard-test-" + uuid.uuid4().hex.encode()
    sink = proj.base / "sink.txt"
    sink.write_text("")
    daemons = [SocketDaemon(a, sink, proj.uid) for a in (allowed, other, abstract)]
    policy = proj.root / ".openoxide" / "policy.toml"
    policy.write_text(
        f'version = 1\nextends = ["builtin:default"]\n'
        f'[agents.plan.sandbox]\nsockets = ["//{allowed.lstrip("/")}"]\n'
    )
    os.chown(policy, proj.uid, proj.uid)
    proj.env["GUARD_POLICY"] = str(policy)
    source = f"""
import errno, json, socket
out = {{}}
for name, address in (("allowed", {allowed!r}), ("other", {other!r}), ("abstract", {abstract!r})):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(address)
        s.sendall(name.encode() + b"\\n")
        out[name] = "ok"
    except OSError as exc:
        out[name] = errno.errorcode[exc.errno]
    s.close()
print(json.dumps(out))
"""
    try:
        proc = confined(proj, door, py(source))
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result == {"allowed": "ok", "other": "ECONNREFUSED", "abstract": "ECONNREFUSED"}
        deadline = time.monotonic() + 10
        while sink.read_text() != "allowed\n" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sink.read_text() == "allowed\n"
        assert [d.connections for d in daemons] == [1, 0, 0]
    finally:
        for d in daemons:
            d.close()


# -- the plan directory ---------------------------------------------------------------


def test_links_between_plan_files_are_fine_and_other_entries_are_named(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "a.md").write_text("a")
    os.link(plans / "a.md", plans / "b.md")  # both names inside: writes stay inside
    helper_dirs.check_plan_directory(str(plans))
    (plans / "sub").mkdir()
    with pytest.raises(OSError, match=r"sub is a directory"):
        helper_dirs.check_plan_directory(str(plans))
    (plans / "sub").rmdir()
    os.link(plans / "a.md", tmp_path / "elsewhere")
    with pytest.raises(OSError, match=r"[ab].md has 3 hard links, 1 of them outside"):
        helper_dirs.check_plan_directory(str(plans))


def test_remove_tree_never_follows_a_symlink(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    doomed = tmp_path / "doomed"
    (doomed / "a" / "b").mkdir(parents=True)
    (doomed / "a" / "b" / "f").write_text("x")
    (doomed / "link").symlink_to(keep)
    (doomed / "a" / "link2").symlink_to(keep / "precious")
    (doomed / "a").chmod(0)
    assert helper_dirs.remove_tree(str(doomed))
    assert not doomed.exists()
    assert (keep / "precious").read_text() == "x"


def test_guard_run_in_build_mode_stays_as_it_was(tree: Tree) -> None:
    """Build mode writes the worktree and keeps the host's network: no namespaces there."""
    proc = subprocess.run(
        [PYTHON, "-m", "guard", "run", "--agent", "build", "--no-monitor", "--", "sh", "-c",
         "echo built > src/new.py; cat /proc/self/uid_map >/dev/null; ls /proc | grep -c ."],
        capture_output=True, text=True, cwd=tree.worktree, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tree.worktree / "src" / "new.py").read_text() == "built\n"
    assert "namespaces:" not in proc.stderr
    assert int(proc.stdout.strip()) > 10  # the host's processes are there


def test_guard_run_hands_the_egress_listener_to_the_proxy_it_runs(tree: Tree) -> None:
    """supervise.run with an egress proxy (here a stand-in that answers each connection
    with what it got): the command reaches it on 127.0.0.1:PORT and nothing else; the
    proxy is closed when the command is done."""
    import io

    from guard.decide import Guard
    from guard.sandbox import roots, supervise

    class Echo:
        port = 18000 + uuid.uuid4().int % 2000
        env: ClassVar[dict[str, str]] = {"ECHO_PROXY": "1"}

        def __init__(self) -> None:
            self.listener: socket.socket | None = None
            self.closed = False

        def start(self, listener: int) -> None:
            self.listener = socket.socket(fileno=listener)

            def serve() -> None:
                assert self.listener is not None
                conn, _ = self.listener.accept()
                with conn:
                    conn.sendall(b"proxied:" + conn.recv(100))

            threading.Thread(target=serve, daemon=True).start()

        def close(self) -> None:
            self.closed = True
            if self.listener is not None:
                self.listener.close()

    egress = Echo()
    out = tree.plans / "out.md"
    source = f"""
import os, socket
s = socket.create_connection(("127.0.0.1", {egress.port}), timeout=10)
s.sendall(os.environ["ECHO_PROXY"].encode())
open({str(out)!r}, "w").write(s.recv(100).decode())
"""
    plan = roots.derive(Guard.load(worktree=tree.worktree), "plan", private_tmp=False)
    err = io.StringIO()
    status = supervise.run(plan, [PYTHON, "-c", source], egress=egress, err=err, quiet=True)
    assert status == 0, err.getvalue()
    assert out.read_text() == "proxied:1"  # the proxy's variables reached the command
    assert egress.closed
