"""Gateway tools: tools toolwire runs itself (Responses ``mcp`` tools, web search, web fetch), as opposed to the
client's own tools, which toolwire only teaches, parses and hands back (docs/gateway-tools.md)."""
