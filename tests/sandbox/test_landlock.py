"""The kernel layer against the real kernel: each test names the escape it tries.

The confined process gets exactly what ``guard run`` gives a plan agent: the
plan directory and /dev/null writable, nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_support import (
    ABI,
    Tree,
    confined_probe,
    helper_argv,
    needs_landlock,
    probe_source,
)

from guard.sandbox import confine, landlock

pytestmark = needs_landlock


def plan_roots(tree: Tree) -> list[str]:
    return [str(tree.plans), "/dev/null"]


def assert_blocked(result: dict[str, object], *errnos: str) -> None:
    assert result["ok"] is False, "the kernel let the write through"
    assert result["errno"] in (errnos or ("EACCES",)), result


# -- what the kernel must refuse ------------------------------------------------


def test_attack_create_file_in_worktree_is_refused(tree: Tree) -> None:
    target = tree.worktree / "src" / "new.py"
    r = confined_probe(plan_roots(tree), f"open({str(target)!r}, 'x').write('evil')")
    assert_blocked(r)
    assert not target.exists()


def test_attack_append_to_project_file_is_refused(tree: Tree) -> None:
    r = confined_probe(plan_roots(tree), f"open({str(tree.victim)!r}, 'a').write('evil')")
    assert_blocked(r)
    assert tree.victim.read_text() == "print('original')\n"


def test_attack_truncate_by_open_is_refused(tree: Tree) -> None:
    r = confined_probe(plan_roots(tree), f"open({str(tree.victim)!r}, 'w')")
    assert_blocked(r)
    assert tree.victim.read_text() == "print('original')\n"


def test_attack_truncate_syscall_is_refused(tree: Tree) -> None:
    """truncate(2) on a path is governed by the TRUNCATE right (ABI 3+)."""
    if ABI < 3:
        pytest.skip(f"truncate(2) is governed from Landlock ABI 3; this kernel has ABI {ABI}")
    r = confined_probe(plan_roots(tree), f"os.truncate({str(tree.victim)!r}, 0)")
    assert_blocked(r)
    assert tree.victim.stat().st_size > 0


def test_attack_unlink_project_file_is_refused(tree: Tree) -> None:
    r = confined_probe(plan_roots(tree), f"os.unlink({str(tree.victim)!r})")
    assert_blocked(r)
    assert tree.victim.exists()


def test_attack_rmdir_in_worktree_is_refused(tree: Tree) -> None:
    empty = tree.worktree / "empty"
    empty.mkdir()
    r = confined_probe(plan_roots(tree), f"os.rmdir({str(empty)!r})")
    assert_blocked(r)
    assert empty.is_dir()


def test_attack_rename_plan_file_out_of_plan_dir_is_refused(tree: Tree) -> None:
    """Writing a file in the plan dir, then moving it over a project file."""
    dest = tree.victim
    r = confined_probe(plan_roots(tree), f"os.rename({str(tree.plan_file)!r}, {str(dest)!r})")
    assert_blocked(r, "EACCES", "EXDEV")
    assert dest.read_text() == "print('original')\n"
    assert tree.plan_file.exists()


def test_attack_rename_project_file_into_plan_dir_is_refused(tree: Tree) -> None:
    """Moving a project file away (into the writable dir) deletes it from the project."""
    r = confined_probe(
        plan_roots(tree), f"os.rename({str(tree.victim)!r}, {str(tree.plans / 'stolen.md')!r})"
    )
    assert_blocked(r, "EACCES", "EXDEV")
    assert tree.victim.exists()
    assert not (tree.plans / "stolen.md").exists()


def test_attack_hard_link_project_file_into_plan_dir_is_refused(tree: Tree) -> None:
    """A hard link in the plan dir would make the project file writable through it."""
    link = tree.plans / "link.md"
    r = confined_probe(plan_roots(tree), f"os.link({str(tree.victim)!r}, {str(link)!r})")
    assert_blocked(r, "EACCES", "EXDEV")
    assert not link.exists()


def test_attack_write_through_symlink_planted_in_plan_dir_is_refused(tree: Tree) -> None:
    """A symlink in the writable dir points at a project file; the kernel checks the target."""
    planted = tree.plans / "planted.md"
    planted.symlink_to(tree.victim)
    r = confined_probe(plan_roots(tree), f"open({str(planted)!r}, 'w').write('evil')")
    assert_blocked(r)
    assert tree.victim.read_text() == "print('original')\n"


def test_attack_symlink_created_by_the_agent_in_plan_dir_is_refused_on_write(tree: Tree) -> None:
    """The agent may create a symlink in its dir, but writing through it still hits the target."""
    body = f"""
    os.symlink({str(tree.victim)!r}, {str(tree.plans / "mine.md")!r})
    open({str(tree.plans / "mine.md")!r}, 'a').write('evil')
    """
    r = confined_probe(plan_roots(tree), body)
    assert_blocked(r)
    assert tree.victim.read_text() == "print('original')\n"


def test_attack_mkdir_and_fifo_and_symlink_outside_are_refused(tree: Tree) -> None:
    for body in (
        f"os.mkdir({str(tree.worktree / 'd')!r})",
        f"os.mkfifo({str(tree.worktree / 'f')!r})",
        f"os.symlink('/etc/passwd', {str(tree.worktree / 's')!r})",
    ):
        assert_blocked(confined_probe(plan_roots(tree), body))
    assert sorted(p.name for p in tree.worktree.iterdir()) == [".git", ".openoxide", "src"]


def test_attack_write_outside_the_worktree_is_refused(tree: Tree) -> None:
    r = confined_probe(plan_roots(tree), f"open({str(tree.outside / 'x')!r}, 'w')")
    assert_blocked(r)


def test_attack_git_hook_install_is_refused(tree: Tree) -> None:
    """Planting .git/hooks/pre-commit would run code at the user's next commit."""
    hook = tree.worktree / ".git" / "hooks" / "pre-commit"
    r = confined_probe(plan_roots(tree), f"open({str(hook)!r}, 'w').write('#!/bin/sh\\nevil')")
    assert_blocked(r)
    assert not hook.exists()


def test_attack_root_cannot_open_kernel_settings_for_writing(tree: Tree) -> None:
    """As root, writing /proc/sys/kernel/core_pattern or /sys would escape any sandbox;
    Landlock's rules cover procfs and sysfs too. (The probe opens without writing.)"""
    for path in (
        "/proc/sys/kernel/core_pattern",
        "/proc/self/attr/current",
        "/sys/kernel/uevent_helper",
    ):
        if not os.path.exists(path):
            continue
        body = f"os.close(os.open({path!r}, os.O_WRONLY | os.O_APPEND))"
        assert_blocked(confined_probe(plan_roots(tree), body))


def test_attack_grandchild_is_confined_too(tree: Tree) -> None:
    """The restriction is inherited: a shell started by a shell cannot write either."""
    target = tree.worktree / "by-grandchild"
    proc = subprocess.run(
        helper_argv(
            plan_roots(tree),
            ["sh", "-c", f"sh -c 'echo evil > {target}' ; echo status=$?"],
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "status=0" not in proc.stdout
    assert "Permission denied" in proc.stderr
    assert not target.exists()


def test_attack_signal_to_an_outside_process_is_refused(tree: Tree) -> None:
    """With ABI 6 scoping, a confined process cannot kill processes outside its domain
    (such as the guard that supervises it and runs the monitor)."""
    if ABI < 6:
        pytest.skip(f"signal scoping needs Landlock ABI 6; this kernel has ABI {ABI}")
    victim = subprocess.Popen(["sleep", "60"])
    try:
        r = confined_probe(plan_roots(tree), f"os.kill({victim.pid}, 15)")
        assert_blocked(r, "EPERM")
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_attack_connect_to_an_abstract_socket_outside_is_refused(tree: Tree) -> None:
    """Landlock's scope (ABI 6) on its own: Unix sockets allowed (a policy listed one), no
    network namespace, and still the daemon on ``@name`` outside is out of reach."""
    if ABI < 6:
        pytest.skip(f"abstract socket scoping needs Landlock ABI 6; this kernel has ABI {ABI}")
    import socket
    import uuid

    name = b"\0guard-test-" + uuid.uuid4().hex.encode()
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    daemon.bind(name)
    daemon.listen(1)
    try:
        body = f"import socket; socket.socket(socket.AF_UNIX).connect({name!r})"
        listed = ("--walls", "--socket", str(tree.outside / "listed.sock"))
        assert_blocked(confined_probe(plan_roots(tree), body, *listed), "EPERM")
        daemon.settimeout(0.2)
        with pytest.raises(TimeoutError):
            daemon.accept()
        # without the scope (no --walls), the same connect reaches it: the attack is real
        assert confined_probe(plan_roots(tree), body) == {"ok": True}
    finally:
        daemon.close()


TTY = ["--write", "/dev/pts", "--ioctl", "/dev/pts", "--write", "/dev/ptmx", "--ioctl", "/dev/ptmx"]
TIOCSTI_BODY = """
import fcntl, termios
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSTI, b'r')
"""


def test_attack_terminal_input_injection_with_tiocsti_is_refused(tree: Tree) -> None:
    """TIOCSTI on the inherited terminal would type commands into the user's shell after
    the agent exits; Landlock cannot see it, the seccomp filter refuses it."""
    bare = subprocess.run(
        [sys.executable, "-c", probe_source(TIOCSTI_BODY)], capture_output=True, text=True
    )
    if json.loads(bare.stdout)["ok"] is not True:
        pytest.skip(f"TIOCSTI is already refused by this kernel: {bare.stdout.strip()}")
    assert_blocked(confined_probe(plan_roots(tree), TIOCSTI_BODY, *TTY), "EPERM")


def test_terminal_ioctls_other_than_injection_still_work(tree: Tree) -> None:
    body = """
    import fcntl, termios
    master, slave = os.openpty()
    termios.tcgetattr(slave)
    fcntl.ioctl(slave, termios.TIOCGWINSZ, bytes(8))
    """
    assert confined_probe(plan_roots(tree), body, *TTY) == {"ok": True}


# -- what the kernel must allow --------------------------------------------------


def test_plan_file_can_be_created_appended_renamed_and_deleted(tree: Tree) -> None:
    new = tree.plans / "20260102-s1-next.md"
    body = f"""
    open({str(new)!r}, 'x').write('# next\\n')
    open({str(tree.plan_file)!r}, 'a').write('- step\\n')
    os.rename({str(new)!r}, {str(new) + ".tmp"!r})
    os.rename({str(new) + ".tmp"!r}, {str(new)!r})
    os.truncate({str(new)!r}, 2)
    os.unlink({str(tree.plans / "20260101-s1-plan.md")!r})
    open({str(new)!r}, 'a').write('ok')
    """
    assert confined_probe(plan_roots(tree), body) == {"ok": True}
    assert new.read_text() == "# ok"
    assert not tree.plan_file.exists()


def test_dev_null_is_writable_and_reads_work_everywhere(tree: Tree) -> None:
    body = f"""
    open('/dev/null', 'w').write('discarded')
    assert open({str(tree.victim)!r}).read() == "print('original')\\n"
    assert os.listdir({str(tree.worktree)!r})
    """
    assert confined_probe(plan_roots(tree), body) == {"ok": True}


def test_programs_still_execute_and_shell_redirection_to_dev_null_works(tree: Tree) -> None:
    proc = subprocess.run(
        helper_argv(
            plan_roots(tree), ["sh", "-c", "git -C . status --short >/dev/null && echo ran"]
        ),
        capture_output=True,
        text=True,
        cwd=tree.worktree,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ran"


# -- the layer's own contract ------------------------------------------------------


def test_abi_ladder_handles_each_right_from_its_abi() -> None:
    assert landlock.handled_rights(0) == 0
    assert not landlock.handled_rights(1) & (landlock.REFER | landlock.TRUNCATE)
    assert landlock.handled_rights(2) & landlock.REFER
    assert not landlock.handled_rights(2) & landlock.TRUNCATE
    assert landlock.handled_rights(3) & landlock.TRUNCATE
    assert not landlock.handled_rights(4) & landlock.IOCTL_DEV
    assert landlock.handled_rights(5) & landlock.IOCTL_DEV
    # read and execute are never handled: "read and execute everywhere"
    for abi in range(1, 8):
        assert not landlock.handled_rights(abi) & (
            landlock.READ_FILE | landlock.READ_DIR | landlock.EXECUTE
        )


def test_helper_reports_what_it_enforced_and_caps_the_abi(tree: Tree) -> None:
    r, w = os.pipe()
    proc = subprocess.Popen(
        helper_argv(plan_roots(tree), ["true"], "--abi", "2", "--status-fd", str(w)),
        pass_fds=(w,),
    )
    os.close(w)
    with os.fdopen(r) as f:
        report = json.loads(f.readline())
    assert proc.wait(timeout=60) == 0
    assert report["ok"] is True
    enf = report["enforcement"]
    assert enf["abi"] == 2
    assert "refer" in enf["handled"] and "truncate" not in enf["handled"]
    assert [rule["path"] for rule in enf["rules"]] == plan_roots(tree)
    # /dev/null is a file: only file rights apply to it
    assert set(enf["rules"][1]["rights"]) <= {"write_file", "truncate", "ioctl_dev"}


def test_missing_writable_root_is_skipped_and_reported_never_widened(tree: Tree) -> None:
    missing = tree.outside / "nope"
    r, w = os.pipe()
    proc = subprocess.Popen(
        helper_argv([missing, tree.plans], ["true"], "--status-fd", str(w)), pass_fds=(w,)
    )
    os.close(w)
    with os.fdopen(r) as f:
        report = json.loads(f.readline())
    assert proc.wait(timeout=60) == 0
    assert report["enforcement"]["skipped"][0]["path"] == str(missing)
    assert [rule["path"] for rule in report["enforcement"]["rules"]] == [str(tree.plans)]


def test_no_new_privs_is_set_in_the_confined_process(tree: Tree) -> None:
    proc = subprocess.run(
        helper_argv(plan_roots(tree), ["grep", "NoNewPrivs", "/proc/self/status"]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.split() == ["NoNewPrivs:", "1"]


def test_attack_inherited_writable_fd_does_not_reach_the_command(tree: Tree) -> None:
    """An fd opened for writing before the restriction would stay writable: the helper
    closes every fd >= 3 before exec."""
    fd = os.open(tree.victim, os.O_WRONLY | os.O_APPEND)
    try:
        script = (
            "import os,sys\n"
            f"fd={fd}\n"
            "try:\n    os.write(fd, b'evil')\n    print('wrote')\n"
            "except OSError as e:\n    print('EBADF' if e.errno == 9 else e)\n"
            "print(sorted(int(x) for x in os.listdir('/proc/self/fd')))\n"
        )
        proc = subprocess.run(
            helper_argv(plan_roots(tree), [sys.executable, "-c", script]),
            capture_output=True,
            text=True,
            pass_fds=(fd,),
            timeout=60,
        )
    finally:
        os.close(fd)
    lines = proc.stdout.splitlines()
    assert lines[0] == "EBADF"
    assert json.loads(lines[1])[:3] == [0, 1, 2] and len(json.loads(lines[1])) <= 4
    assert tree.victim.read_text() == "print('original')\n"


def test_helper_resets_the_signal_mask_and_sigpipe(tree: Tree) -> None:
    """The runner blocks the signals it forwards; the command must not inherit that."""
    script = "import signal;print(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
    old = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    try:
        proc = subprocess.run(
            helper_argv(plan_roots(tree), [sys.executable, "-c", script]),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert proc.stdout.strip() == "[]"


def test_helper_rejects_bad_usage_with_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, confine.HELPER, "--write"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "usage:" in proc.stderr and "Traceback" not in proc.stderr


def test_restrict_self_in_this_process_would_be_irreversible_so_runs_in_a_child(
    tmp_path: Path,
) -> None:
    """The library call works in-process too (here in a forked child)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            landlock.restrict_self([str(tmp_path)])
            open(tmp_path / "ok", "w").close()
            try:
                open(Path(tmp_path).parent / "escape", "w").close()
                os._exit(3)
            except PermissionError:
                os._exit(0)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (tmp_path / "ok").exists()
    assert not (tmp_path.parent / "escape").exists()


def test_an_unexpected_error_in_the_fallback_is_reported_not_a_silent_exit(tree: Tree) -> None:
    """Without namespaces the command's own process restricts itself and execs: an error
    there that is not an OSError (a bug, planted here) used to end it with status 126 and
    nothing said, so its caller could only say the restriction was not confirmed. It is
    reported on the status fd, with the error (as pid 1 reports its own), and the command
    is not started."""
    marker = tree.outside / "ran"
    planted = (
        "import os, sys\n"
        f"sys.path.insert(0, {os.path.dirname(confine.HELPER)!r})\n"
        "import helper\n"
        "def boom(*a, **k):\n"
        "    raise RuntimeError('planted bug')\n"
        "helper._restrict = boom\n"
        "sys.argv[0] = 'confine.py'\n"
        "os._exit(helper.main(sys.argv[1:]))\n"
    )
    r, w = os.pipe()
    argv = helper_argv(plan_roots(tree), ["touch", str(marker)], "--status-fd", str(w))
    script_at = argv.index(confine.HELPER)
    proc = subprocess.Popen(
        [*argv[:script_at], "-c", planted, *argv[script_at + 1:]], pass_fds=(w,),
    )
    os.close(w)
    with os.fdopen(r) as f:
        reports = [json.loads(line) for line in f if line.strip()]
    assert proc.wait(timeout=60) == 126
    assert reports == [{"ok": False, "stage": "start", "error": "planted bug"}], reports
    assert not marker.exists()
