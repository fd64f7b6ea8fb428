"""The plan directory's own mode and times cannot change while a confined command runs.

The plan directory stays writable (plan files are created in it) and the command's
user owns it, so neither a read-only mount nor Landlock stops ``chmod 0777`` (anyone
could plant a file there) or back-dating it (a change hidden from whatever goes by
times). guard's supervisor performs every chmod and utime itself
(:mod:`guard.sandbox.attrs`) and refuses them on the plan directory, by every way of
naming it: its path, ``.`` from inside it, ``..``, a symlink to it, a descriptor
(``fchmod``, ``futimens``), ``/proc/self/fd/N``. Checked inside, from outside WHILE
the command still runs, and after it; through the hook and ``guard run``, as root and
as uid 65534, in the namespaces and in the real Landlock-only fallback (a user
namespace whose limit is 0). The control: chmod and utime still work on a plan file
and in the private TMPDIR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sandbox_support import guard_argv, helper_argv, needs_landlock
from unprivileged import USERS, as_user, require_unprivileged
from walls_support import ATTEMPT, DOORS, Project, door_argv, py, run_project

from guard.sandbox import seccomp

pytestmark = needs_landlock

BACK = 946684800  # 2000-01-01

ATTACK = """
import errno, json, os, sys
plans = {plans!r}
tmp = os.environ["TMPDIR"]
out = {{}}

{attempt}

def via_fd(fn):
    fd = os.open(plans, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fn(fd)
    finally:
        os.close(fd)

def proc_self():
    fd = os.open(plans, os.O_PATH)
    try:
        os.chmod(f"/proc/self/fd/{{fd}}", 0o777)
    finally:
        os.close(fd)

def from_inside(what):
    here = os.getcwd()
    os.chdir(plans)
    try:
        what()
    finally:
        os.chdir(here)

# the control: a plan file and the private TMPDIR keep chmod and utime
plan = os.path.join(plans, "p.md")
with open(plan, "a") as f:
    f.write("# step\\n")
attempt("plan file chmod", lambda: os.chmod(plan, 0o600))
attempt("plan file utime", lambda: os.utime(plan, ({back}, {back})))
mine = os.path.join(tmp, "script.sh")
with open(mine, "w") as f:
    f.write("true\\n")
attempt("tmp chmod", lambda: os.chmod(mine, 0o755))
attempt("tmp utime", lambda: os.utime(mine, ({back}, {back})))
attempt("tmp touch", lambda: os.utime(mine))
st = os.stat(plan)
out["plan file"] = [oct(st.st_mode & 0o777), int(st.st_mtime)]
st = os.stat(mine)
out["tmp file"] = [oct(st.st_mode & 0o777), int(st.st_atime)]

# the attack: the plan directory itself, every way of naming it
link = os.path.join(tmp, "link")
os.symlink(plans, link)
attempt("chmod", lambda: os.chmod(plans, 0o777))
attempt("chmod .", lambda: from_inside(lambda: os.chmod(".", 0o777)))
attempt("chmod ../plans", lambda: from_inside(lambda: os.chmod("../plans", 0o777)))
attempt("chmod symlink", lambda: os.chmod(link, 0o777))
attempt("fchmod", lambda: via_fd(lambda fd: os.chmod(fd, 0o777)))
attempt("chmod /proc/self/fd", proc_self)
attempt("utime", lambda: os.utime(plans, ({back}, {back})))
attempt("utime nofollow", lambda: os.utime(plans, ({back}, {back}), follow_symlinks=False))
attempt("futimens", lambda: via_fd(lambda fd: os.utime(fd, ({back}, {back}))))
attempt("utime symlink", lambda: os.utime(link, ({back}, {back})))
st = os.stat(plans)
out["inside"] = [oct(st.st_mode & 0o777), int(st.st_mtime)]
print(json.dumps(out), flush=True)
sys.stdin.read(1)  # held until the test has looked from outside
"""

REFUSED = ("chmod", "chmod .", "chmod ../plans", "chmod symlink", "fchmod", "chmod /proc/self/fd",
           "utime", "utime nofollow", "futimens", "utime symlink")  # fmt: skip


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    yield from run_project(str(request.param))


def _attack(proj: Project, argv: list[str]) -> None:
    os.chmod(proj.plans, 0o755)
    before = os.stat(proj.plans)
    with subprocess.Popen(
        argv, cwd=proj.root, env=proj.env, text=True, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stdin is not None
            line = proc.stdout.readline()
            during = os.stat(proj.plans)  # the command is still running, held on its stdin
            proc.stdin.write("g")
            proc.stdin.close()
            proc.wait(timeout=120)
        finally:
            proc.kill()
        assert proc.stderr is not None
        err = proc.stderr.read()
    assert proc.returncode == 0, (line, err)
    out = json.loads(line)
    assert {k: out[k] for k in REFUSED} == dict.fromkeys(REFUSED, "EPERM"), out
    assert out["inside"] == ["0o755", int(before.st_mtime)], out
    for seen in (during, os.stat(proj.plans)):
        assert oct(seen.st_mode & 0o7777) == "0o755"
        assert seen.st_mtime >= before.st_mtime
    # the control: the same calls on a plan file and in the private TMPDIR worked
    controls = ("plan file chmod", "plan file utime", "tmp chmod", "tmp utime", "tmp touch")
    assert {k: out[k] for k in controls} == dict.fromkeys(controls, "ok"), out
    assert out["plan file"] == ["0o600", BACK], out
    assert out["tmp file"][0] == "0o755" and out["tmp file"][1] > BACK, out
    assert (proj.plans / "p.md").read_text() == "# plan\n# step\n"
    assert "the plan directory" not in err, err  # nothing to restore: nothing changed


@pytest.mark.parametrize("door", DOORS)
def test_attack_the_plan_directory_cannot_be_made_0777_or_back_dated(
    proj: Project, door: str
) -> None:
    """In the namespaces, through the hook's confined command and ``guard run``."""
    source = ATTACK.format(plans=str(proj.plans), back=BACK, attempt=ATTEMPT)
    _attack(proj, door_argv(proj, door, py(source)))


def test_attack_the_plan_directory_metadata_in_the_fallback_as_root(root_proj: Project) -> None:
    """Root through the helper without ``--namespaces``: the Landlock-only fallback."""
    source = ATTACK.format(plans=str(root_proj.plans), back=BACK, attempt=ATTEMPT)
    _attack(root_proj, helper_argv([], [sys.executable, "-c", source], "--plans",
                                   str(root_proj.plans), "--private-tmp", "--walls"))  # fmt: skip


def test_attack_the_plan_directory_metadata_in_the_fallback_as_a_user(
    nobody_proj: Project,
) -> None:
    """uid 65534 where no user namespace may be made (for real): guard run's fallback."""
    source = ATTACK.format(plans=str(nobody_proj.plans), back=BACK, attempt=ATTEMPT)
    argv = guard_argv("run", "-q", "--no-monitor", "--", sys.executable, "-c", source)
    _attack(nobody_proj, as_user("nobody", argv, no_user_namespaces=True))


ORPHAN = """
import errno, os, sys
path = os.path.join(os.environ["TMPDIR"], "f")
open(path, "w").close()
os.chmod(path, 0o600)  # answered while the supervisor is there
print("ready", flush=True)
sys.stdin.read(1)  # the test kills the helper meanwhile
for name, fn in (("file", lambda: os.chmod(path, 0o777)),
                 ("plans", lambda: os.chmod({plans!r}, 0o777))):
    try:
        fn()
        print(name, "ok", flush=True)
    except OSError as exc:
        print(name, errno.errorcode[exc.errno], flush=True)
print(oct(os.stat(path).st_mode & 0o777), flush=True)
"""


def test_without_the_supervisor_chmod_fails(root_proj: Project) -> None:
    """Fail closed: in the fallback the command outlives a killed helper (no PID
    namespace); its chmod calls then fail (``ENOSYS``), on any file."""
    os.chmod(root_proj.plans, 0o755)
    argv = helper_argv([], [sys.executable, "-c", ORPHAN.format(plans=str(root_proj.plans))],
                       "--plans", str(root_proj.plans), "--private-tmp", "--walls")  # fmt: skip
    tmp = root_proj.base / "tmp"
    tmp.mkdir()
    with subprocess.Popen(
        argv, cwd=root_proj.root, env={**root_proj.env, "TMPDIR": str(tmp)}, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        try:
            assert proc.stdout.readline().strip() == "ready"
            proc.kill()  # the helper, and its supervising thread with it
            proc.wait(timeout=60)
            proc.stdin.write("g")
            proc.stdin.close()
            lines = proc.stdout.read().split("\n")  # to its end: the orphan has ended
        finally:
            proc.kill()
    assert lines[:3] == ["file ENOSYS", "plans ENOSYS", "0o600"], lines
    assert oct(os.stat(root_proj.plans).st_mode & 0o777) == "0o755"


def test_attack_the_plan_directory_metadata_from_a_command_guard_confines_twice(
    root_proj: Project,
) -> None:
    """guard inside a command guard already confines (the hook's command under ``guard
    run``): a seccomp filter keeps one listener, so the inner helper installs its filter
    unsupervised and the outer supervisor answers: the plan directory still cannot change,
    a file in the private TMPDIR still can."""
    os.chmod(root_proj.plans, 0o755)
    plans = str(root_proj.plans)
    inner = helper_argv([], ["sh", "-c", 'chmod 0777 "$1"; echo plans=$?; touch "$TMPDIR/f";'
                             ' chmod 0700 "$TMPDIR/f"; echo tmp=$?', "sh", plans],
                        "--plans", plans, "--private-tmp", "--walls")  # fmt: skip
    outer = helper_argv([], inner, "--plans", plans, "--private-tmp", "--namespaces", "--walls")
    proc = subprocess.run(outer, cwd=root_proj.root, env=root_proj.env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["plans=1", "tmp=0"], (proc.stdout, proc.stderr)
    assert oct(os.stat(root_proj.plans).st_mode & 0o777) == "0o755"


# Raw system calls a C library does not make for chmod or touch, and a thread whose cwd is
# its own (unshare(CLONE_FS)): the supervisor must name the file as the kernel would.
RAW = """
import ctypes, errno, json, os, threading
libc = ctypes.CDLL(None, use_errno=True)
NR = {numbers!r}
plans = {plans!r}
out = {{}}

def sc(name, *args):
    if NR.get(name) is None:
        return  # not on this machine
    res = libc.syscall(ctypes.c_long(NR[name]), *args)
    if res < 0:
        raise OSError(ctypes.get_errno(), name)

{attempt}

C = ctypes.c_long
opath = os.open(plans, os.O_PATH | os.O_DIRECTORY)
rdonly = os.open(plans, os.O_RDONLY | os.O_DIRECTORY)
parent = os.open(os.path.dirname(plans), os.O_PATH | os.O_DIRECTORY)
ts = (ctypes.c_long * 4)({back}, 0, {back}, 0)  # timespec[2] and timeval[2] alike
EMPTY = 0x1000  # AT_EMPTY_PATH
attempt("fchmodat2 empty path", lambda: sc("fchmodat2", C(opath), b"", C(0o777), C(EMPTY)))
attempt("fchmodat2 nofollow", lambda: sc("fchmodat2", C(parent), b"plans", C(0o777), C(0x100)))
attempt("fchmodat plans/", lambda: sc("fchmodat", C(parent), b"plans/", C(0o777), C(0)))
attempt("fchmod O_PATH", lambda: sc("fchmod", C(opath), C(0o777)))
attempt("chmod /proc/thread-self/fd", lambda: os.chmod(f"/proc/thread-self/fd/{{opath}}", 0o777))
attempt("chmod //plans//", lambda: os.chmod("//" + plans.lstrip("/") + "//", 0o777))
attempt("utimensat empty path", lambda: sc("utimensat", C(opath), b"", ts, C(EMPTY)))
attempt("utimensat fd NULL", lambda: sc("utimensat", C(rdonly), None, ts, C(0)))
attempt("futimesat dirfd", lambda: sc("futimesat", C(parent), b"plans", ts))
attempt("utime", lambda: sc("utime", plans.encode(), ts))
attempt("utimes", lambda: sc("utimes", plans.encode(), ts))

def own_cwd(where, name, fn):
    def run():
        if libc.unshare(0x200) != 0:  # CLONE_FS: this thread's cwd is its own
            out[name] = "unshare " + errno.errorcode[ctypes.get_errno()]
            return
        os.chdir(where)
        attempt(name, fn)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()

own_cwd(plans, "thread cwd chmod .", lambda: os.chmod(".", 0o777))
own_cwd(plans, "thread cwd utime .", lambda: os.utime(".", ({back}, {back})))
# the process's cwd holds a decoy named plans; the thread's is the plan directory's parent
tmp = os.environ["TMPDIR"]
os.mkdir(os.path.join(tmp, "plans"), 0o700)
os.chdir(tmp)
own_cwd(os.path.dirname(plans), "thread cwd chmod plans", lambda: os.chmod("plans", 0o777))
attempt("decoy chmod", lambda: os.chmod("plans", 0o755))
st = os.stat(plans)
out["inside"] = [oct(st.st_mode & 0o7777), int(st.st_mtime)]
print(json.dumps(out), flush=True)
"""
_COL = 0 if seccomp.machine() == "x86_64" else 1
NUMBERS = {name: nrs[_COL] for name, nrs in seccomp.NUMBERS.items()}
RAW_REFUSED = (
    "fchmodat2 empty path", "fchmodat2 nofollow", "fchmodat plans/", "fchmod O_PATH",
    "chmod /proc/thread-self/fd", "chmod //plans//", "utimensat empty path",
    "utimensat fd NULL", "futimesat dirfd", "utime", "utimes", "thread cwd chmod .",
    "thread cwd utime .", "thread cwd chmod plans",
)  # fmt: skip


#: (user, front door): the hook's rewrite, guard run in plan mode and guard confine, in the
#: namespaces and in the Landlock-only fallback (root: guard's test switch; uid 65534: a
#: user namespace whose limit is 0, for real)
RAW_CASES = [(user, door) for user in USERS for door in ("hook", "run", "confine")] + [
    (user, door) for user in USERS for door in ("run-fallback", "confine-fallback")
]


@pytest.mark.parametrize(("user", "door"), RAW_CASES)
def test_attack_the_plan_directory_by_raw_calls_and_a_threads_own_cwd(
    user: str, door: str
) -> None:
    """fchmodat2 and utimensat with AT_EMPTY_PATH on an O_PATH descriptor, futimesat, the
    old utime and utimes calls, /proc/thread-self/fd, and a thread with a cwd of its own
    (in the plan directory, or in its parent while the process's cwd holds a decoy named
    the same): every one is refused (EPERM) and the plan directory keeps its mode and
    times, seen inside and from outside; the decoy's chmod works (the control)."""
    if user != "root":
        require_unprivileged()
    fallback = door.endswith("-fallback")
    for proj in run_project(user):
        os.chmod(proj.plans, 0o755)
        before = os.stat(proj.plans)
        source = RAW.format(plans=str(proj.plans), back=BACK, numbers=NUMBERS, attempt=ATTEMPT)
        command = py(source)
        if door == "hook":
            argv = door_argv(proj, "hook", command)
        else:
            kind = door.removesuffix("-fallback")
            extra = ("-q", "--agent", "plan") if kind == "run" else ()
            switches = ("no-namespaces",) if fallback and user == "root" else ()
            argv = as_user(user, guard_argv(kind, *extra, "--", "bash", "-c", command,
                                            switches=switches),
                           no_user_namespaces=fallback and user != "root")  # fmt: skip
        proc = subprocess.run(argv, cwd=proj.root, env=proj.env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert ("Landlock-only fallback" in proc.stderr) == fallback, proc.stderr
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert {k: out[k] for k in RAW_REFUSED} == dict.fromkeys(RAW_REFUSED, "EPERM"), out
        assert out["decoy chmod"] == "ok", out
        assert out["inside"] == ["0o755", int(before.st_mtime)], out
        after = os.stat(proj.plans)
        assert oct(after.st_mode & 0o7777) == "0o755" and after.st_mtime >= before.st_mtime


@pytest.mark.parametrize(("user", "door"), [c for c in RAW_CASES if c[1] != "hook"])
def test_attack_a_chmod_as_the_commands_first_call_waits_for_the_supervisor(
    user: str, door: str
) -> None:
    """The listener reaches the supervisor only once the command has started: chmod and
    touch run as the command itself (no shell, no interpreter before them: the call comes
    in the first microseconds; the hook's rewrite always starts a shell first), three
    times each, and a shell that makes three at once in
    the background. Every one is refused and the plan directory keeps its mode and times."""
    if user != "root":
        require_unprivileged()
    fallback = door.endswith("-fallback")
    for proj in run_project(user):
        os.chmod(proj.plans, 0o755)
        before = os.stat(proj.plans)
        plans = str(proj.plans)
        kind = door.removesuffix("-fallback")
        extra = ("-q", "--agent", "plan") if kind == "run" else ()
        switches = ("no-namespaces",) if fallback and user == "root" else ()
        burst = f"chmod 0777 {plans} & chmod 0700 {plans} & touch -d @{BACK} {plans} & wait"
        commands = [["chmod", "0777", plans], ["touch", "-d", f"@{BACK}", plans]] * 3
        for command in [*commands, ["sh", "-c", burst]]:
            argv = as_user(user, guard_argv(kind, *extra, "--", *command, switches=switches),
                           no_user_namespaces=fallback and user != "root")  # fmt: skip
            proc = subprocess.run(argv, cwd=proj.root, env=proj.env, capture_output=True,
                                  text=True, timeout=120)  # fmt: skip
            after = os.stat(proj.plans)
            assert oct(after.st_mode & 0o7777) == "0o755", (command, proc.stderr)
            assert after.st_mtime >= before.st_mtime, (command, proc.stderr)
            if command[0] != "sh":
                assert proc.returncode == 1, (command, proc.returncode, proc.stderr)
                assert "Operation not permitted" in proc.stderr, proc.stderr
