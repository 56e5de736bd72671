"""An upstream-style run_mcp_server.py: parse_args(), MCPServer().run(transport=...)."""

from app.mcp.server import MCPServer, parse_args

if __name__ == "__main__":
    args = parse_args()
    server = MCPServer()
    server.run(transport=args.transport)
