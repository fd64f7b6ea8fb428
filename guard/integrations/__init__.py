"""Host adapters: wire guard into agents people already run, through their hooks.

One module per host (``claude_code``, ``codex``, ``gemini``, ``cursor``,
``opencode``), each
implementing :class:`guard.integrations.interface.HostAdapter`; :data:`HOSTS`
is the one list of them. The hook's entry point is ``python -I -m
guard.integrations HOST``: it imports nothing heavy before it has to (only the
named host's module), and fails closed (exit 2) on any error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from guard.integrations.interface import HostAdapter

#: Every host guard wires into, by the name used on the command line.
HOSTS: tuple[str, ...] = ("claude-code", "codex", "gemini", "cursor", "opencode")

__all__ = ["HOSTS", "adapter_for"]


def adapter_for(host: str) -> HostAdapter:
    """The adapter of ``host``; raises HookInputError for a host guard does not know."""
    if host == "claude-code":
        from guard.integrations import claude_code

        return claude_code.ADAPTER
    if host == "codex":
        from guard.integrations import codex

        return codex.ADAPTER
    if host == "gemini":
        from guard.integrations import gemini

        return gemini.ADAPTER
    if host == "cursor":
        from guard.integrations import cursor

        return cursor.ADAPTER
    if host == "opencode":
        from guard.integrations import opencode

        return opencode.ADAPTER
    from guard.integrations.interface import HookInputError

    raise HookInputError(f"unknown host {host!r}; known: {', '.join(HOSTS)}")
