"""The process that owns a session: who it is and whether it still runs.

Holds :class:`Owner` (pid, its start time, the boot and the host of the
process a session ends with); the ``/proc`` readings behind it are
:mod:`guard.planning._liveness`'s. It does not
hold the session itself (:mod:`guard.planning.session`) nor what follows from a
dead owner (orphaned sessions: :attr:`guard.planning.session.Session.decides`).
"""

from __future__ import annotations

import os
import socket

from pydantic import BaseModel, ConfigDict

from guard.planning._liveness import boot_id, describe_process, process_alive, process_start


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
            started=process_start(pid) or 0,
            boot=boot_id(),
            host=socket.gethostname(),
            command=command,
        )

    def alive(self) -> bool:
        """True while the owning process runs (a reused pid does not count).

        An owner on another host cannot be checked from here: it counts as alive.
        """
        return process_alive(self.pid, self.started, self.boot, self.host)

    def describe(self) -> str:
        return describe_process(self.command, self.pid, self.host)
