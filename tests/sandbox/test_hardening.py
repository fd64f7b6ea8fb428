"""System state outside the filesystem: the capability drop and the seccomp filter.

Each attack runs for real, as the user the tests run as (root in CI), under the
confinement helper, and the state it targets is checked afterwards. Attacks
that would change the machine if they got through use harmless values (the
current hostname, the current time, a throwaway tmpfs) so that a broken filter
fails the test without breaking the machine.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sandbox_support import (
    Tree,
    confined_probe,
    guard_argv,
    helper_argv,
    needs_landlock,
    probe_source,
)

from guard.sandbox import seccomp

pytestmark = needs_landlock
ROOT = os.geteuid() == 0
COL = 0 if seccomp.machine() == "x86_64" else 1

# Python prelude for probes: raw syscalls by name, failing with OSError(errno).
SYSCALL = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
NR = {{name: nrs[{COL}] for name, nrs in {seccomp.NUMBERS!r}.items()}}
def sc(name, *args):
    res = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return res
"""


def probe(tree: Tree, body: str, *extra: str) -> dict[str, object]:
    return confined_probe([str(tree.plans), "/dev/null"], SYSCALL + textwrap.dedent(body), *extra)


def assert_eperm(result: dict[str, object]) -> None:
    assert result == {"ok": False, "errno": "EPERM"}, result


# -- the filter program ----------------------------------------------------------


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_filter_program_is_well_formed(arch: str) -> None:
    """Every jump lands inside the program, it ends in a return, and it fits the kernel's
    limit (BPF rejects the rest; an unchecked program would fail only at run time)."""
    prog = seccomp.program(arch)
    assert len(prog) < 4096
    for pc, (op, jt, jf, _k) in enumerate(prog):
        if op & 0x07 == 0x05:  # BPF_JMP
            assert pc + 1 + jt < len(prog) and pc + 1 + jf < len(prog), pc
    assert prog[-1] == (0x06, 0, 0, seccomp.RET_ALLOW)


def test_syscall_numbers_agree_with_libseccomp() -> None:
    """The table is data typed in by hand: libseccomp's tables are the oracle (syscalls
    newer than the installed libseccomp are checked against the unified numbering)."""
    path = ctypes.util.find_library("seccomp")
    assert path, "libseccomp2 is needed as the oracle (scripts/test.sh installs it)"
    lib = ctypes.CDLL(path)
    lib.seccomp_syscall_resolve_name_arch.restype = ctypes.c_int
    arches = {0: 0xC000003E, 1: 0xC00000B7}
    checked = 0
    for name, numbers in seccomp.NUMBERS.items():
        for col, arch in arches.items():
            nr = lib.seccomp_syscall_resolve_name_arch(ctypes.c_uint32(arch), name.encode())
            ours = numbers[col]
            if nr == -1:  # unknown to this libseccomp: newer than it, unified numbering
                assert ours is None or 424 <= ours <= seccomp.HIGHEST_KNOWN, name
                assert ours is None or numbers[0] == numbers[1], name
                continue
            if nr < 0:  # a pseudo number: not a syscall on this architecture
                assert ours is None, (name, arch)
            else:
                assert ours == nr, (name, arch, nr)
                checked += 1
    assert checked > 100


# -- capabilities -----------------------------------------------------------------


def test_every_capability_is_dropped_and_no_new_privs_set(tree: Tree) -> None:
    r = subprocess.run(
        confined_cmd(tree, ["grep", "-E", "^(Cap|NoNewPrivs|Seccomp:)", "/proc/self/status"]),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    fields = dict(line.split(":\t") for line in r.stdout.strip().splitlines())
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[cap], 16) == 0, (cap, fields)
    if ROOT:
        assert int(fields["CapBnd"], 16) == 0, fields
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"  # filter mode


def confined_cmd(tree: Tree, command: list[str], *extra: str) -> list[str]:
    from sandbox_support import helper_argv

    return helper_argv([tree.plans, "/dev/null"], command, *extra)


# -- system state -----------------------------------------------------------------


def test_attack_set_the_hostname_is_refused(tree: Tree) -> None:
    name = socket.gethostname()
    body = f"""
    n = {name.encode()!r}
    if libc.sethostname(n, len(n)) != 0:
        raise OSError(ctypes.get_errno(), "sethostname")
    """
    assert_eperm(probe(tree, body))
    assert socket.gethostname() == name


def test_attack_set_the_domain_name_is_refused(tree: Tree) -> None:
    name = Path("/proc/sys/kernel/domainname").read_bytes().strip()
    body = f"""
    n = {name!r}
    if libc.setdomainname(n, len(n)) != 0:
        raise OSError(ctypes.get_errno(), "setdomainname")
    """
    assert_eperm(probe(tree, body))
    assert Path("/proc/sys/kernel/domainname").read_bytes().strip() == name


def test_attack_set_the_clock_is_refused(tree: Tree) -> None:
    body = """
    import time
    class TS(ctypes.Structure):
        _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
    ts = TS(int(time.time()), 0)
    r = libc.clock_settime(0, ctypes.byref(ts))
    if r != 0:
        raise OSError(ctypes.get_errno(), "clock_settime")
    """
    assert_eperm(probe(tree, body))
    assert_eperm(probe(tree, "sc('settimeofday', 0, 0)"))
    assert_eperm(probe(tree, "sc('adjtimex', 0)"))
    assert_eperm(probe(tree, "sc('clock_adjtime', 0, 0)"))


def test_attack_create_system_v_ipc_objects_is_refused(tree: Tree) -> None:
    """They outlive the command (and the session): refused when the call could create."""
    assert_eperm(probe(tree, "sc('shmget', 0, 4096, 0o600)"))  # IPC_PRIVATE
    assert_eperm(probe(tree, "sc('shmget', 0x6a7e57, 4096, 0o1600)"))  # IPC_CREAT
    assert_eperm(probe(tree, "sc('semget', 0x6a7e58, 1, 0o1600)"))
    assert_eperm(probe(tree, "sc('msgget', 0x6a7e59, 0o1600)"))
    for tool in ("ipcs -m", "ipcs -s", "ipcs -q"):
        out = subprocess.run(tool.split(), capture_output=True, text=True).stdout
        assert "6a7e5" not in out, out


def test_getting_an_existing_ipc_object_still_works(tree: Tree) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(0x6A7E60, 4096, 0o1600)
    assert shmid >= 0
    try:
        assert probe(tree, "sc('shmget', 0x6a7e60, 4096, 0o600)") == {"ok": True}
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


def test_attack_posix_message_queue_creation_is_refused(tree: Tree) -> None:
    name = "ctypes.cast(ctypes.c_char_p(b'/guard-x'), ctypes.c_void_p).value"
    assert_eperm(probe(tree, f"sc('mq_open', {name}, 0o102, 0o600, 0)"))  # O_CREAT | O_RDWR


@pytest.mark.skipif(not ROOT, reason="mount needs root to mean anything")
def test_attack_mount_is_refused(tree: Tree, tmp_path: Path) -> None:
    target = tmp_path / "mnt"
    target.mkdir()
    body = f"""
    r = libc.mount(b"none", {str(target).encode()!r}, b"tmpfs", 0, None)
    if r != 0:
        raise OSError(ctypes.get_errno(), "mount")
    """
    try:
        assert_eperm(probe(tree, body))
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)
    assert os.stat(target).st_dev == os.stat(tmp_path).st_dev  # nothing mounted
    for name in ("umount2", "pivot_root", "fsopen", "open_tree", "move_mount", "mount_setattr"):
        assert_eperm(probe(tree, f"sc({name!r}, 0, 0, 0, 0, 0)"))


def test_attack_kernel_modules_kexec_swap_reboot_are_refused(tree: Tree) -> None:
    """Called with arguments the kernel would reject anyway, so a broken filter fails the
    test (EINVAL/EFAULT/ENOENT instead of EPERM) without acting."""
    for call in (
        "sc('init_module', 0, 0, 0)",
        "sc('finit_module', -1, 0, 0)",
        "sc('delete_module', 0, 0)",
        "sc('kexec_load', 0, 0, 0, 0xdead0000)",
        "sc('kexec_file_load', -1, -1, 0, 0, 0xdead0000)",
        "sc('swapon', 0, 0)",
        "sc('swapoff', 0)",
        "sc('reboot', 0, 0, 0, 0)",
        "sc('acct', 0)",
        "sc('quotactl', 0, 0, 0, 0)",
        "sc('bpf', 0, 0, 0)",
        "sc('perf_event_open', 0, 0, -1, -1, 0)",
        "sc('keyctl', 0, 0, 0, 0, 0)",
        "sc('add_key', 0, 0, 0, 0, 0)",
        "sc('request_key', 0, 0, 0, 0)",
        "sc('setns', -1, 0)",
        "sc('chroot', 0)",
        "sc('open_by_handle_at', -1, 0, 0)",
    ):
        assert_eperm(probe(tree, call))


def test_attack_new_namespaces_are_refused_but_fork_works(tree: Tree) -> None:
    assert_eperm(probe(tree, "sc('unshare', 0x10000000)"))  # CLONE_NEWUSER
    assert_eperm(probe(tree, "sc('unshare', 0x00020000)"))  # CLONE_NEWNS
    body = "pid = os.fork()\nif pid == 0: os._exit(7)\nassert os.waitpid(pid, 0)[1] >> 8 == 7"
    assert probe(tree, body) == {"ok": True}
    r = subprocess.run(
        confined_cmd(tree, ["unshare", "-r", "true"]), capture_output=True, text=True, timeout=60
    )
    assert r.returncode != 0 and "Operation not permitted" in r.stderr


def test_attack_syscalls_newer_than_the_table_get_enosys(tree: Tree) -> None:
    result = probe(tree, "sc('clone3', 0, 0)")
    assert result == {"ok": False, "errno": "ENOSYS"}
    body = f"NR['future'] = {seccomp.HIGHEST_KNOWN + 1}\nsc('future', 0, 0)"
    assert probe(tree, body) == {"ok": False, "errno": "ENOSYS"}


def test_personality_may_be_queried_but_not_set_to_odd_values(tree: Tree) -> None:
    assert probe(tree, "sc('personality', 0xffffffff)") == {"ok": True}
    assert_eperm(probe(tree, "sc('personality', 0x0400000)"))  # READ_IMPLIES_EXEC


# -- devices and metadata ---------------------------------------------------------


def test_attack_root_mknods_the_worktree_disk_in_its_tmpdir_and_writes_through_it(
    tree: Tree,
) -> None:
    """A device node for the disk that holds the worktree, made in the command's own
    TMPDIR (writable), would let it rewrite src/app.py below the filesystem: no Landlock
    rule, no inotify event. Run through `guard run` as the agent would."""
    dev = os.stat(tree.worktree).st_dev
    script = f"""
import os, stat
node = os.path.join(os.environ["TMPDIR"], "disk")
try:
    os.mknod(node, stat.S_IFBLK | 0o600, {dev})
except OSError as exc:
    print("mknod", exc.errno)
else:
    with open(node, "r+b") as disk:
        data = disk.read(256 << 20)
        at = data.find(b"print('original')")
        if at >= 0:
            disk.seek(at)
            disk.write(b"print('PWNED!!!')")
    print("wrote", at)
print("exists", os.path.lexists(node))
"""
    proc = subprocess.run(
        guard_argv("run", "--agent", "plan", "--no-monitor", "-q", "--", sys.executable, "-c",
                   script),
        capture_output=True, text=True, cwd=tree.worktree, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["mknod", str(errno.EPERM), "exists", "False"], proc.stdout
    subprocess.run(["sync"], check=True)
    with open(tree.victim, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert f.read() == b"print('original')\n"


def test_character_devices_are_refused_but_fifos_are_not(tree: Tree, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # /dev/mem's numbers; refused by the filter whatever the Landlock rights
    body = f"os.mknod({str(scratch / 'mem')!r}, 0o20600, os.makedev(1, 1))"
    assert confined_probe([scratch], SYSCALL + body) == {"ok": False, "errno": "EPERM"}
    body = f"os.mkfifo({str(scratch / 'fifo')!r})"
    assert confined_probe([scratch], SYSCALL + body) == {"ok": True}
    assert not (scratch / "mem").exists()
    assert (scratch / "fifo").exists()


def test_attack_metadata_changes_outside_landlock_are_refused(tree: Tree) -> None:
    """Set-user-ID bits, ownership, xattrs and ACLs, inode flags: none is a Landlock right,
    and the monitor watches only the worktree. The target here is beside the worktree."""
    target = tree.outside / "tool"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    d = tree.outside
    before = os.stat(target)
    attempts = {
        "setuid": f"os.chmod({str(target)!r}, 0o4755)",
        "setgid": f"os.chmod({str(target)!r}, 0o2755)",
        "chown": f"os.chown({str(target)!r}, 1000, 1000)",
        "lchown": f"os.lchown({str(target)!r}, 1000, -1)",
        "fchown": f"fd = os.open({str(target)!r}, os.O_RDONLY)\nos.fchown(fd, 1000, 1000)",
        "xattr": f"os.setxattr({str(target)!r}, 'user.guard', b'x')",
        "acl": f"os.setxattr({str(d)!r}, 'system.posix_acl_default', b'\\x02\\x00\\x00\\x00')",
        "removexattr": f"os.removexattr({str(target)!r}, 'user.guard')",
        "append-only": (
            "import fcntl, struct\n"
            f"fd = os.open({str(d)!r}, os.O_RDONLY)\n"
            "fcntl.ioctl(fd, 0x40086602, struct.pack('l', 0x20))"
        ),
        "setuid-create": f"os.close(os.open({str(tree.plans / 'x.md')!r}, os.O_CREAT|os.O_WRONLY,"
        " 0o4755))",
    }
    xattrs = ("xattr", "acl", "removexattr")  # as a file system without xattrs says
    for what, body in attempts.items():
        err = errno.errorcode[errno.EOPNOTSUPP] if what in xattrs else "EPERM"
        assert probe(tree, body) == {"ok": False, "errno": err}, what
    after = os.stat(target)
    assert (after.st_mode, after.st_uid, after.st_gid) == (
        before.st_mode,
        before.st_uid,
        before.st_gid,
    )
    assert os.listxattr(target) == []
    assert not (tree.plans / "x.md").exists()


def test_plain_modes_and_reads_still_work(tree: Tree, tmp_path: Path) -> None:
    """What ordinary tools do in their scratch space keeps working."""
    body = f"""
    p = {str(tree.plans / "n.md")!r}
    open(p, 'w').write('x')
    os.chmod(p, 0o600)
    os.chmod(p, 0o644)
    assert open({str(tree.victim)!r}).read() == "print('original')\\n"
    os.unlink(p)
    """
    assert probe(tree, body) == {"ok": True}


def test_attack_ptrace_of_a_process_outside_is_refused(tree: Tree) -> None:
    outside = subprocess.Popen(["sleep", "60"])
    try:
        body = f"""
        r = libc.ptrace(16, {outside.pid}, 0, 0)  # PTRACE_ATTACH
        if r != 0:
            raise OSError(ctypes.get_errno(), "ptrace")
        """
        assert_eperm(probe(tree, body))
    finally:
        outside.kill()
        outside.wait()


def test_filter_alone_refuses_even_with_capabilities(tree: Tree) -> None:
    """The two layers stand alone: in a child that keeps root's capabilities, the filter
    by itself refuses (and says EPERM, not the missing-capability EPERM of the kernel)."""
    if not ROOT:
        pytest.skip("only root holds the capabilities this test keeps")
    name = socket.gethostname().encode()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            seccomp.Filter().install()
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.sethostname(name, len(name)) == 0:
                os._exit(3)
            os._exit(0 if ctypes.get_errno() == errno.EPERM else 4)
        except BaseException:
            os._exit(5)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_guard_run_refuses_system_state_changes_end_to_end(tree: Tree) -> None:
    """The real CLI: hostname, date and chown fail inside, and the command goes on."""
    script = (
        'hostname "$(hostname)" 2>/dev/null; echo "hostname=$?"; '
        'date -s "$(date)" >/dev/null 2>&1; echo "date=$?"; '
        'touch "$TMPDIR/f"; chown 1:1 "$TMPDIR/f" 2>/dev/null; echo "chown=$?"; '
        'rm -f "$TMPDIR/f"'
    )
    proc = subprocess.run(
        guard_argv("run", "--no-monitor", "--", "sh", "-c", script),
        capture_output=True, text=True, cwd=tree.worktree, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["hostname=1", "date=1", "chown=1"], proc.stdout
    assert "all capabilities dropped" in proc.stderr or not ROOT
    assert "refused by seccomp" in proc.stderr


# -- the walls around other processes and local IPC (plan mode: --walls) -----------------


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("unix", [True, False])
def test_the_walls_program_is_well_formed(arch: str, unix: bool) -> None:
    prog = seccomp.program(arch, walls=True, unix_sockets=unix)
    assert len(prog) < 4096
    for pc, (op, jt, jf, _k) in enumerate(prog):
        if op & 0x07 == 0x05:
            assert pc + 1 + jt < len(prog) and pc + 1 + jf < len(prog), pc
    assert prog[-1] == (0x06, 0, 0, seccomp.RET_ALLOW)
    assert len(prog) > len(seccomp.program(arch))


def walls_probe(tree: Tree, body: str, *extra: str) -> dict[str, object]:
    return confined_probe(
        [str(tree.plans), "/dev/null"], SYSCALL + textwrap.dedent(body), "--walls", *extra
    )


def test_attack_reaching_into_a_sibling_process_is_refused(tree: Tree) -> None:
    """Another process (here a sibling the test started, outside any PID namespace: the
    filter's wall holds by itself): its limits, priority, I/O priority, scheduling, memory,
    descriptors and kernel objects."""
    sibling = subprocess.Popen(["sleep", "60"])
    pid = sibling.pid
    limits = Path(f"/proc/{pid}/limits").read_text()
    nice = Path(f"/proc/{pid}/stat").read_text().split()[18]
    try:
        rlim = "(ctypes.c_ulong * 2)(0, 0)"
        for call in (
            f"r = {rlim}; sc('prlimit64', {pid}, 4, ctypes.addressof(r), 0)",  # RLIMIT_CORE
            f"sc('setpriority', 0, {pid}, 19)",  # PRIO_PROCESS
            "sc('setpriority', 1, 0, 19)",  # PRIO_PGRP: its own group holds guard and the host
            "sc('setpriority', 2, 0, 19)",  # PRIO_USER: every process of the user
            f"sc('ioprio_set', 1, {pid}, 0x6000)",  # IOPRIO_WHO_PROCESS, idle class
            f"sc('sched_setscheduler', {pid}, 5, ctypes.addressof(ctypes.c_int(0)))",  # IDLE
            f"sc('sched_setparam', {pid}, ctypes.addressof(ctypes.c_int(0)))",
            f"sc('sched_setattr', {pid}, 0, 0)",
            f"sc('process_vm_writev', {pid}, 0, 0, 0, 0, 0)",
            f"sc('process_vm_readv', {pid}, 0, 0, 0, 0, 0)",
            f"sc('kcmp', os.getpid(), {pid}, 0, 0, 0)",
            f"sc('pidfd_getfd', os.pidfd_open({pid}), 1, 0)",
            f"sc('process_madvise', os.pidfd_open({pid}), 0, 0, 0, 0)",
            f"sc('ptrace', 16, {pid}, 0, 0)",  # PTRACE_ATTACH
        ):
            assert_eperm(walls_probe(tree, call))
        assert Path(f"/proc/{pid}/limits").read_text() == limits
        assert Path(f"/proc/{pid}/stat").read_text().split()[18] == nice
        assert sibling.poll() is None
    finally:
        sibling.kill()
        sibling.wait()


def test_a_process_may_still_change_its_own_limits_and_priority(tree: Tree) -> None:
    body = """
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
    resource.prlimit(0, resource.RLIMIT_CORE)
    os.setpriority(os.PRIO_PROCESS, 0, 5)
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    """
    assert walls_probe(tree, body) == {"ok": True}


def test_io_uring_is_out_of_reach(tree: Tree) -> None:
    for call in ("sc('io_uring_setup', 8, 0)", "sc('io_uring_enter', 0, 0, 0, 0, 0, 0)",
                 "sc('io_uring_register', 0, 0, 0, 0)"):  # fmt: skip
        assert walls_probe(tree, call) == {"ok": False, "errno": "ENOSYS"}, call


def test_unix_sockets_are_refused_but_socketpair_and_inet_work(tree: Tree) -> None:
    assert_eperm(walls_probe(tree, "import socket; socket.socket(socket.AF_UNIX)"))
    body = """
    import socket
    a, b = socket.socketpair()
    a.sendall(b"x"); assert b.recv(1) == b"x"
    socket.socket(socket.AF_INET).close()
    socket.socket(socket.AF_INET6).close()
    """
    assert walls_probe(tree, body) == {"ok": True}
    # with a socket the policy lists, Unix sockets may be made where the namespaces cover
    # every other socket; in the fallback (no mount namespace) nothing would, so the
    # listed one is refused with the rest
    listed = ("--socket", str(tree.outside / "daemon.sock"))
    body = "import socket; socket.socket(socket.AF_UNIX).close()"
    assert walls_probe(tree, body, *listed, "--namespaces") == {"ok": True}
    assert_eperm(walls_probe(tree, body, *listed))


def test_attack_a_listed_socket_in_the_fallback_opens_no_other_socket(tree: Tree) -> None:
    """The fallback has no mount namespace to cover the host's other sockets, and a
    pathname socket is no Landlock right: a policy listing one socket would open every
    Unix socket (the user's tmux). The daemon the command aims at records nothing, and
    the announcement says that the listed socket is refused too."""
    other = tree.outside / "tmux.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(other))
    server.listen(1)
    server.settimeout(0)
    body = f"""
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.connect({str(other)!r})
    s.sendall(b"send-keys 'echo pwned >> src/app.py' Enter")
    """
    proc = subprocess.run(
        helper_argv([str(tree.plans), "/dev/null"],
                    [sys.executable, "-c", probe_source(SYSCALL + textwrap.dedent(body))],
                    "--walls", "--socket", str(tree.outside / "listed.sock"),
                    "--announce", "guard: "),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    try:
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.splitlines()[-1]) == {"ok": False, "errno": "EPERM"}
        with pytest.raises(BlockingIOError):
            server.accept()
        assert "the policy's listed ones too" in proc.stderr, proc.stderr
    finally:
        server.close()


# (family, type, protocol) a command could use to reach past the network namespace:
# vsock (the hypervisor and the host's other guests), packet and raw links, the kernel's
# crypto (alg), bluetooth, CAN, XDP, and netlink beyond the read-only routing family
_FAMILIES = {
    "vsock": (40, socket.SOCK_STREAM, 0),
    "packet": (17, socket.SOCK_DGRAM, 0),
    "alg": (38, socket.SOCK_SEQPACKET, 0),
    "bluetooth": (31, socket.SOCK_STREAM, 0),
    "can": (29, socket.SOCK_RAW, 1),
    "xdp": (44, socket.SOCK_RAW, 0),
    "tipc": (30, socket.SOCK_STREAM, 0),
    "netlink-uevent": (16, socket.SOCK_DGRAM, 15),
    "netlink-audit": (16, socket.SOCK_RAW, 9),
    "netlink-sock-diag": (16, socket.SOCK_DGRAM, 4),
    # the obsolete spelling of a packet socket: family AF_INET, type SOCK_PACKET (10), the
    # kernel makes it AF_PACKET; with SOCK_NONBLOCK and SOCK_CLOEXEC or'ed into the type
    "packet-as-inet": (2, 10, 0x0300),
    "packet-as-inet-flags": (2, 10 | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, 0x0300),
}


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "fallback"])
def test_attack_socket_families_outside_the_allowlist_are_refused(
    tree: Tree, namespaces: bool
) -> None:
    """Only inet, inet6, unix (where allowed) and netlink's routing family: every other
    family is refused by seccomp (EAFNOSUPPORT), on both paths."""
    extra = ("--namespaces",) if namespaces else ()
    for name, (family, kind, proto) in _FAMILIES.items():
        body = f"import socket; socket.socket({family}, {kind}, {proto}).close()"
        result = walls_probe(tree, body, *extra)
        assert result == {"ok": False, "errno": "EAFNOSUPPORT"}, (name, result)
    body = """
    import socket
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()  # NETLINK_ROUTE
    socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 0).close()
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
    socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
    """
    assert walls_probe(tree, body, *extra) == {"ok": True}


def test_attack_a_packet_socket_spelled_as_inet_is_refused_by_the_filter_alone() -> None:
    """socket(AF_INET, SOCK_PACKET) is a packet socket (raw frames of every interface in
    sight): in a child that keeps root's capabilities (so the kernel's own capability
    check cannot be what refuses it), the walls' filter by itself refuses it, as it
    refuses AF_PACKET; an Internet socket of any other type still opens."""
    if not ROOT:
        pytest.skip("only root holds the capabilities this test keeps")
    control = socket.socket(socket.AF_INET, 10, 0x0300)  # without the filter: it opens
    assert control.family == socket.AF_INET and control.type == 10
    control.close()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 5
        try:
            seccomp.Filter(walls=True, unix_sockets=False).install()
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
            socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK).close()
            for kind in (10, 10 | socket.SOCK_CLOEXEC):
                try:
                    socket.socket(socket.AF_INET, kind, 0x0300).close()
                    code = 3
                    break
                except OSError as exc:
                    code = 0 if exc.errno == errno.EAFNOSUPPORT else 4
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_attack_vsock_port_bound_inside_is_refused(tree: Tree) -> None:
    """vsock is not in the network namespace: a port bound inside is the host's (it would
    collide with, or stand in for, a host service talking to the hypervisor). The same
    bind succeeds without guard where the machine has vsock (the attack is real)."""
    port = 20000 + os.getpid() % 20000
    body = f"""
    import socket
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    s.bind((socket.VMADDR_CID_ANY, {port}))
    s.listen(1)
    """
    for extra in (("--namespaces",), ()):
        assert walls_probe(tree, body, *extra) == {"ok": False, "errno": "EAFNOSUPPORT"}
    try:
        control = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    except OSError:
        return  # no vsock on this machine: the refusal above is the whole test
    with control:
        control.bind((socket.VMADDR_CID_ANY, port))


def test_attack_message_queues_and_affinity_of_other_processes_are_refused(
    tree: Tree
) -> None:
    """The fallback shares the host's POSIX message queues and processes: opening or
    unlinking another program's queue and pinning another process to a CPU are refused
    by seccomp itself; the queue and the process are unchanged afterwards."""
    name = f"/guard-test-{os.getpid()}"
    librt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
    librt.mq_open.restype = ctypes.c_int
    qd = librt.mq_open(name.encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
    assert qd >= 0, os.strerror(ctypes.get_errno())
    sibling = subprocess.Popen(["sleep", "60"])
    affinity = os.sched_getaffinity(sibling.pid)
    try:
        for namespaces in (("--namespaces",), ()):
            queue = f"ctypes.addressof(ctypes.create_string_buffer({name[1:]!r}.encode()))"
            for call in (
                f"sc('mq_open', {queue}, os.O_RDWR, 0, 0)",
                f"sc('mq_unlink', {queue})",
                f"m = (ctypes.c_ulong * 16)(1); sc('sched_setaffinity', {sibling.pid}, 128,"
                " ctypes.addressof(m))",
                f"sc('migrate_pages', {sibling.pid}, 64, 0, 0)",
                f"sc('move_pages', {sibling.pid}, 0, 0, 0, 0, 0)",
            ):
                assert_eperm(walls_probe(tree, call, *namespaces))
        assert Path(f"/dev/mqueue{name}").exists() or not Path("/dev/mqueue").is_dir()
        assert librt.mq_unlink(name.encode()) == 0  # it was still there
        assert os.sched_getaffinity(sibling.pid) == affinity
        # its own affinity, as before
        assert walls_probe(tree, "os.sched_setaffinity(0, os.sched_getaffinity(0))") == {"ok": True}
    finally:
        librt.mq_unlink(name.encode())
        os.close(qd)
        sibling.kill()
        sibling.wait()


def test_without_the_walls_build_mode_keeps_its_tools(tree: Tree) -> None:
    """guard run in build mode does not raise the walls: Unix sockets and the limits of
    its own children work as they did."""
    body = """
    import resource, socket, subprocess
    socket.socket(socket.AF_UNIX).close()
    child = subprocess.Popen(["sleep", "30"])
    resource.prlimit(child.pid, resource.RLIMIT_CORE, (0, 0))
    child.kill()
    """
    assert probe(tree, body) == {"ok": True}
