"""``guard run`` end to end: real policy, real kernel, real processes."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from sandbox_support import Tree, clean_env, guard_argv, needs_landlock, switches_on

from guard.decide import Guard
from guard.sandbox import roots, supervise
from guard.sandbox.confine import NO_NAMESPACES

pytestmark = needs_landlock


def guard_run(
    tree: Tree, *args: str, timeout: float = 120, switches: tuple[str, ...] = (), **kw: object
) -> subprocess.CompletedProcess[str]:
    kw.setdefault("env", clean_env())
    return subprocess.run(
        guard_argv("run", *args, switches=switches),
        capture_output=True,
        text=True,
        cwd=tree.worktree,
        timeout=timeout,
        **kw,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "fallback"])
def test_plan_agent_under_default_policy_can_write_its_plan_but_not_the_project(
    tree: Tree, namespaces: bool
) -> None:
    """In namespaces the read-only view refuses (EROFS); in the Landlock-only fallback
    (forced by the test seam) Landlock does (EACCES)."""
    script = (
        "import errno, os\n"
        "open(os.path.join(os.environ['GUARD_PLANS'], 'p.md'), 'w').write('# plan')\n"
        "try:\n    open('src/app.py', 'a').write('evil')\n"
        "except OSError as e:\n    print('refused', errno.errorcode[e.errno])\n"
    )
    proc = guard_run(
        tree, "--agent", "plan", "--no-monitor", "--", sys.executable, "-c", script,
        switches=() if namespaces else FALLBACK,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("refused EROFS" if namespaces else "refused EACCES")
    assert ("namespaces: " in proc.stderr) is namespaces
    assert ("Landlock-only fallback" in proc.stderr) is not namespaces
    assert (tree.plans / "p.md").read_text() == "# plan"
    assert tree.victim.read_text() == "print('original')\n"
    assert "Landlock ABI" in proc.stderr and "enforced" in proc.stderr


def test_what_is_enforced_is_said_before_the_command_speaks(tree: Tree) -> None:
    proc = subprocess.run(
        guard_argv("run", "--no-monitor", "--", "echo", "COMMAND-OUTPUT"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=tree.worktree, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0
    assert 0 <= proc.stdout.index("enforced") < proc.stdout.index("COMMAND-OUTPUT")


def test_exit_status_of_the_command_is_passed_through(tree: Tree) -> None:
    proc = guard_run(tree, "--no-monitor", "-q", "--", "sh", "-c", "exit 7")
    assert proc.returncode == 7


def test_command_killed_by_a_signal_exits_128_plus_n(tree: Tree) -> None:
    proc = guard_run(tree, "--no-monitor", "-q", "--", "sh", "-c", "kill -KILL $$")
    assert proc.returncode == 128 + signal.SIGKILL


def test_sigterm_sent_to_guard_is_forwarded_to_the_command(tree: Tree) -> None:
    """The command waits for SIGTERM atomically (blocked, then sigtimedwait). A Python
    handler around time.sleep() is racy: a signal arriving after the interpreter's last
    check and before the sleep's syscall runs the handler only when the sleep ends, so
    a correctly forwarded signal looked lost (the flake of this test, about 1 run in 300
    on a busy machine)."""
    script = (
        "import signal, sys\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])\n"
        "print('ready', flush=True)\n"
        "info = signal.sigtimedwait([signal.SIGTERM], 60)\n"
        "print('got', info.si_signo if info else None, flush=True)\n"
        "sys.exit(42 if info else 1)\n"
    )
    proc = _start_until_ready(tree, script)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert out.strip() == f"got {int(signal.SIGTERM)}", err
    assert proc.returncode == 42


def test_sigint_sent_to_guard_is_forwarded_once(tree: Tree) -> None:
    script = (
        "import signal, sys, time\n"
        "n = 0\n"
        "def h(sig, frame):\n    global n; n += 1\n"
        "signal.signal(signal.SIGINT, h)\n"
        "print('ready', flush=True)\n"
        "end = time.time() + 60\n"
        "while n == 0 and time.time() < end: time.sleep(0.05)\n"
        "time.sleep(0.5)\n"
        "print('count', n, flush=True)\n"
    )
    proc = _start_until_ready(tree, script)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "count 1"
    assert proc.returncode == 0


def test_no_writable_fd_leaks_from_guard_into_the_command(tree: Tree) -> None:
    """A writable fd inherited by guard (here: one on a project file) must not reach the
    command, where it would stay writable despite Landlock."""
    fd = os.open(tree.victim, os.O_WRONLY | os.O_APPEND)
    try:
        script = (
            "import os\n"
            "fds = sorted(int(x) for x in os.listdir('/proc/self/fd'))\n"
            "print(json.dumps(fds))\n"
            f"os.write({fd}, b'evil')\n"
        )
        proc = guard_run(
            tree,
            "--no-monitor",
            "-q",
            "--",
            sys.executable,
            "-c",
            "import json\n" + script,
            pass_fds=(fd,),
        )
    finally:
        os.close(fd)
    assert "Bad file descriptor" in proc.stderr
    fds = json.loads(proc.stdout.strip())
    assert fd not in fds and fds[:3] == [0, 1, 2]
    assert tree.victim.read_text() == "print('original')\n"


@pytest.mark.parametrize("monitor", [True, False], ids=["monitor", "no-monitor"])
def test_guard_run_with_stdout_and_stderr_closed_runs_the_command_and_exits_with_its_status(
    tree: Tree, tmp_path: Path, monitor: bool
) -> None:
    """``guard run -- CMD >&- 2>&-`` runs CMD and exits with its status (with the monitor
    on, it used to exit 1 silently before the command started). Attack: the command writes
    to the stdout and stderr its caller closed, hoping they are one of guard's own pipes or
    files (the audit log among them); they hold /dev/null, with the monitor and without."""
    audit = tmp_path / "audit.jsonl"
    script = (
        "import os\n"
        "where = {fd: os.readlink(f'/proc/self/fd/{fd}') for fd in (1, 2)}\n"
        "open(os.path.join(os.environ['GUARD_PLANS'], 'fds.md'), 'w').write(repr(where))\n"
        "for fd in (1, 2):\n    os.write(fd, b'FORGED\\n')\n"
        "raise SystemExit(7)\n"
    )
    options = ("--audit", str(audit)) if monitor else ("--no-monitor",)
    argv = guard_argv("run", *options, "--", sys.executable, "-c", script)
    proc = subprocess.run(
        ["bash", "-c", shlex.join(argv) + " >&- 2>&-"],
        capture_output=True, cwd=tree.worktree, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 7, proc
    assert (tree.plans / "fds.md").read_text() == repr({1: "/dev/null", 2: "/dev/null"})
    assert audit.exists() is monitor and (not monitor or b"FORGED" not in audit.read_bytes())
    assert tree.victim.read_text() == "print('original')\n"


def test_interactive_terminal_keeps_working(tree: Tree) -> None:
    """Under a real pseudo-terminal, the confined command can use /dev/tty and terminal ioctls."""
    master, slave = os.openpty()
    script = (
        "import os, sys, termios\n"
        "termios.tcgetattr(0)\n"
        "tty = open('/dev/tty', 'w')\n"
        "tty.write('tty-write-ok\\n'); tty.flush()\n"
        "print('isatty', os.isatty(0), os.isatty(1), flush=True)\n"
    )

    def controlling_tty() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        guard_argv("run", "--no-monitor", "-q", "--", sys.executable, "-c", script),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=tree.worktree,
        env=clean_env(),
        start_new_session=True,
        preexec_fn=controlling_tty,
    )
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal closed
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, output
    text = output.decode(errors="replace")
    assert "tty-write-ok" in text
    assert "isatty True True" in text


def _run_in_pty(tree: Tree, script: str, *, send: bytes = b"", after: str = "") -> str:
    """Run ``guard run -- python -c script`` as the foreground job of a new pseudo-terminal."""
    master, slave = os.openpty()

    def controlling_tty() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        guard_argv("run", "--no-monitor", "-q", "--", sys.executable, "-c", script),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=tree.worktree,
        env=clean_env(),
        start_new_session=True,
        preexec_fn=controlling_tty,
    )
    os.close(slave)
    output = b""
    sent = not send
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal closed
            break
        if not chunk:
            break
        output += chunk
        if not sent and after.encode() in output:
            os.write(master, send)
            sent = True
    os.close(master)
    assert proc.wait(timeout=60) == 0, output
    return output.decode(errors="replace")


def test_ctrl_c_on_the_terminal_reaches_the_command_exactly_once(tree: Tree) -> None:
    """^C makes the terminal signal the whole foreground group (guard and the command);
    guard must not repeat it. The command records the origin (si_code) of each SIGINT:
    128 (SI_KERNEL) from the terminal, 0 (SI_USER) from a kill()."""
    script = (
        "import signal, time\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\n"
        "print('ready', flush=True)\n"
        "codes = [signal.sigwaitinfo([signal.SIGINT]).si_code]\n"
        "while (info := signal.sigtimedwait([signal.SIGINT], 1.0)) is not None:\n"
        "    codes.append(info.si_code)\n"
        "print('codes', codes, flush=True)\n"
    )
    text = _run_in_pty(tree, script, send=b"\x03", after="ready")
    assert "codes [128]" in text


def test_unknown_command_is_one_clear_error(tree: Tree) -> None:
    proc = guard_run(tree, "--no-monitor", "--", "no-such-program-xyz")
    assert proc.returncode == 127  # as shells say: not found
    assert "command not found: 'no-such-program-xyz'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_command_is_one_clear_error(tree: Tree) -> None:
    proc = guard_run(tree, "--agent", "plan")
    assert proc.returncode == 2
    assert "no command given" in proc.stderr and "Traceback" not in proc.stderr


def test_relative_writable_dir_on_the_command_line_is_taken_from_the_cwd(
    tree: Tree, tmp_path: Path
) -> None:
    proc = subprocess.run(
        guard_argv(
            "run", "--worktree", str(tree.worktree), "--writable", "cache", "--no-monitor", "-q",
            "--", "sh", "-c", "echo ok > cache/x",
        ),
        capture_output=True, text=True, cwd=tmp_path, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "cache" / "x").read_text() == "ok\n"


def test_unknown_agent_is_one_clear_error(tree: Tree) -> None:
    proc = guard_run(tree, "--agent", "nobody", "--", "true")
    assert proc.returncode == 2
    assert "nobody" in proc.stderr and "plan" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_explain_lists_the_writable_roots_and_runs_nothing(tree: Tree) -> None:
    proc = guard_run(tree, "--explain", "--agent", "plan")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    paths = [r["path"] for r in doc["writable"]]
    assert paths[0] == str(tree.plans)
    assert "/dev/null" in paths
    assert str(tree.worktree) not in paths
    assert doc["landlock_abi"] >= 1
    assert doc["tiocsti_filtered"] is True
    assert doc["read_only_view"] is True and doc["network"] == "loopback only"
    assert "mount, network, pid, ipc" in doc["namespaces"]


def test_build_agent_may_write_the_worktree(tree: Tree) -> None:
    proc = guard_run(
        tree, "--agent", "build", "--no-monitor", "-q", "--", "sh", "-c", "echo built > src/new.py"
    )
    assert proc.returncode == 0, proc.stderr
    assert (tree.worktree / "src" / "new.py").read_text() == "built\n"


def test_policy_sandbox_writable_dirs_are_granted(tree: Tree, tmp_path: Path) -> None:
    cache = tmp_path / "agent-state"
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'version = 1\nextends = ["builtin:default"]\n'
        f'[agents.plan.sandbox]\nwritable = ["//{str(cache).lstrip("/")}"]\n'
    )
    proc = guard_run(
        tree,
        "--policy",
        str(policy),
        "--no-monitor",
        "--",
        "sh",
        "-c",
        f"echo state > {cache}/s && echo escaped > {tmp_path}/x; echo done",
    )
    assert proc.returncode == 0, proc.stderr
    assert (cache / "s").read_text() == "state\n"
    assert not (tmp_path / "x").exists()
    assert f"created {cache}" in proc.stderr


def test_plan_agent_cannot_be_given_the_worktree_as_extra_writable(tree: Tree) -> None:
    """A --writable (or policy entry) that covers the worktree would undo plan mode."""
    for bad in (str(tree.worktree), str(tree.worktree / "src"), str(tree.worktree.parent)):
        proc = guard_run(tree, "--writable", bad, "--", "true")
        assert proc.returncode == 2, bad
        assert "would make the worktree" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_extra_writable_may_not_expose_home_or_guard_data(tree: Tree, tmp_path: Path) -> None:
    """Granting all of $HOME would let the agent edit ~/.bashrc; granting guard's data dir
    would let it rewrite the audit log and policies."""
    home = tmp_path / "users" / "me"
    data = home / ".local" / "share"
    env = clean_env(HOME=str(home), XDG_DATA_HOME=str(data))
    for bad, msg in (
        ("{home}", "whole home directory"),
        (str(home.parent), "whole home directory"),
        ("{data}", "data directory"),
        ("{data}/audit", "data directory"),
    ):
        proc = subprocess.run(
            guard_argv("run", "--writable", bad, "--", "true"),
            capture_output=True, text=True, cwd=tree.worktree, env=env, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2, (bad, proc.stderr)
        assert msg in proc.stderr and "Traceback" not in proc.stderr


def test_private_tmpdir_is_writable_and_removed_when_empty(tree: Tree) -> None:
    proc = guard_run(
        tree,
        "--no-monitor",
        "-q",
        "--",
        "sh",
        "-c",
        'echo x > "$TMPDIR/scratch" && rm "$TMPDIR/scratch" && echo "$TMPDIR"',
    )
    assert proc.returncode == 0, proc.stderr
    tmpdir = Path(proc.stdout.strip())
    assert tmpdir.name.startswith("guard-run-plan-")
    assert not tmpdir.exists()


def test_without_landlock_the_run_is_refused_unless_allowed(tree: Tree) -> None:
    """ABI 0 stands for a kernel without Landlock: nothing may start unconfined silently."""
    g = Guard.load(worktree=tree.worktree)
    plan = roots.derive(g, "plan", private_tmp=False)
    marker = tree.outside / "ran"
    with pytest.raises(roots.SandboxError, match="--allow-unconfined"):
        supervise.run(plan, ["sh", "-c", f"touch {marker}"], abi=0)
    assert not marker.exists()
    # allowed, but with no monitor either: still refused
    with pytest.raises(roots.SandboxError, match="no protection at all"):
        supervise.run(plan, ["sh", "-c", f"touch {marker}"], abi=0, allow_unconfined=True)
    assert not marker.exists()


def test_outside_version_control_the_fallback_plan_dir_is_the_writable_one(tmp_path: Path) -> None:
    """No worktree: plans go to the user data dir fallback, and only there."""
    work = tmp_path / "notes"
    work.mkdir()
    data = tmp_path / "data"
    proc = subprocess.run(
        guard_argv(
            "run", "--no-monitor", "-q", "--", "sh", "-c",
            'echo plan > "$GUARD_PLANS/p.md" && echo "$GUARD_PLANS"; echo x > here.txt',
        ),
        capture_output=True, text=True, cwd=work, timeout=120,
        env=clean_env(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(data)),
    )  # fmt: skip
    assert proc.returncode != 0  # the last write was refused
    plans = Path(proc.stdout.strip())
    assert plans.is_relative_to(data / "openoxide" / "plans")
    assert (plans / "p.md").read_text() == "plan\n"
    assert not (work / "here.txt").exists()


def test_help_teaches_with_examples() -> None:
    from typer.testing import CliRunner

    from guard.cli import app

    result = CliRunner().invoke(app, ["run", "--help"])
    assert result.exit_code == 0
    for text in ("naughty_agent.py", "--explain", "--allow-unconfined", "sandbox] writable"):
        assert text in result.output, text


# -- the monitor alongside ------------------------------------------------------


def _commit_src(tree: Tree) -> None:
    git = ["git", "-C", str(tree.worktree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "src"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)


def test_attack_chmod_is_refused_in_namespaces_and_nothing_is_left_to_report(
    tree: Tree, tmp_path: Path
) -> None:
    """chmod, utime and xattrs are not Landlock rights; the read-only view refuses them
    (EROFS) inside the worktree and beyond it, so the monitor has nothing to report."""
    _commit_src(tree)
    mode, mtime = tree.victim.stat().st_mode, tree.victim.stat().st_mtime_ns
    outside = tree.outside / "f"
    outside.write_text("x")
    audit_log = tmp_path / "audit.jsonl"
    script = (
        f"chmod o+x src/app.py; echo chmod=$?; touch -d 2001-01-01 src/app.py; echo utime=$?;"
        f" chmod 000 .git; echo git=$?; chmod o+x {outside}; echo outside=$?"
    )
    proc = guard_run(tree, "--audit", str(audit_log), "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["chmod=1", "utime=1", "git=1", "outside=1"], proc.stdout
    assert proc.stderr.count("Read-only file system") == 4, proc.stderr
    assert (tree.victim.stat().st_mode, tree.victim.stat().st_mtime_ns) == (mode, mtime)
    assert (tree.worktree / ".git").stat().st_mode & 0o700 == 0o700
    assert outside.stat().st_mode & 0o777 == 0o644
    assert "VIOLATION" not in proc.stderr
    assert "monitor: 0 violations seen" in proc.stderr


# The monitor's part: in the Landlock-only fallback (forced by the test seam), chmod gets
# through, and the monitor reports it (and with --restore undoes it).
FALLBACK = (NO_NAMESPACES,)


def test_attack_chmod_is_not_covered_by_landlock_but_reported_by_the_monitor(
    tree: Tree, tmp_path: Path
) -> None:
    """Landlock does not govern chmod: without namespaces the command succeeds, and the
    monitor running alongside reports it and writes it to the audit log."""
    _commit_src(tree)
    audit_log = tmp_path / "audit.jsonl"
    proc = guard_run(
        tree, "--audit", str(audit_log), "--", "sh", "-c", "chmod o+x src/app.py && sleep 1",
        switches=FALLBACK,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert tree.victim.stat().st_mode & 0o001
    # the same line whether the chmod landed before or after the baseline was complete
    lines = [x for x in proc.stderr.splitlines() if x.startswith("guard monitor: VIOLATION")]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("guard monitor: VIOLATION attrib {worktree}/src/app.py at "), lines
    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    hits = [r for r in records if r.get("type") == "violation" and r["path"].endswith("src/app.py")]
    assert hits and hits[0]["agent"] == "plan"
    assert "monitor: 1 violation seen" in proc.stderr


def test_chmod_is_undone_with_restore(tree: Tree, tmp_path: Path) -> None:
    _commit_src(tree)
    mode = tree.victim.stat().st_mode
    proc = guard_run(
        tree, "--restore", "--audit", str(tmp_path / "a.jsonl"), "--",
        "sh", "-c", "chmod o+x src/app.py && sleep 1", switches=FALLBACK,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "VIOLATION attrib" in proc.stderr
    assert tree.victim.stat().st_mode == mode
    assert tree.victim.read_text() == "print('original')\n"


def test_unconfined_run_is_loud_and_watched_by_the_monitor(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Landlock (ABI 0 here) nor namespaces (the seam), and with --allow-unconfined,
    the write happens, the banner says UNCONFINED, and the monitor reports the write."""
    from guard.monitor import Monitor

    switches_on(monkeypatch, NO_NAMESPACES)
    _commit_src(tree)
    g = Guard.load(worktree=tree.worktree)
    plan = roots.derive(g, "plan", private_tmp=False)
    seen: list[object] = []
    err = io.StringIO()

    def factory() -> Monitor:
        return Monitor(g, "plan", audit_path=tmp_path / "a.jsonl", on_violation=seen.append)

    status = supervise.run(
        plan,
        ["sh", "-c", f"echo changed > {tree.victim} && sleep 1"],
        abi=0,
        allow_unconfined=True,
        monitor=factory,
        err=err,
    )
    assert status == 0
    assert "UNCONFINED" in err.getvalue()
    assert tree.victim.read_text() == "changed\n"
    assert any(getattr(v, "path", "").endswith("src/app.py") for v in seen)


def test_without_landlock_the_namespaces_still_hold(tree: Tree, tmp_path: Path) -> None:
    """--allow-unconfined on a kernel without Landlock (ABI 0 here): in plan mode the
    namespaces still stand, so the write is refused by the read-only view."""
    from guard.monitor import Monitor

    _commit_src(tree)
    g = Guard.load(worktree=tree.worktree)
    plan = roots.derive(g, "plan", private_tmp=False)
    err = io.StringIO()

    def factory() -> Monitor:
        return Monitor(g, "plan", audit_path=tmp_path / "a.jsonl")

    status = supervise.run(
        plan, ["sh", "-c", f"echo changed > {tree.victim}"], abi=0, allow_unconfined=True,
        monitor=factory, err=err,
    )  # fmt: skip
    assert status == 2, err.getvalue()  # sh: cannot create: Read-only file system
    assert tree.victim.read_text() == "print('original')\n"


def _start_until_ready(tree: Tree, script: str) -> subprocess.Popen[str]:
    """`guard run` a Python script (no monitor) and wait for its 'ready' line."""
    proc = subprocess.Popen(
        guard_argv("run", "--no-monitor", "-q", "--", sys.executable, "-c", script),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tree.worktree,
        env=clean_env(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _children() -> set[int]:
    me = os.getpid()
    out = set()
    for tid in os.listdir(f"/proc/{me}/task"):
        try:
            out |= {int(p) for p in Path(f"/proc/{me}/task/{tid}/children").read_text().split()}
        except OSError:
            continue
    return out


@pytest.mark.parametrize("how", ["monitor fails", "monitor interrupted"])
def test_the_helper_started_early_never_runs_the_command_without_the_go(
    tree: Tree, how: str
) -> None:
    """guard run starts the confinement helper before its monitor (the two start-ups
    overlap). Attack: the monitor fails to start (or guard is interrupted meanwhile),
    and the helper, already running, starts the command anyway, unwatched."""
    g = Guard.load(worktree=tree.worktree)
    plan = roots.derive(g, "plan", private_tmp=False)
    marker = tree.plans / "ran.md"  # a write the helper's restriction allows
    before = _children()

    class Failing:
        def start(self) -> None:
            if how == "monitor fails":
                raise roots.SandboxError("the monitor could not start")
            # to this thread, where guard blocked it: pending until guard looks (sent to
            # the process, it could go to a thread an earlier test left running here,
            # where SIGTERM is not blocked, and end the test run)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

        def stop(self) -> None:
            pass

    with pytest.raises(roots.SandboxError, match=r"could not start|interrupted"):
        supervise.run(plan, ["sh", "-c", f"touch {marker}"], monitor=Failing)
    assert not marker.exists()
    assert _children() == before  # the helper exited and was reaped


def test_the_helper_touches_nothing_before_the_go(tree: Tree, tmp_path: Path) -> None:
    """Without the go (its pipe closed unwritten) a helper with directories to create (the
    plan directory, the private TMPDIR it was given) waits for the go before anything: it
    creates nothing, restricts nothing, runs nothing."""
    from guard.sandbox import confine, helper_args

    plans = tree.worktree / ".openoxide" / "other-plans"
    tmpdir = tmp_path / "private" / "tmp"
    command = ["sh", "-c", 'touch "$TMPDIR/ran"']
    marker = tmpdir / "ran"
    go_r, go_w = os.pipe()
    argv = confine.helper_argv(command, plans=[str(plans)],
                               tmpdir=str(tmpdir), extra=["--go-fd", str(go_r)])
    proc = subprocess.Popen(argv, pass_fds=(go_r,), stderr=subprocess.PIPE, text=True)
    os.close(go_r)
    os.close(go_w)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == helper_args.NOT_STARTED, err
    assert not plans.exists() and not tmpdir.parent.exists()
    # and with the go it does all of it
    go_r, go_w = os.pipe()
    argv = confine.helper_argv(command, plans=[str(plans)],
                               tmpdir=str(tmpdir), extra=["--go-fd", str(go_r)])
    proc = subprocess.Popen(argv, pass_fds=(go_r,))
    os.close(go_r)
    os.write(go_w, b"g")
    os.close(go_w)
    assert proc.wait(timeout=120) == 0
    assert marker.exists() and plans.is_dir()


def _status_line(fd: int) -> dict[str, object]:
    """The helper's next status report (one JSON line), read byte by byte: what follows
    it stays in the pipe."""
    import select

    line = b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], 120)  # a bound, not a timing
        assert ready, f"no status report from the helper in 120 s (so far {line!r})"
        byte = os.read(fd, 1)
        assert byte, f"the status pipe closed after {line!r}"
        line += byte
    report = json.loads(line)
    assert isinstance(report, dict)
    return report


@pytest.mark.parametrize("isolate", [True, False], ids=["namespaces", "fallback"])
@pytest.mark.parametrize("go", [True, False], ids=["go", "no go"])
def test_the_helper_restricts_itself_before_the_go_and_starts_the_command_only_on_it(
    tree: Tree, isolate: bool, go: bool
) -> None:
    """With nothing to create on the host (the plan directory is there), the helper makes
    its namespaces and restricts itself while its caller starts (it reports the restriction
    before any go), but the command's first instruction comes only after the go: without
    it the command never runs."""
    from guard.sandbox import confine, helper_args

    if isolate and confine.namespaces_unavailable():
        pytest.skip(f"no namespaces here: {confine.namespaces_unavailable()}")
    marker = tree.plans / "ran.md"  # a write the restriction allows
    command = ["sh", "-c", f"touch {marker}"]
    go_r, go_w = os.pipe()
    status_r, status_w = os.pipe()
    fds = ["--go-fd", str(go_r), "--status-fd", str(status_w)]
    argv = confine.helper_argv(command, plans=[str(tree.plans)], isolate=isolate, extra=fds)
    proc = subprocess.Popen(argv, pass_fds=(go_r, status_w), cwd=tree.worktree)
    os.close(go_r)
    os.close(status_w)
    try:
        report = _status_line(status_r)  # before the go
        assert report.get("ok") and report.get("stage") == "restricted", report
        assert not marker.exists()  # restricted, not started
        if go:
            os.write(go_w, b"g")
        os.close(go_w)
        go_w = -1
        assert proc.wait(timeout=120) == (0 if go else helper_args.NOT_STARTED)
    finally:
        if go_w >= 0:
            os.close(go_w)
        os.close(status_r)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert marker.exists() == go


@pytest.mark.parametrize("what", ["untracked", "tracked"])
def test_a_write_at_the_commands_first_instant_is_seen_and_undone(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """The attack: the command's very first instruction overwrites a project file (no
    Landlock, no namespaces: --allow-unconfined, so that the write lands). The helper
    confines itself early, but the command starts only once the monitor's watch and
    phase 1 are in place: the write is reported and --restore puts the bytes back (an
    untracked file's from phase 1's copy, a tracked one's from git)."""
    from guard.monitor import Monitor

    switches_on(monkeypatch, NO_NAMESPACES)
    _commit_src(tree)
    target = tree.worktree / "notes.txt" if what == "untracked" else tree.victim
    if what == "untracked":
        target.write_text("my notes\n")
    before = target.read_bytes()
    g = Guard.load(worktree=tree.worktree)
    plan = roots.derive(g, "plan", private_tmp=False)
    seen: list[object] = []

    def factory() -> Monitor:
        return Monitor(g, "plan", restore=True, audit_path=tmp_path / "a.jsonl",
                       on_violation=seen.append, background=True)  # fmt: skip

    status = supervise.run(
        plan, ["sh", "-c", f"echo changed > {target}"], abi=0, allow_unconfined=True,
        monitor=factory, err=io.StringIO(),
    )  # fmt: skip
    assert status == 0
    assert any(getattr(v, "path", "") == str(target) for v in seen), seen
    assert target.read_bytes() == before


@pytest.mark.parametrize("connect", [True, False], ids=["connected", "never connected"])
def test_the_egress_proxy_serves_from_the_first_connection_and_closes_its_listener(
    tree: Tree, connect: bool
) -> None:
    """guard run's egress proxy only polls its listener until a connection comes (no
    socket module, no accept loop for a command that never connects); a connection is
    answered, and a listener never served is closed by close()."""
    import errno
    import socket

    from guard.sandbox.run_egress import Proxy

    proxy = Proxy("plan", str(tree.worktree), None)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    fd = listener.detach()
    proxy.start(fd)
    try:
        if connect:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
                request = b"GET http://example.invalid/ HTTP/1.1\r\nHost: example.invalid\r\n\r\n"
                conn.sendall(request)
                assert conn.recv(12).startswith(b"HTTP/1."), "the proxy did not answer"
    finally:
        proxy.close()
    if not connect:  # never served: the listener is closed by close() itself
        with pytest.raises(OSError) as gone:
            os.fstat(fd)
        assert gone.value.errno == errno.EBADF
