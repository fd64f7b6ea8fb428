"""How the MCP server process is started in a mode: under the kernel's confinement for a
plan-mode agent, plainly otherwise.

``guard mcp`` checks every ``tools/call`` against the policy, but the analysis of
a tool call is not the last line: a server may write where its tool's name and
arguments do not say (a tool guard believes reads, a server with a bug, a
hostile server). So while the proxy's agent is a plan-mode agent, the server
process itself runs under the confinement helper of :mod:`guard.sandbox.helper`,
with the rules ``guard run`` gives that agent (:func:`guard.sandbox.roots.derive`):
Landlock lets it write only to the plan directory (regular files), a private
``$TMPDIR``, ``/dev/null`` and the terminal, plus the policy's
``[agents.NAME.sandbox] writable`` directories; every capability is dropped; the
seccomp filter refuses system-state syscalls. A write the analysis let through
fails in the server with ``EACCES`` and nothing changes on disk.

The confinement is the helper's whole: namespaces (a read-only view but for the
writable roots, loopback-only network, its own PID and IPC namespaces), then
Landlock, no capabilities and seccomp. Where the kernel cannot make namespaces,
the server runs under the Landlock-only fallback, said on stderr and as a
``notice`` record (``server_fallback``), unless the policy requires a wall
(``[agents.NAME.sandbox] require``): then it is not started.

Where the kernel cannot confine at all (no Landlock, an architecture without a
seccomp table), plan mode falls back to the policy's analysis alone, and says
so on stderr and as a ``notice`` record in the audit log each time plan mode
starts the server. ``$GUARD_TEST_MCP_NO_LANDLOCK`` (a non-empty value) makes the
proxy act as if Landlock were missing: a seam for the tests of that fallback,
reported the same loud way.

This module holds the command and environment of one start (:class:`Launch`), the
confined server's egress channel (:class:`Egress`) and the choice between them
(:class:`Launcher`). It does not run, read or restart the process: that is
:mod:`guard.mcp.server`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.audit import logfile
from guard.effects import GuardError
from guard.fleet.records import stamp
from guard.fleet.syslog import ship
from guard.planning.session import Mode
from guard.sandbox import egress_proxy as egress
from guard.sandbox import roots, supervise
from guard.sandbox.confine import (
    NO_MCP_LANDLOCK,
    available,
    remove_private_tmpdir,
    test_switches,
)
from guard.sandbox.namespaces import receive_fd

if TYPE_CHECKING:
    from guard.decide import Guard

@dataclass(frozen=True, slots=True)
class Launch:
    """How one server process is started."""

    argv: list[str]
    env: dict[str, str] | None
    confined: bool
    tmpdir: Path | None = None
    roots: tuple[str, ...] = ()
    #: in namespaces: guard's egress proxy for the server, and the descriptor pair its
    #: listener comes over (ours, and the one the helper inherits)
    egress: Egress | None = None

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self.egress.child_fd,) if self.egress is not None else ()


class Egress:
    """The confined server's way out: a listener its namespace's pid 1 makes on
    127.0.0.1 and sends over a socket pair, served by guard's egress proxy here."""

    def __init__(self, agent: str, cwd: str, policy: str | None) -> None:
        self.port = egress.PROXY_PORT
        self.env = egress.proxy_env(self.port)
        self.proxy = egress.EgressProxy(egress.EgressSpec(agent, cwd, policy, "mcp"))
        self.channel, self.child = socket.socketpair()

    @property
    def child_fd(self) -> int:
        return self.child.fileno()

    def started(self) -> None:
        """The helper has the child end: close ours of it."""
        self.child.close()

    def serve(self) -> bool:
        """Receive the listener (sent before the helper reported its restriction) and serve
        it; False when none came."""
        fd = receive_fd(self.channel.fileno())
        self.channel.close()
        if fd is None:
            return False
        self.proxy.serve(socket.socket(fileno=fd))
        return True

    def close(self) -> None:
        self.child.close()
        self.channel.close()
        self.proxy.close()


class Launcher:
    """The command that starts the server in a mode: under the helper for a plan-mode agent."""

    def __init__(
        self,
        guard: Guard,
        server_cmd: list[str],
        *,
        agent: str | None,
        session_id: str,
        cwd: str,
        log: Callable[[str], None],
    ) -> None:
        self.guard = guard
        self.server_cmd = list(server_cmd)
        self.agent = agent
        self.session_id = session_id
        self.cwd = cwd
        self.log = log
        self._unavailable: str | None = None

    def agent_for(self, mode: Mode) -> str | None:
        if self.agent is not None:
            return self.agent
        return self.guard.plan_agent_name if mode is Mode.PLAN else self.guard.build_agent_name

    def wants_confinement(self, mode: Mode) -> bool:
        """Whether the agent in force in ``mode`` is a plan-mode agent."""
        agent = self.agent_for(mode)
        return agent is not None and self.guard.agent(agent).mode == "plan"

    def unavailable(self) -> str:
        """Why the kernel cannot confine the server here ("" when it can); probed once."""
        if self._unavailable is None:
            if NO_MCP_LANDLOCK in test_switches():
                self._unavailable = (
                    "Landlock is treated as unavailable (a test entry point switched it off)"
                )
            else:
                self._unavailable = available()
        return self._unavailable

    def confines(self, mode: Mode) -> bool:
        """Whether the server runs confined in ``mode``."""
        return self.wants_confinement(mode) and not self.unavailable()

    def launch(self, mode: Mode, status_fd: int) -> Launch:
        """How to start the server in ``mode``. Raises GuardError (nothing started)."""
        if not self.wants_confinement(mode):
            return Launch(list(self.server_cmd), None, False)
        agent = self.agent_for(mode)
        assert agent is not None
        why = self.unavailable()
        required = self.guard.agent(agent).sandbox.require
        if why and required:
            raise GuardError(
                f"the policy requires the {', '.join(required)} wall(s) for agent {agent!r}"
                f" ([agents.{agent}.sandbox] require), and the kernel cannot confine here: {why}"
            )
        if why:
            self.fallback(agent, why)
            return Launch(list(self.server_cmd), None, False)

        plan = roots.derive(self.guard, agent, private_tmp=True, create=True)
        try:
            isolate = supervise.isolation(plan, lambda msg, force=False: self.weaker(agent, msg))
        except GuardError:
            remove_tmpdir(plan.tmpdir, self.log)
            raise
        policy = roots.policy_of(self.guard)
        egress = Egress(agent, os.path.abspath(self.cwd), policy) if isolate else None
        argv = supervise.helper_command(
            plan, self.server_cmd, status_fd=status_fd, abi=None, isolate=isolate, walls=True,
            listen=(egress.port, egress.child_fd) if egress else None,
        )
        sandbox = "namespaces+landlock" if isolate else "landlock"
        env = {**os.environ, **plan.env, **(egress.env if egress else {}),
               "GUARD_SANDBOX": sandbox}  # fmt: skip
        return Launch(argv, env, True, plan.tmpdir, tuple(plan.describe()), egress)

    def weaker(self, agent: str, message: str) -> None:
        """Plan mode confined without namespaces (the Landlock-only fallback): loud on
        stderr and in the audit log, like the unconfined fallback."""
        self.log(f"WARNING: the MCP server runs in the {message}")
        self.notice("server_fallback", agent, message)

    def fallback(self, agent: str, why: str) -> None:
        """Plan mode without kernel confinement: loud on stderr and in the audit log."""
        message = (
            f"the MCP server runs UNCONFINED in plan mode: {why}. Only guard's analysis of"
            " each tools/call stands between the agent and the disk; a write the analysis"
            " misses (a tool that writes where its name and arguments do not say) is not"
            " stopped. Use a Linux kernel with Landlock for kernel confinement"
        )
        bar = "!" * 72
        self.log(bar)
        self.log(f"WARNING: {message}")
        self.log(bar)
        self.notice("server_unconfined", agent, message)

    def notice(self, event: str, agent: str | None, message: str) -> None:
        """A ``notice`` record in the project's audit log (never silent: stderr on failure)."""
        record: dict[str, Any] = {
            "type": "notice",
            "source": "mcp",
            "event": event,
            "session": self.session_id,
            "agent": agent,
            "cwd": self.cwd,
            "message": message,
        }
        try:
            stamp(record, self.guard, session=self.session_id)
            logfile.append(record, roots=self.guard.roots)
            ship(self.guard.audit_settings, [record], self.guard.roots.data)  # never waits
        except Exception as exc:
            self.log(f"cannot write the audit log: {exc}")


def remove_tmpdir(tmp: Path | None, log: Callable[[str], None]) -> None:
    """Remove a confined server's private TMPDIR; say so on ``log`` when it is kept."""
    if tmp is not None and not remove_private_tmpdir(tmp):
        log(f"the server's scratch files are kept in {tmp} (its TMPDIR); remove it when done")
