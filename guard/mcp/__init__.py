"""The MCP proxy: guard every tool call of any MCP client (``guard mcp -- SERVER…``)."""

from guard.mcp.proxy import MCP_REVISION, McpProxy, run_proxy

__all__ = ["MCP_REVISION", "McpProxy", "run_proxy"]
