"""The effects of an MCP ``tools/call``: what the policy decides on.

The tool-call interception layer owns the dialects; the proxy asks its MCP
dialect (:func:`guard.analysis.effects_for` with ``"mcp"``), which knows the
tool vocabulary of the reference filesystem server
(``@modelcontextprotocol/server-filesystem``). A tool it does not know yields
only ``Effect.tool(...)``: the agent's tool table decides it (the shipped
plan agent denies unknown tools). Malformed arguments raise
:class:`guard.analysis.ToolInputError`, which the proxy turns into a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from guard.analysis import effects_for
from guard.effects import Effect

#: (tool name, arguments, cwd) -> effects; the first effect is the tool itself.
EffectsFn = Callable[[str, Mapping[str, Any], str], list[Effect]]

DIALECT = "mcp"


def mcp_effects(name: str, arguments: Mapping[str, Any], cwd: str) -> list[Effect]:
    """The effects of calling MCP tool ``name`` with ``arguments`` from ``cwd``."""
    return effects_for(DIALECT, name, arguments, cwd)
