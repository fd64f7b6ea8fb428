"""Confining a command, as guard's process sees it: the helper's argv, what this machine can do.

:func:`wrap_command` gives a host the shell text to run instead of a command (the
``allow_confined`` verdict), :func:`helper_argv` the argv that runs a command under
the confinement helper, :func:`available`, :func:`namespaces_unavailable` and
:func:`walls` what this machine can enforce; :func:`read_status` reads the helper's
status reports and :func:`remove_private_tmpdir` removes a command's private
``$TMPDIR`` once it is done. All of it runs in guard's process. The helper itself
(what runs between a launcher and the command) is not here: it is
:mod:`guard.sandbox.helper`, with its command line in :mod:`guard.sandbox.helper_args`.
"""

# Lazy imports: json, subprocess, shlex, shutil and guard.audit only when used (the hook
# path imports this module to confine a shell command).
from __future__ import annotations

import contextlib
import os
import sys

from guard.sandbox import landlock, namespaces, seccomp
from guard.sandbox.helper_dirs import remove_tree

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

#: The helper's entry point, run by path.
HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_confined.py")


def read_status(fd: int) -> list[dict[str, Any]]:
    """The helper's status reports (``--status-fd``: one JSON object a line), read from
    ``fd`` until it execs the command or exits. A line that is not a JSON object is
    skipped: a caller that then finds no confirmation of the restriction refuses to go on."""
    import json

    chunks = []
    while data := os.read(fd, 65536):
        chunks.append(data)
    out: list[dict[str, Any]] = []
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if isinstance(report, dict):
            out.append(report)
    return out


def remove_private_tmpdir(path: Path) -> bool:
    """Remove the private ``$TMPDIR`` a confined command ran with once it is done, whatever
    it left there (symlinks are removed, never followed); False when that failed (the
    caller says where it is)."""
    return remove_tree(str(path))


def available() -> str:
    """Why commands cannot be confined on this machine, or "" when they can."""
    if landlock.abi_version() < 1:
        return landlock.unavailable_reason() or "Landlock is not available"
    if not seccomp.supported():
        return f"guard has no seccomp syscall table for {seccomp.machine()}"
    return ""


_NAMESPACES: str | None = None
#: Seconds the namespace probe may take: it runs on the hook path, inside the host's timeout.
PROBE_TIMEOUT = 8.0
#: The walls' test switches (:func:`set_test_switches`). Never read from the environment:
#: a hook, hookd and ``guard run`` inherit theirs from whoever started them (an agent's
#: build-mode command can start hookd), so a seam there would let one command switch
#: the walls off for every later plan-mode command. Only a test-only entry point, a
#: Python caller inside the process, sets them (tests/switched.py).
NO_NAMESPACES = "no-namespaces"
#: Drops the process and IPC walls (seccomp: prlimit, signals and scheduling of other
#: processes) from the shell commands the hooks confine, so that a test can prove what the
#: layers above the kernel catch (tests/e2e/test_claude_code_missed.py).
NO_WALLS = "no-walls"
#: Makes ``guard mcp`` act as if the kernel had no Landlock (its analysis-only fallback).
NO_MCP_LANDLOCK = "no-mcp-landlock"
TEST_SWITCHES = (NO_NAMESPACES, NO_WALLS, NO_MCP_LANDLOCK)
_switches: frozenset[str] = frozenset()


def set_test_switches(*names: str) -> None:
    """Turn the named test switches on in this process (and off the others): namespaces
    treated as unavailable (the Landlock-only fallback), the walls off. For tests only;
    said loudly wherever they act, and a policy's ``require`` still refuses them."""
    global _switches
    unknown = [n for n in names if n not in TEST_SWITCHES]
    if unknown:
        raise ValueError(f"unknown test switch {unknown[0]!r} (known: {', '.join(TEST_SWITCHES)})")
    _switches = frozenset(names)


def test_switches() -> list[str]:
    """The test switches on in this process, in :data:`TEST_SWITCHES` order."""
    return [n for n in TEST_SWITCHES if n in _switches]


def walls_off() -> str:
    """Why the seccomp walls around other processes and Unix sockets are off for the
    commands the hooks confine ("" when they are on). Said wherever the hook's confinement
    is described (the hook's reason, ``guard doctor``), and a policy's ``require``
    refuses to run commands without them."""
    if NO_WALLS in _switches:
        return (
            "the process and local-IPC walls are off (a test entry point switched them off):"
            " a confined command can lower other processes' limits and create Unix sockets"
        )
    return ""


def single_threaded() -> bool:
    """Whether this process runs one thread only, so that it may fork and go on in Python
    in the child (a lock another thread held at the fork would stay held there)."""
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


_EARLY: namespaces.Probe | None = None


def probe_early() -> None:
    """Start this process's namespace probe now, in a child forked at once, to be read by
    :func:`namespaces_unavailable` later (``guard run`` loads its policy meanwhile).
    Nothing happens in a process with threads, or once the probe has run."""
    global _EARLY
    if (_EARLY is None and _NAMESPACES is None and NO_NAMESPACES not in _switches
            and single_threaded()):
        try:
            _EARLY = namespaces.Probe()
        except OSError:
            _EARLY = None  # probed again, and said, when it is asked for


def reap_early() -> None:
    """Read (and reap) an early probe nobody asked for (a build-mode run)."""
    if _EARLY is not None:
        namespaces_unavailable()


def namespaces_unavailable() -> str:
    """Why confined commands cannot run in namespaces here ("" when they can): the helper's
    own probe (the same calls, in a throwaway child), run once per process. A
    single-threaded process forks the child itself (``guard run``: no interpreter to
    start); any other runs the helper's ``--probe``."""
    global _NAMESPACES
    if NO_NAMESPACES in _switches:
        return "namespaces are treated as unavailable (a test entry point switched them off)"
    global _EARLY
    early, _EARLY = _EARLY, None
    if _NAMESPACES is None and (early is not None or single_threaded()):
        try:
            _NAMESPACES = (early or namespaces.Probe()).result()
        except OSError as exc:
            _NAMESPACES = f"the namespace probe could not run: {exc}"
    if _NAMESPACES is None:
        import subprocess

        try:
            proc = subprocess.run(
                [sys.executable, "-E", "-s", "-S", HELPER, "--probe"],
                capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False,
            )  # fmt: skip
            out = proc.stdout.strip() or proc.stderr.strip()
            _NAMESPACES = "" if proc.returncode == 0 else (out or f"probe exited {proc.returncode}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            _NAMESPACES = f"the namespace probe could not run: {exc}"
    return _NAMESPACES


def walls(require: Sequence[str] = ()) -> tuple[bool, str, list[str]]:
    """(namespaces?, why not, the required walls missing) for a confined command here:
    without namespaces the network, local IPC (the IPC namespace), processes (the PID
    namespace) and metadata (the read-only view) walls are missing."""
    why = namespaces_unavailable()
    missing = [w for w in require if w in namespaces.WALLS] if why else []
    return not why, why, missing


FALLBACK = (
    "Landlock-only fallback: no namespaces here ({why}); the command can reach the network"
    " and local services over TCP, see other processes, and change permission bits and"
    " timestamps (another terminal's too); Unix sockets are refused, those the policy lists"
    " included"
)


#: guard's state under its data directory, made before a command is confined so that none
#: can appear later in a view that did not cover it (the audit logs and key, sessions,
#: bindings, the missed-call store, the syslog spool, hookd's run directory, caches).
STATE_DIRS = ("audit", "keys", "sessions", "bindings", "missed", "spool", "run", "cache",
              "monitor", "quarantine")
#: The one part of the data directory a confined command sees: the plan files of
#: projects outside version control (the global fallback).
VISIBLE = "plans"


def hidden_state(worktree: str | None = None) -> list[str]:
    """What a confined command must not see: every entry of guard's data directory but
    :data:`VISIBLE` (its :data:`STATE_DIRS` and the audit key made first), and the
    sessions of ``worktree`` (``<worktree>/.openoxide/sessions``). Covered, nothing there
    can be read or locked from inside: no lock a hook waits on is the command's to hold."""
    from guard.audit import AuditError, chain
    from guard.paths import data_dir

    data = data_dir()
    with contextlib.suppress(OSError):  # what cannot be made here no writer can make either
        data.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name in STATE_DIRS:
            (data / name).mkdir(exist_ok=True, mode=0o700)
    with contextlib.suppress(AuditError, OSError):
        chain.load_key_path()  # the key itself, so that its directory holds it
    out: list[str] = []
    with contextlib.suppress(OSError):
        out += sorted(str(data / n) for n in os.listdir(data) if n != VISIBLE)
    if worktree:
        sessions = os.path.join(worktree, ".openoxide", "sessions")
        if os.path.isdir(sessions):
            out.append(sessions)
    return out


def helper_argv(
    command: Sequence[str],
    *,
    plans: Sequence[str] = (),
    writable: Sequence[str] = (),
    ioctl: Sequence[str] = (),
    devices: bool = True,
    tmpdir: str | None = None,
    private_tmp: bool = False,
    isolate: bool = False,
    walls: bool | None = None,
    sockets: Sequence[str] = (),
    python: str | None = None,
    extra: Sequence[str] = (),
    hide: Sequence[str] | None = None,
) -> list[str]:
    """The argv that runs ``command`` under this helper. ``isolate``: in namespaces;
    ``walls`` (default: ``isolate``): the process and IPC walls of seccomp and Landlock;
    ``sockets``: pathname Unix sockets the command may reach; ``hide``: paths covered in
    the namespaces' view (default: guard's data directory but its plans,
    :func:`hidden_state`, so that the command can neither read guard's state nor hold a
    lock guard waits on)."""
    argv = [python or sys.executable, "-E", "-s", "-S", HELPER]
    for h in hidden_state() if hide is None else hide:
        argv += ["--hide", h]
    for p in plans:
        argv += ["--plans", p]
    for w in writable:
        argv += ["--write", w]
    for d in ioctl:
        argv += ["--ioctl", d]
    for s in sockets:
        argv += ["--socket", s]
    if devices:
        argv.append("--devices")
    if tmpdir is not None:
        argv += ["--tmpdir", tmpdir]
    elif private_tmp:
        argv.append("--private-tmp")
    if isolate:
        argv.append("--namespaces")
    if isolate if walls is None else walls:
        argv.append("--walls")
    return [*argv, *extra, "--", *command]


def wrap_command(
    command: str,
    *,
    writable: Sequence[str] = (),
    cwd: str,
    plans: Sequence[str] = (),
    tmpdir: str | None = None,
    shell: Sequence[str] = (),
    python: str | None = None,
    isolate: bool = True,
    sockets: Sequence[str] = (),
    egress: Sequence[str] = (),
    worktree: str | None = None,
) -> str:
    """The shell text a host runs instead of ``command`` so that it runs confined.

    ``plans``: plan directories (regular files only); ``writable``: other
    directories that stay writable (absolute, or relative to ``cwd``). A private
    temporary directory (fresh for each command and removed after it, unless
    ``tmpdir`` names one), ``/dev/null`` and the terminal are writable too.
    ``isolate``: in namespaces with the process and IPC walls (False: the
    Landlock-only fallback, with the walls). ``sockets``: pathname Unix sockets the
    command may reach. ``egress``: the egress proxy's flag (``EgressSpec.to_argv()``):
    the helper serves it for the command, which gets the proxy variables (namespaces
    only). ``worktree``: the worktree whose sessions are hidden too (with guard's data
    directory, :func:`hidden_state`). ``shell``: the argv prefix that runs the text (default:
    ``bash -c``). The inner shell receives exactly ``command`` as one argument;
    every word is single-quoted. Raises ValueError for a command the kernel cannot
    pass on (a NUL character).
    """
    import shlex
    import shutil

    if "\0" in command:
        raise ValueError("the command contains a NUL character; no program can receive it")
    if not shell:
        shell = (shutil.which("bash") or "/bin/bash", "-c")
    argv = confine_argv(
        [*shell, command], writable=writable, cwd=cwd, plans=plans, tmpdir=tmpdir,
        python=python, isolate=isolate, sockets=sockets, egress=egress, worktree=worktree,
    )  # fmt: skip
    return " ".join(shlex.quote(a) for a in argv)


def confine_argv(
    command: Sequence[str],
    *,
    writable: Sequence[str] = (),
    cwd: str,
    plans: Sequence[str] = (),
    tmpdir: str | None = None,
    python: str | None = None,
    isolate: bool = True,
    sockets: Sequence[str] = (),
    egress: Sequence[str] = (),
    worktree: str | None = None,
) -> list[str]:
    """The helper argv that runs ``command`` (an argv) as :func:`wrap_command` runs a
    shell text: the confinement of the hooks' ``allow_confined`` rewrite, and of
    ``guard confine`` (guard's data directory and ``worktree``'s sessions hidden)."""
    return helper_argv(
        list(command), plans=[os.path.join(cwd, p) for p in plans],
        writable=[os.path.join(cwd, w) for w in writable], tmpdir=tmpdir,
        private_tmp=tmpdir is None, isolate=isolate, walls=not walls_off(),
        sockets=sockets, python=python, hide=hidden_state(worktree),
        extra=egress if isolate else (),
    )  # fmt: skip
