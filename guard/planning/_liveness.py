"""Whether a session's owning process still runs, read from ``/proc`` (no model).

Holds the readings behind :class:`guard.planning.owner.Owner` (its boot, its start
time) and :func:`process_alive`, :func:`describe_process`, so that the session model
and the plain session reader (:mod:`guard.planning.session_file`) judge an owner alike.
"""

from __future__ import annotations

import os
import socket


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), None when it does not run."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        state, start = fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None
    return None if state in (b"Z", b"X") else start


def process_alive(pid: int, started: int, boot: str, host: str) -> bool:
    """True while that process runs (a reused pid does not count).

    A process on another host cannot be checked from here: it counts as alive.
    """
    if host != socket.gethostname():
        return True
    if boot != boot_id():
        return False
    if not os.path.exists("/proc/self/stat"):  # no procfs: the pid alone must do
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return process_start(pid) == started


def describe_process(command: str, pid: int, host: str) -> str:
    where = "" if host == socket.gethostname() else f" on {host}"
    return f"{command or 'process'} (pid {pid}{where})"
