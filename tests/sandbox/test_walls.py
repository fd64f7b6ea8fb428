"""Attacks on the walls beyond the disk's contents, through the installed hook and guard run.

Issue 25's reproductions, each run for real as a plan-mode agent would run it
(``walls_support``: the Claude Code hook's rewrite run with ``bash -c``, and
``guard run``), as root and as uid 65534 (the user-namespace path), with the
disk, the daemons and the processes checked afterwards. Where the attack's target
is a live service, the same command is run without guard at the end to show that
the attack is real (it must succeed there).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import needs_landlock
from unprivileged import NOBODY, USERS, as_user, require_unprivileged
from walls_support import (
    DOORS,
    Project,
    Recorder,
    SocketDaemon,
    bare,
    confined,
    door_argv,
    host_processes_with,
    py,
    run_project,
)

pytestmark = needs_landlock


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    yield from run_project(str(request.param))


def outcome(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The last line a probe printed: {what: "ok" | errno name}."""
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines, f"no result: {proc.stdout!r} {proc.stderr!r}"
    result: dict[str, str] = json.loads(lines[-1])
    return result


# Python prelude: run each attempt, record "ok" or the errno's name.
TRY = """
import errno, json, os, sys
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as exc:  # urllib's URLError keeps the socket's error as its reason
        err = exc.errno if exc.errno is not None else getattr(exc.reason, "errno", None)
        out[name] = errno.errorcode.get(err, str(err))
"""


@pytest.mark.parametrize("door", DOORS)
def test_attack_metadata_inside_the_worktree_and_beyond_is_refused(
    proj: Project, door: str
) -> None:
    """chmod, utime, truncate and xattrs are not Landlock rights: the read-only view
    refuses them everywhere but the writable roots, whatever the uid."""
    git = proj.root / ".git"
    targets = {"victim": proj.victim, "outside": proj.outside, "git": git}
    before = {k: os.stat(p) for k, p in targets.items()}
    plan_file = proj.plans / "p.md"
    source = TRY + f"""
targets = {{k: v for k, v in {json.dumps({k: str(p) for k, p in targets.items()})}.items()}}
for name, path in targets.items():
    attempt(name + ".chmod", lambda: os.chmod(path, 0o777))
    attempt(name + ".utime", lambda: os.utime(path, (0, 0)))
    attempt(name + ".xattr", lambda: os.setxattr(path, "user.guard", b"x"))
    if os.path.isfile(path):
        attempt(name + ".truncate", lambda: os.truncate(path, 0))
attempt("plan.chmod", lambda: os.chmod({str(plan_file)!r}, 0o600))
print(json.dumps(out))
"""
    result = outcome(confined(proj, door, py(source)))
    for name in targets:
        for op in ("chmod", "utime", "truncate"):
            if f"{name}.{op}" in result:
                assert result[f"{name}.{op}"] == "EROFS", (name, op, result)
        assert result[f"{name}.xattr"] in ("EROFS", "ENOTSUP"), result  # seccomp first
    assert result["plan.chmod"] == "ok"
    for key, path in targets.items():
        after = os.stat(path)
        assert (after.st_mode, after.st_mtime_ns, after.st_size) == (
            before[key].st_mode, before[key].st_mtime_ns, before[key].st_size,
        ), key  # fmt: skip
        assert os.listxattr(path) == []
    assert proj.victim.read_text() == "print('original')\n"


@pytest.mark.parametrize("door", DOORS)
def test_attack_post_to_a_local_service_fails_and_nothing_else_is_reachable(
    proj: Project, door: str
) -> None:
    """A POST to an HTTP service on the host's 127.0.0.1, and a connection to an address
    beyond: the network namespace has its own loopback only."""
    recorder = Recorder()
    try:
        source = TRY + f"""
import socket, urllib.request
def post():
    urllib.request.urlopen(urllib.request.Request(
        "http://127.0.0.1:{recorder.port}/merge", data=b"pwned", method="POST"), timeout=5)
attempt("post", post)
attempt("beyond", lambda: socket.create_connection(("10.255.255.1", 80), timeout=3))
out["interfaces"] = ",".join(n for _, n in socket.if_nameindex())
print(json.dumps(out))
"""
        result = outcome(confined(proj, door, py(source)))
        assert result["post"] == "ECONNREFUSED", result
        assert result["beyond"] in ("ENETUNREACH", "EHOSTUNREACH"), result
        assert result["interfaces"] == "lo"
        assert recorder.requests == []
        control = outcome(bare(proj, py(source)))
        assert control["post"] == "ok" and recorder.requests == [("POST", "/merge", b"pwned")]
    finally:
        recorder.close()


@pytest.mark.parametrize("door", DOORS)
def test_attack_local_daemons_and_the_users_tmux_cannot_be_made_to_write(
    proj: Project, door: str
) -> None:
    """Three local services that would append to src/app.py for the command: a daemon on a
    pathname socket (docker.sock's shape), one on an abstract socket, and the user's own
    tmux server (``tmux send-keys``). Refused: creating a Unix socket (seccomp), the
    abstract name (another network namespace; Landlock's scope), the tmux client (a Unix
    socket too)."""
    pathname = str(proj.base / "daemon.sock")
    abstract = b"\0guard-test-" + uuid.uuid4().hex.encode()
    daemons = [
        SocketDaemon(pathname, proj.victim, proj.uid),
        SocketDaemon(abstract, proj.victim, proj.uid),
    ]
    tmux_sock = str(proj.base / "tmux-user.sock")  # "the user's" tmux server, private
    tmux = as_user(proj.user, ["tmux", "-S", tmux_sock])
    subprocess.run([*tmux, "new-session", "-d", "-s", "user", "-x", "120", "-y", "20",
                    "-c", str(proj.root), "sh"], check=True, env=proj.env, timeout=60)  # fmt: skip
    try:
        source = TRY + f"""
import socket
def send(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(address)
    s.sendall(b"# pwned by a daemon\\n")
    s.close()
attempt("pathname", lambda: send({pathname!r}))
attempt("abstract", lambda: send({abstract!r}))
print(json.dumps(out))
"""
        keys = "echo '# pwned by tmux' >> src/app.py"
        command = (
            f"{py(source)}; tmux -S {tmux_sock} send-keys -t user {keys!r} Enter;"
            " echo tmux=$?"
        )
        proc = confined(proj, door, command)
        result = outcome(proc)
        assert result == {"pathname": "EPERM", "abstract": "EPERM"}, result
        assert "tmux=1" in proc.stdout, proc.stdout + proc.stderr
        time.sleep(1.0)  # what tmux would have typed would have run by now
        assert [d.connections for d in daemons] == [0, 0]
        assert proj.victim.read_text() == "print('original')\n"
        pane = subprocess.run([*tmux, "capture-pane", "-p", "-t", "user"], env=proj.env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert pane.returncode == 0, pane.stderr  # the user's server is alive, its pane too
        assert "pwned" not in pane.stdout
        # the control: without guard each of the three writes into src/app.py
        control = bare(proj, command)
        assert outcome(control) == {"pathname": "ok", "abstract": "ok"}, control.stderr
        assert "tmux=0" in control.stdout, control.stdout + control.stderr
        deadline = time.monotonic() + 30
        while proj.victim.read_text().count("pwned") < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proj.victim.read_text().count("pwned") == 3, proj.victim.read_text()
    finally:
        subprocess.run([*tmux, "kill-server"], env=proj.env, capture_output=True, timeout=60)
        for d in daemons:
            d.close()


def _core_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max core file size"):
            return " ".join(line.split()[4:6])
    raise AssertionError("no core limit line")


@pytest.mark.parametrize("door", DOORS)
def test_attack_prlimit_signals_and_ptrace_cannot_reach_a_process_outside(
    proj: Project, door: str
) -> None:
    """A process of the same user outside (Claude Code, say): raising its core limit and
    killing it dumped a core with its secrets into the worktree. Outside the PID namespace
    it has no pid; inside, the seccomp wall refuses other processes' limits too."""

    def no_core() -> None:  # the usual default: no core file, but the user may raise it
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.RLIM_INFINITY))

    victim = subprocess.Popen(as_user(proj.user, ["sleep", "300"]), preexec_fn=no_core)
    try:
        limit = _core_limit(victim.pid)
        command = (
            f"prlimit --pid {victim.pid} --core=unlimited; echo prlimit=$?;"
            f" kill -SEGV {victim.pid}; echo kill=$?;"
            " sleep 60 & sibling=$!; prlimit --pid $sibling --nofile=64:64; echo sibling=$?;"
            + py(TRY + f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def attach():
    if libc.ptrace(16, {victim.pid}, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")
attempt("ptrace", attach)
print(json.dumps(out))
""")
        )
        proc = confined(proj, door, command)
        assert "prlimit=1" in proc.stdout and "kill=1" in proc.stdout, proc.stdout + proc.stderr
        assert "sibling=1" in proc.stdout, proc.stderr  # the seccomp wall, inside
        assert outcome(proc)["ptrace"] in ("ESRCH", "EPERM")
        assert "No such process" in proc.stderr  # not even visible
        assert victim.poll() is None and _core_limit(victim.pid) == limit
        assert not list(proj.root.rglob("core*"))
        control = bare(proj, f"prlimit --pid {victim.pid} --core=unlimited")
        assert control.returncode == 0 and _core_limit(victim.pid) == "unlimited unlimited"
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("door", DOORS)
def test_attack_tiocsti_types_nothing_into_the_inherited_terminal(
    proj: Project, door: str
) -> None:
    """TIOCSTI on the terminal the agent was started from would type a command into the
    user's shell once the agent exits: the seccomp filter refuses it."""
    typed = "echo pwned\n"
    source = TRY + f"""
import fcntl, termios
def inject():
    for ch in {typed!r}:
        fcntl.ioctl(0, termios.TIOCSTI, ch.encode())
attempt("tiocsti", inject)
print(json.dumps(out))
"""

    def run_on_a_terminal(argv: list[str]) -> tuple[str, bytes]:
        master, slave = os.openpty()

        def controlling() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=proj.root, env=proj.env,
            start_new_session=True, preexec_fn=controlling,
        )  # fmt: skip
        output = b""
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            os.set_blocking(master, False)
            try:
                output += os.read(master, 4096)
            except BlockingIOError:
                time.sleep(0.05)
        proc.wait(timeout=5)
        while True:  # what is left in the terminal's output
            try:
                chunk = os.read(master, 4096)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            output += chunk
        os.set_blocking(slave, False)
        try:  # what was typed into the terminal and is waiting to be read
            queued = os.read(slave, 4096)
        except BlockingIOError:
            queued = b""
        os.close(master)
        os.close(slave)
        return output.decode(errors="replace"), queued

    output, queued = run_on_a_terminal(door_argv(proj, door, py(source)))
    assert '"tiocsti": "EPERM"' in output, output
    assert queued == b""
    control, queued = run_on_a_terminal(as_user(proj.user, ["bash", "-c", py(source)]))
    if '"tiocsti": "ok"' not in control:
        pytest.skip(f"this kernel refuses TIOCSTI by itself (dev.tty.legacy_tiocsti): {control}")
    assert queued == typed.encode()


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("planted", ["hard link", "symlink", "FIFO"])
def test_attack_planted_links_in_the_plan_directory_lead_nowhere(
    proj: Project, door: str, planted: str
) -> None:
    """Planted while building: a hard link to src/app.py (writing it writes the project),
    a symlink to it, a FIFO a process outside reads. The command is refused before it
    starts, and the refusal names the file."""
    trap = proj.plans / "notes.md"
    reader: subprocess.Popen[bytes] | None = None
    if planted == "hard link":
        os.link(proj.victim, trap)
    elif planted == "symlink":
        trap.symlink_to(proj.victim)
    else:
        os.mkfifo(trap)
        # the relay a build-mode agent left: copies whatever comes through into src/app.py
        # (exec: the process the test kills afterwards is the cat blocked on the FIFO)
        reader = subprocess.Popen(
            as_user(proj.user, ["sh", "-c", f"exec cat {trap} >> {proj.victim}"])
        )
    os.lchown(trap, proj.uid, proj.uid)
    try:
        proc = confined(proj, door, py(f"open({str(trap)!r}, 'a').write('# pwned\\n')"))
        assert proc.returncode == (126 if door == "hook" else 2), proc.stdout + proc.stderr
        assert str(trap) in proc.stderr and "NOT started" in proc.stderr, proc.stderr
        assert proj.victim.read_text() == "print('original')\n"
        if reader is not None:
            assert reader.poll() is None  # nothing opened the FIFO
    finally:
        if reader is not None:
            reader.kill()
            reader.wait()


@pytest.mark.parametrize("door", DOORS)
def test_the_private_tmpdir_is_fresh_empty_out_of_reach_and_gone_afterwards(
    proj: Project, door: str
) -> None:
    """Each command gets a new, empty TMPDIR nobody else can enter or plant in, gone
    afterwards with whatever it left there. Behind the hook it is a tmpfs of the
    command's own mount namespace (on /dev/shm there, which exists nowhere else);
    guard run makes a new directory for each run. Something planted beforehand where
    the host sees that path (a link to the project) is not there."""
    planted = Path("/dev/shm") / f"guard-planted-{uuid.uuid4().hex}"
    planted.symlink_to(proj.victim)  # (a hard link cannot cross into that tmpfs)
    source = f"""
import os, stat
tmp = os.environ["TMPDIR"]
print(tmp, len(os.listdir(tmp)), oct(stat.S_IMODE(os.stat(tmp).st_mode)))
print(os.path.lexists({str(planted)!r}))
os.mkdir(os.path.join(tmp, "d"))
open(os.path.join(tmp, "d", "f"), "w").write("x")
os.chmod(os.path.join(tmp, "d"), 0)
os.symlink("/etc/passwd", os.path.join(tmp, "link"))
"""
    try:
        seen = []
        for _ in range(2):
            proc = confined(proj, door, py(source))
            assert proc.returncode == 0, proc.stderr
            path, count, mode, sees_planted = proc.stdout.split()
            assert (count, mode) == ("0", "0o700")
            if door == "hook":
                assert path == "/dev/shm" and sees_planted == "False"
                assert not os.path.lexists("/dev/shm/link")  # the host's /dev/shm: untouched
            else:
                assert path.startswith("/tmp/guard-run-plan-")
                assert not os.path.lexists(path)
            seen.append(path)
        assert door == "hook" or seen[0] != seen[1]
        assert os.path.exists("/etc/passwd")
        assert proj.victim.read_text() == "print('original')\n"
    finally:
        planted.unlink()


@pytest.mark.parametrize("door", DOORS)
def test_processes_left_behind_end_with_the_command(proj: Project, door: str) -> None:
    """Background processes (one double-forked into a session of its own) end when the
    command returns: the host's read of stdout is not held open, and none is alive."""
    marker = f"{3000 + int(uuid.uuid4().int % 500)}.{uuid.uuid4().int % 10**9}"
    command = f"sleep {marker} & setsid sh -c 'sleep {marker} &' ; echo started"
    start = time.monotonic()
    proc = confined(proj, door, command, timeout=100)
    assert proc.returncode == 0 and proc.stdout.strip() == "started", proc.stderr
    assert time.monotonic() - start < 100
    deadline = time.monotonic() + 10
    while host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel ends them as the namespace's pid 1 exits
    assert host_processes_with(f"sleep {marker}") == []


@pytest.mark.parametrize("door", DOORS)
def test_exit_status_and_a_signal_from_the_host_behave_as_bare(
    proj: Project, door: str
) -> None:
    """The host kills the process it spawned: the command gets the signal, and the exit
    status is the command's (killed by the signal: 128+N in the host's shell)."""
    assert confined(proj, door, "exit 7").returncode == 7
    killed = confined(proj, door, "kill -KILL $$")
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr
    script = (
        "trap 'echo got-TERM; exit 42' TERM; echo ready; "
        "while :; do sleep 0.05; done"
    )
    proc = subprocess.Popen(
        door_argv(proj, door, script), cwd=proj.root, env=proj.env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert "got-TERM" in out, err
    assert proc.returncode == 42


def test_the_hook_says_what_runs_confined_and_how(proj: Project) -> None:
    from walls_support import hook_answer, py

    answer = hook_answer(proj, py("print(1)"))
    assert answer["permissionDecision"] == "allow"
    reason = answer["permissionDecisionReason"]
    assert "read-only view" in reason, reason
    assert "no network but loopback and guard's egress proxy" in reason, reason


def test_as_root_no_user_namespace_is_made_and_as_a_user_one_is(proj: Project) -> None:
    source = (
        "import os; print(open('/proc/self/uid_map').read().strip());"
        " print(os.getuid()); print(sum(e.isdigit() for e in os.listdir('/proc')))"
    )
    proc = confined(proj, "hook", py(source))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    if proj.user == "root":
        assert lines[0].split() == ["0", "0", "4294967295"]
        assert lines[1] == "0"
    else:
        assert lines[0].split() == [str(NOBODY), str(NOBODY), "1"]
        assert lines[1] == str(NOBODY)
    assert int(lines[2]) == 2  # pid 1 and the command: no other process


@pytest.mark.parametrize("door", DOORS)
def test_the_only_way_out_is_guards_egress_proxy_deciding_by_the_policy(
    proj: Project, door: str
) -> None:
    """The proxy variables point the command's programs at guard's egress proxy outside the
    namespace: a GET to a host the policy allows (mapped to a recorder on the host's
    127.0.0.1 by ``[egress] resolve``) arrives; a POST to it does not (plan mode); the
    recorder's own address is out of reach directly; each connection is audited."""
    recorder = Recorder()
    policy = proj.base / "egress-policy.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n'
        '[agents.plan.network]\nallow = ["docs.test"]\n'
        f'[egress]\nresolve = {{ "docs.test" = "127.0.0.1:{recorder.port}" }}\n'
    )
    os.chown(policy, proj.uid, proj.uid)
    proj.env["GUARD_POLICY"] = str(policy)
    source = TRY + f"""
import socket, urllib.request
out["proxy"] = os.environ.get("HTTP_PROXY", "")
def get():
    out["get"] = urllib.request.urlopen("http://docs.test/guide", timeout=30).read().decode()
def post():
    urllib.request.urlopen(urllib.request.Request(
        "http://docs.test/merge", data=b"pwned", method="POST"), timeout=30)
def direct():
    socket.create_connection(("127.0.0.1", {recorder.port}), timeout=5)
attempt("get-ok", get)
attempt("post", post)
attempt("direct", direct)
print(json.dumps(out))
"""
    try:
        proc = confined(proj, door, py(source))
        result = outcome(proc)
        assert result["proxy"].startswith("http://127.0.0.1:"), result
        assert result["get-ok"] == "ok" and result["get"] == "ok", (result, proc.stderr)
        assert result["post"] != "ok" and result["direct"] == "ECONNREFUSED", result
        assert recorder.requests == [("GET", "/guide", b"")]
    finally:
        recorder.close()
    from guard.audit.logfile import read

    records = [r for log in sorted(proj.home.rglob("audit/*.jsonl")) for r in read(log)]
    egress = [r for r in records if r.get("source") == door and "egress" in r]
    assert [(r["tool_name"], r["decision"]) for r in egress] == [
        ("request", "allow"), ("request", "deny")], records  # fmt: skip
