"""The same server as sdk_server.py, written with FastMCP 4 (`fastmcp` 4.2.3, on the official
Python SDK 2.x): the framework most Python MCP servers are built with.

    python fastmcp_server.py stdio
    python fastmcp_server.py http PORT     # Streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: sdk_echo, sdk_progress, sdk_ask (elicitation with `ctx.elicit`). Prompt: sdk_prompt.
Resource: sdk://hello.
"""

from __future__ import annotations

import sys

from fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

mcp = FastMCP("moniker-fastmcp-server")


@mcp.tool
def sdk_echo(text: str) -> str:
    """Echo the text back, prefixed with 'sdk:'."""
    return f"sdk:{text}"


@mcp.tool
async def sdk_progress(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then answer."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done after {steps}"


class Answer(BaseModel):
    answer: str = Field(description="Your answer")


@mcp.tool
async def sdk_ask(question: str, ctx: Context) -> str:
    """Ask the user the question and return the answer."""
    answer = await ctx.elicit(question, response_type=Answer)
    if answer.action == "accept":
        return f"answer:{answer.data.answer}"
    return f"no answer ({answer.action})"


@mcp.prompt
def sdk_prompt(topic: str = "gateways") -> str:
    """A one-message prompt about a topic."""
    return f"Tell me about {topic}."


@mcp.resource("sdk://hello", mime_type="text/plain")
def sdk_hello() -> str:
    """A static text resource."""
    return "hello from the sdk"


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[1] == "stdio":
        mcp.run("stdio", show_banner=False)
    elif len(argv) == 3 and argv[1] == "http":
        mcp.run("http", show_banner=False, host="127.0.0.1", port=int(argv[2]), path="/mcp")
    else:
        sys.exit("usage: fastmcp_server.py stdio | fastmcp_server.py http PORT")


if __name__ == "__main__":
    main(sys.argv)
