"""Host adapters: wire guard into agents people already run, through their hooks.

One module per host (``claude_code``, ``codex``, ``gemini``, ``cursor``, ``opencode``), each
implementing :class:`guard.integrations.interface.HostAdapter`. The hook's
entry point is ``python -I -m guard.integrations HOST``: it imports nothing
heavy before it has to, and fails closed (exit 2) on any error.
"""

from __future__ import annotations

HOSTS: dict[str, str] = {
    "claude-code": "guard.integrations.claude_code",
    "codex": "guard.integrations.codex",
    "gemini": "guard.integrations.gemini",
    "cursor": "guard.integrations.cursor",
    "opencode": "guard.integrations.opencode",
}

__all__ = ["HOSTS"]
