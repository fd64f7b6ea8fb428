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

import os
import sys
from typing import TYPE_CHECKING, Any

from guard.sandbox import landlock, namespaces, seccomp
from guard.sandbox.helper_dirs import remove_tree

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

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
#: Test seam: a non-empty value makes this process act as if namespaces were unavailable
#: (said as such, loudly, wherever the fallback is said). Used by the tests of the
#: Landlock-only fallback on machines where namespaces work; a user may set it to run the
#: fallback deliberately, and a policy's ``require`` still refuses it.
NO_NAMESPACES_ENV = "GUARD_TEST_NO_NAMESPACES"
#: Test seam: a non-empty value drops the process and IPC walls (seccomp: prlimit, signals
#: and scheduling of other processes) from the shell commands the hooks confine, so that a
#: test can prove what the layers above the kernel catch (tests/e2e/test_claude_code_missed.py).
NO_WALLS_ENV = "GUARD_TEST_NO_WALLS"


def walls_off() -> str:
    """Why the seccomp walls around other processes and Unix sockets are off for the
    commands the hooks confine ("" when they are on). Said wherever the hook's confinement
    is described (the hook's reason, ``guard doctor``), and a policy's ``require``
    refuses to run commands without them."""
    if os.environ.get(NO_WALLS_ENV):
        return (
            f"the process and local-IPC walls are off (${NO_WALLS_ENV} is set): a confined"
            " command can lower other processes' limits and create Unix sockets"
        )
    return ""


def namespaces_unavailable() -> str:
    """Why confined commands cannot run in namespaces here ("" when they can): the helper's
    own probe (``--probe``: the same calls, in a throwaway process), run once per process."""
    global _NAMESPACES
    if os.environ.get(NO_NAMESPACES_ENV):
        return f"namespaces are treated as unavailable (${NO_NAMESPACES_ENV} is set)"
    if _NAMESPACES is None:
        import subprocess

        try:
            proc = subprocess.run(
                [sys.executable, "-E", "-s", "-S", HELPER, "--probe"],
                capture_output=True, text=True, timeout=60, check=False,
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
    " and local services, see other processes, and change permission bits and timestamps"
)


def audit_key_dirs() -> list[str]:
    """The directory of this installation's audit key (the key made first when missing,
    so that it cannot appear later in a view that did not cover it); none when it
    cannot be made (then no writer can make it either)."""
    from guard.audit import AuditError, chain

    try:
        return [str(chain.load_key_path().parent)]
    except (AuditError, OSError):
        return []


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
    the namespaces' view (default: the directory of guard's audit key, made first, so
    that the command can never read the key that chains the audit log)."""
    argv = [python or sys.executable, "-E", "-s", "-S", HELPER]
    for h in audit_key_dirs() if hide is None else hide:
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
    only). ``shell``: the argv prefix that runs the text (default:
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
        python=python, isolate=isolate, sockets=sockets, egress=egress,
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
) -> list[str]:
    """The helper argv that runs ``command`` (an argv) as :func:`wrap_command` runs a
    shell text: the confinement of the hooks' ``allow_confined`` rewrite, and of
    ``guard confine``."""
    return helper_argv(
        list(command), plans=[os.path.join(cwd, p) for p in plans],
        writable=[os.path.join(cwd, w) for w in writable], tmpdir=tmpdir,
        private_tmp=tmpdir is None, isolate=isolate, walls=not walls_off(),
        sockets=sockets, python=python, extra=egress if isolate else (),
    )  # fmt: skip
