"""Attacks on the user's other terminals, with a real tmux server as the victim.

A plan-mode command, run through the installed hook's rewrite and through ``guard
run``, as root and as uid 65534, aims at the pseudo-terminal of a tmux pane where
the user types a password into a program with echo off: it tries to read what is
typed, to chmod the terminal 0666, to change its settings (echo, ``VINTR``), to make
it exclusive (``TIOCEXCL``: sudo prompts there would fail) and to change its line
discipline. In the namespaces the host's ``/dev/pts`` is not in the view (a devpts
instance of the command's own is), so every attempt fails with ENOENT; afterwards
the pane's mode, settings and input are checked as they were, and the same attack
without guard is run to show that it is real.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import termios
import time
from collections.abc import Iterator

import pytest
from sandbox_support import needs_landlock
from unprivileged import USERS, as_user, require_unprivileged
from walls_support import ATTEMPT, DOORS, Project, confined, door_argv, py, run_project

pytestmark = needs_landlock


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    yield from run_project(str(request.param))


ATTACK = """
import errno, fcntl, json, os, stat, termios, time
out = {{}}
{attempt}
tty = {tty!r}
stolen = []
def read():
    fd = os.open(tty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    end = time.monotonic() + {read_for}
    while time.monotonic() < end:
        try:
            stolen.append(os.read(fd, 100).decode(errors="replace"))
        except BlockingIOError:
            time.sleep(0.02)
    os.close(fd)
def settings():
    fd = os.open(tty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    attrs = termios.tcgetattr(fd)
    attrs[3] |= termios.ECHO
    attrs[6][termios.VINTR] = b"x"
    termios.tcsetattr(fd, termios.TCSANOW, attrs)
    os.close(fd)
def exclusive():
    fd = os.open(tty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    fcntl.ioctl(fd, termios.TIOCEXCL)
    os.close(fd)
def discipline():
    fd = os.open(tty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    fcntl.ioctl(fd, 0x5423, (1).to_bytes(4, "little"))  # TIOCSETD: N_SLIP
    os.close(fd)
attempt("chmod", lambda: os.chmod(tty, 0o666))
attempt("settings", settings)
attempt("exclusive", exclusive)
attempt("discipline", discipline)
print("ready", flush=True)
attempt("read", read)
out["stolen"] = "".join(stolen)
print(json.dumps(out), flush=True)
"""


class Pane:
    """A tmux server of the project's user with one pane: a program that reads a password
    with echo off and writes what it read to a file (as ``sudo`` or ``ssh`` would use it)."""

    def __init__(self, proj: Project, name: str) -> None:
        self.proj = proj
        self._fds: list[int] = []
        self.typed = proj.base / f"typed-{name}.txt"
        self.sock = str(proj.base / f"tmux-{name}.sock")
        self.tmux = as_user(proj.user, ["tmux", "-S", self.sock])
        victim = f"stty -echo; read pw; echo \"$pw\" > {self.typed}; sleep 300"
        subprocess.run([*self.tmux, "new-session", "-d", "-s", "user", "-x", "80", "-y", "20",
                        victim], check=True, env=proj.env, timeout=60)  # fmt: skip
        self.tty = self._query("#{pane_tty}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until stty has run: echo is off
            if not termios.tcgetattr(self._open())[3] & termios.ECHO:
                break
            time.sleep(0.05)

    def _query(self, fmt: str) -> str:
        proc = subprocess.run(
            [*self.tmux, "display", "-p", "-t", "user", fmt], env=self.proj.env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    def _open(self) -> int:
        fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        self._fds.append(fd)
        return fd

    def state(self) -> tuple[int, list[object]]:
        fd = self._open()  # fails with EBUSY for root-less openers when exclusive
        return os.stat(self.tty).st_mode, termios.tcgetattr(fd)

    def type_password(self) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "user", "hunter2", "Enter"],
                       env=self.proj.env, check=True, timeout=60)  # fmt: skip

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], env=self.proj.env, capture_output=True,
                       timeout=60)  # fmt: skip
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def _attack(proj: Project, pane: Pane, run: object, read_for: float) -> dict[str, str]:
    command = py(ATTACK.format(tty=pane.tty, read_for=read_for, attempt=ATTEMPT))
    proc = subprocess.Popen(
        run(command),  # type: ignore[operator]
        cwd=proj.root, env=proj.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", (line, proc.stderr.read() if proc.stderr else "")
    pane.type_password()  # while the command listens on the pane's terminal
    out = proc.stdout.read()  # to its end: the command has ended (bounded by its read)
    err = proc.stderr.read() if proc.stderr else ""
    proc.wait(timeout=120)
    lines = [x for x in out.splitlines() if x.startswith("{")]
    assert lines, (out, err)
    result: dict[str, str] = json.loads(lines[-1])
    return result


@pytest.mark.parametrize("door", DOORS)
def test_attack_another_terminal_cannot_be_read_chmodded_or_reconfigured(
    proj: Project, door: str
) -> None:
    pane = Pane(proj, door)
    try:
        before = pane.state()
        result = _attack(proj, pane, lambda c: door_argv(proj, door, c), 3.0)
        assert result == {
            "chmod": "ENOENT", "settings": "ENOENT", "exclusive": "ENOENT",
            "discipline": "ENOENT", "read": "ENOENT", "stolen": "",
        }, result  # fmt: skip
        deadline = time.monotonic() + 30
        while not pane.typed.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pane.typed.read_text() == "hunter2\n"  # the program got the password
        assert pane.state() == before  # mode, echo, VINTR: as they were; not exclusive
    finally:
        pane.close()
    # the control: without guard the same command changes the pane and takes the input
    pane = Pane(proj, f"{door}-bare")
    try:
        result = _attack(proj, pane, lambda c: as_user(proj.user, ["bash", "-c", c]), 3.0)
        assert result["chmod"] == result["settings"] == result["exclusive"] == "ok", result
        assert os.stat(pane.tty).st_mode & 0o777 == 0o666
    finally:
        pane.close()


@pytest.mark.parametrize("door", DOORS)
def test_without_a_terminal_the_command_has_none(proj: Project, door: str) -> None:
    """Run without a terminal (as a host runs it, on pipes): the view holds a devpts
    instance with no terminal in it, /dev/console is empty, the consoles and serial
    lines read nothing, and a pseudo-terminal of its own still works."""
    source = """
import json, os
out = {"pts": sorted(os.listdir("/dev/pts"))}
for dev in ("/dev/console", "/dev/tty1", "/dev/ttyS0", "/dev/vcs1"):
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        out[dev] = os.read(fd, 10).decode() or "empty"
        os.close(fd)
    except OSError as exc:
        out[dev] = exc.strerror
master, slave = os.openpty()
os.write(slave, b"own\\n")
out["own pty"] = os.read(master, 10).decode().strip()
out["pts after"] = sorted(os.listdir("/dev/pts"))
print(json.dumps(out))
"""
    proc = confined(proj, door, py(source))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["pts"] == ["ptmx"], out
    assert out["own pty"] == "own" and out["pts after"] == ["0", "ptmx"], out
    for dev in ("/dev/console", "/dev/tty1", "/dev/ttyS0", "/dev/vcs1"):
        assert out[dev] in ("empty", "No such file or directory", "Permission denied"), out


def test_the_command_keeps_its_own_terminal(proj: Project) -> None:
    """On a real pseudo-terminal (its controlling one) the command still reads and writes
    it, through its fds, /dev/tty and the name ttyname finds (/dev/console), and sets
    its modes; the host's other pseudo-terminals are not in its view."""
    source = """
import json, os, termios
attrs = termios.tcgetattr(0)
termios.tcsetattr(0, termios.TCSANOW, attrs)
with open("/dev/tty", "w") as tty:
    tty.write("tty-ok\\n")
print(json.dumps({"name": os.ttyname(0), "pts": sorted(os.listdir("/dev/pts"))}))
"""
    master, slave = os.openpty()

    def controlling() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        door_argv(proj, "run", py(source)), stdin=slave, stdout=slave, stderr=slave,
        cwd=proj.root, env=proj.env, start_new_session=True, preexec_fn=controlling,
    )  # fmt: skip
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, output
    text = output.decode(errors="replace")
    assert "tty-ok" in text, text
    line = next(x for x in text.splitlines() if x.startswith("{"))
    out = json.loads(line)
    assert out == {"name": "/dev/console", "pts": ["ptmx"]}, out


def _fallback_attack(proj: Project, run: object) -> None:
    """Without namespaces the host's /dev/pts is in the view, so Landlock holds the line:
    reading is handled, and only the command's own terminal may be read, written or sent
    ioctls. A plain chmod of the other terminal's node (chmod is no Landlock right, and
    the user owns the node) is refused by guard's supervisor (:mod:`guard.sandbox.attrs`)."""
    pane = Pane(proj, "fallback")
    try:
        before = pane.state()
        result = _attack(proj, pane, run, 3.0)
        assert result == {
            "chmod": "EPERM", "settings": "EACCES", "exclusive": "EACCES",
            "discipline": "EACCES", "read": "EACCES", "stolen": "",
        }, result  # fmt: skip
        deadline = time.monotonic() + 30
        while not pane.typed.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pane.typed.read_text() == "hunter2\n"
        assert pane.state() == before  # mode, echo, VINTR as they were; not exclusive
    finally:
        pane.close()


def test_in_the_fallback_another_terminal_cannot_be_read_or_reconfigured_as_root(
    root_proj: Project,
) -> None:
    """Root through the helper without ``--namespaces`` (root makes namespaces even where
    a user namespace may not be made, so its fallback is this)."""
    from sandbox_support import helper_argv

    plans = str(root_proj.plans)
    _fallback_attack(root_proj, lambda c: helper_argv(
        [], ["bash", "-c", c], "--plans", plans, "--devices", "--walls"))  # fmt: skip


def test_in_the_fallback_another_terminal_cannot_be_read_or_reconfigured_as_a_user(
    nobody_proj: Project,
) -> None:
    """uid 65534 where no user namespace may be made (for real): guard run's fallback."""
    import sys

    argv = [sys.executable, "-m", "guard", "run", "-q", "--no-monitor", "--", "bash", "-c"]
    _fallback_attack(
        nobody_proj, lambda c: as_user("nobody", [*argv, c], no_user_namespaces=True)
    )
