"""Cursor: the host record; its parts are the modules beside this one."""

from guard.hosts.interface import Host

HOST = Host(
    name="cursor",
    title="Cursor",
    version="1.7",  # its documented agent hooks (hooks.json version 1); no Cursor runs here
    dialect="claude-code",  # shell and reads; MCP calls use the mcp dialect
    protected=("/.cursor/hooks.json", "{home}/.cursor/hooks.json"),
    hook_files=(".cursor/hooks.json",),
    parts=frozenset({"hook"}),
)
