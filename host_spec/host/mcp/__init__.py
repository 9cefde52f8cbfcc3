"""Room ``mcp``: the MCP client plugin (servers from a profile, their tools in every member\x27s scope)."""
