"""Model Context Protocol, both ways: ``app.mcp.client`` connects to MCP servers (a service the
tools use), ``app.mcp.server`` serves our tools to any MCP client (an application,
``python -m app.mcp.server``). The ``mcp`` SDK costs about a second to import, so nothing here
imports it until a connection is made or the server starts."""
