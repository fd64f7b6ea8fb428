"""The MCP proxy: guard every tool call of any MCP client (``guard mcp -- SERVER…``).

:mod:`guard.mcp.proxy` routes each message; :mod:`guard.mcp.jsonrpc` frames and
pumps them; :mod:`guard.mcp.wire` reads each line strictly and renders what is
forwarded; :mod:`guard.mcp.file_uris` reads file URIs and paths as servers do;
:mod:`guard.mcp.gate_side` is the MCP side of :mod:`guard.gate`;
:mod:`guard.mcp.bridge` answers guard's planning tools; :mod:`guard.mcp.asking`
puts questions to the user through elicitation.
"""
