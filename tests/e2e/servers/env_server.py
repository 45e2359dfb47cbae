"""An MCP server over stdio (the official Python SDK's FastMCP) that says what its environment
holds: for the tests of a server run once for each person (tests/e2e/test_person_signin.py).

    python env_server.py

Tool `whoami`: `token=<$SERVICE_TOKEN or none> pid=<its process id>`.
"""

import os

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("env-server", log_level="WARNING")


@mcp.tool(description="Which token this instance was started with, and its process id.")
def whoami() -> str:
    return f"token={os.environ.get('SERVICE_TOKEN', 'none')} pid={os.getpid()}"


if __name__ == "__main__":
    mcp.run()
