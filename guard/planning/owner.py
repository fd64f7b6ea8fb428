"""The process that owns a session: who it is and whether it still runs.

Holds :class:`Owner` (pid, its start time, the boot and the host of the
process a session ends with) and the ``/proc`` readings behind it. It does not
hold the session itself (:mod:`guard.planning.session`) nor what follows from a
dead owner (orphaned sessions: :attr:`guard.planning.session.Session.decides`).
"""

from __future__ import annotations

import os
import socket

from pydantic import BaseModel, ConfigDict


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> int | None:
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


class Owner(BaseModel):
    """The process a session belongs to; the session ends with it."""

    model_config = ConfigDict(extra="forbid")

    pid: int
    started: int
    boot: str
    host: str
    command: str = ""

    @classmethod
    def this_process(cls, command: str) -> Owner:
        pid = os.getpid()
        return cls(
            pid=pid,
            started=_process_start(pid) or 0,
            boot=_boot_id(),
            host=socket.gethostname(),
            command=command,
        )

    def alive(self) -> bool:
        """True while the owning process runs (a reused pid does not count).

        An owner on another host cannot be checked from here: it counts as alive.
        """
        if self.host != socket.gethostname():
            return True
        if self.boot != _boot_id():
            return False
        if not os.path.exists("/proc/self/stat"):  # no procfs: the pid alone must do
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return _process_start(self.pid) == self.started

    def describe(self) -> str:
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        return f"{self.command or 'process'} (pid {self.pid}{where})"

