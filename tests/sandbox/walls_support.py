"""A project, a user and a front door for the attacks on the walls (tests/sandbox/test_walls.py).

Each attack is a shell command a plan-mode agent asks to run. It goes through one of
two front doors, for real:

* ``hook``: the hook ``guard install claude-code --project`` wrote, fed the PreToolUse
  payload Claude Code sends for a Bash call in plan mode; the ``updatedInput`` command
  it answers is then run with ``bash -c``, exactly as the host runs it;
* ``run``: ``guard run -- bash -c COMMAND``.

and as one of two users: root, and uid 65534 (``unprivileged.as_user``), whose files
are the project's. Daemons the attacks aim at (a pathname-socket daemon, an
abstract-socket daemon, an HTTP recorder) run in the test process and record every
connection.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_support import guard_argv
from unprivileged import NOBODY, as_user, chown_tree, reachable_dir

DOORS = ("hook", "run")
#: an attack script's ``attempt(name, fn)``: records "ok", or the errno's name, in ``out``
#: (the script imports errno and defines ``out``); put in with ``.format(attempt=ATTEMPT)``
ATTEMPT = """
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
"""
PYTHON = sys.executable


@dataclass
class Project:
    user: str
    base: Path  # reachable by the user; holds everything below
    root: Path  # the worktree
    plans: Path
    victim: Path  # src/app.py, committed
    outside: Path  # a file of the user's beyond the worktree
    home: Path
    env: dict[str, str] = field(default_factory=dict)
    hook: str | None = None  # the installed hook command
    #: the walls' test switches ``guard run`` runs with (through the test-only entry point)
    switches: tuple[str, ...] = ()

    @property
    def uid(self) -> int:
        return 0 if self.user == "root" else NOBODY


def make_project(user: str) -> Project:
    base = reachable_dir("guard-walls-", user)
    root = base / "repo"
    (root / "src").mkdir(parents=True)
    victim = root / "src" / "app.py"
    victim.write_text("print('original')\n")
    plans = root / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    (plans / "p.md").write_text("# plan\n")
    outside = base / "outside.txt"
    outside.write_text("outside\n")
    outside.chmod(0o644)
    home = base / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GUARD_", "XDG_", "PYTHON", "CLAUDE", "TMUX"))
    }
    env.update(
        # SHELL: tmux runs a pane's command with $SHELL, else the passwd entry's shell,
        # which is nologin for uid 65534 (the pane would die at once)
        HOME=str(home), GUARD_HOOK_DAEMON="0", TMPDIR="/tmp", SHELL="/bin/sh",
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )  # fmt: skip
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "src"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "init"], check=True, env=env)
    chown_tree(base, user)
    proj = Project(user, base, root, plans, victim, outside, home, env)
    return proj


def install_hook(proj: Project) -> str:
    """``guard install claude-code --project`` as the user; the command it wrote."""
    if proj.hook is None:
        proc = subprocess.run(
            as_user(proj.user, [PYTHON, "-m", "guard", "install", "claude-code", "--project"]),
            cwd=proj.root, env=proj.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        settings = json.loads((proj.root / ".claude" / "settings.json").read_text())
        proj.hook = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    return proj.hook


def hook_answer(proj: Project, command: str) -> dict[str, Any]:
    """What the installed hook answers for a plan-mode Bash call of ``command``."""
    payload = {
        "session_id": "0b7c6f2e-0000-4000-8000-000000000002",
        "transcript_path": str(proj.base / "transcript.jsonl"),
        "cwd": str(proj.root),
        "prompt_id": "p-1",
        "permission_mode": "plan",
        "effort": "medium",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "attack"},
        "tool_use_id": "toolu_01WALL",
    }
    proc = subprocess.run(
        as_user(proj.user, ["/bin/sh", "-c", install_hook(proj)]),
        input=json.dumps(payload), cwd=proj.root, env={**proj.env, "GUARD_AGENT": "plan"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)["hookSpecificOutput"]
    return out


def door_argv(proj: Project, door: str, command: str) -> list[str]:
    """The argv a host runs for ``command`` behind ``door``, as the project's user."""
    if door == "hook":
        answer = hook_answer(proj, command)
        assert answer["permissionDecision"] == "allow", answer
        rewritten = answer["updatedInput"]["command"]
        assert "run_confined.py" in rewritten and "--namespaces" in rewritten, rewritten
        return as_user(proj.user, ["bash", "-c", rewritten])
    return as_user(proj.user, guard_argv("run", "-q", "--", "bash", "-c", command,
                                         switches=proj.switches))


def confined(
    proj: Project, door: str, command: str, *, timeout: float = 120, **kw: Any
) -> subprocess.CompletedProcess[str]:
    kw.setdefault("capture_output", True)
    return subprocess.run(
        door_argv(proj, door, command), cwd=proj.root, env=proj.env, text=True,
        timeout=timeout, **kw,
    )  # fmt: skip


def bare(proj: Project, command: str) -> subprocess.CompletedProcess[str]:
    """The same command with no guard at all (the control: the attack is real)."""
    return subprocess.run(
        as_user(proj.user, ["bash", "-c", command]), cwd=proj.root, env=proj.env, text=True,
        capture_output=True, timeout=120,
    )  # fmt: skip


def py(source: str) -> str:
    """A shell word running ``source`` with this interpreter (a program the analysis cannot
    prove read-only: it runs confined)."""
    import shlex

    return f"{shlex.quote(PYTHON)} -c {shlex.quote(source)}"


# -- daemons ------------------------------------------------------------------------


class SocketDaemon:
    """A local service that appends what a client sends to a file (the shape of a docker
    socket, an IDE's or an editor's server): on a pathname or an abstract Unix socket."""

    def __init__(self, address: str | bytes, target: Path, owner: int) -> None:
        self.address = address
        self.target = target
        self.connections = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        if isinstance(address, str):
            os.chmod(address, 0o600)
            os.chown(address, owner, owner)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while chunk := conn.recv(4096):
                        data += chunk
                except OSError:
                    pass
            with open(self.target, "ab") as f:
                f.write(data)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


class Recorder(http.server.ThreadingHTTPServer):
    """An HTTP service on 127.0.0.1 (of the host's network) that records each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _record(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                recorder.requests.append((self.command, self.path, self.rfile.read(n)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_POST = _record

            def log_message(self, format: str, *args: Any) -> None:
                return

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


def host_processes_with(marker: str) -> list[int]:
    """Pids (of the host's PID namespace) whose command line contains ``marker``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(entry))
        except OSError:
            continue
    return out


def run_project(user: str) -> Iterator[Project]:
    import shutil

    proj = make_project(user)
    try:
        yield proj
    finally:
        shutil.rmtree(proj.base, ignore_errors=True)
