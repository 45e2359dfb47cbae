"""An MCP server over Streamable HTTP (the official Python SDK's FastMCP) that says which HTTP
headers each request brought it: for the tests of moniker's `forward` (tests/e2e/test_resource_server.py).

    python headers_server.py PORT      serves http://127.0.0.1:PORT/mcp

Tool `headers`: the request's headers as a JSON object (names in lower case). Every request's
headers are also written to stderr, one JSON line each (`HEADERS {...}`), as a server that logs
who called it would.
"""

import json
import sys

from mcp.server.fastmcp import Context, FastMCP

port = int(sys.argv[1])
mcp = FastMCP("headers-server", host="127.0.0.1", port=port, streamable_http_path="/mcp", log_level="WARNING")


@mcp.tool(description="The HTTP headers of this request, as a JSON object.")
def headers(ctx: Context) -> str:
    request = ctx.request_context.request
    seen = {name.lower(): value for name, value in request.headers.items()} if request is not None else {}
    print("HEADERS " + json.dumps(seen, sort_keys=True), file=sys.stderr, flush=True)
    return json.dumps(seen, sort_keys=True)


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
