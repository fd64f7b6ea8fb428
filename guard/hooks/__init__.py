"""Host adapters: wire guard into agents people already run, through their hooks.

Each host of :mod:`guard.hosts` with hooks has its adapter in its ``hook`` part
(``guard/hosts/<host>/hook.py``), implementing
:class:`guard.hooks.adapter.HostAdapter`; :data:`HOSTS` is the one list of them. The
hook's entry point is ``python -I -m guard.hooks HOST``: it imports nothing
heavy before it has to (only the named host's module), and fails closed (exit 2) on
any error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guard import hosts
from guard.hooks.adapter import HookInputError

if TYPE_CHECKING:
    from guard.hooks.adapter import HostAdapter

#: Every host guard wires into, by the name used on the command line.
HOSTS: tuple[str, ...] = hosts.HOOKED

__all__ = ["HOSTS", "adapter_for"]


def adapter_for(host: str) -> HostAdapter:
    """The adapter of ``host``; raises HookInputError for a host guard does not know."""
    known = hosts.get(host)
    if known is not None and known.hooked:
        found: HostAdapter = known.part("hook").ADAPTER
        return found

    raise HookInputError(f"unknown host {host!r}; known: {', '.join(HOSTS)}")
