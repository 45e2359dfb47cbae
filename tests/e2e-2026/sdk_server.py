"""An MCP server as most people write one: the official Python SDK's MCPServer (`mcp` 2.3.0),
which serves both eras (the 2025 handshake and 2026-07-28's per-request envelope), and refuses
on a connection of one era what belongs to the other. No middleware, no leniency.

    python sdk_server.py stdio
    python sdk_server.py http PORT     # Streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: sdk_echo (text back), sdk_progress (reports `steps` progress notifications, then
answers), sdk_ask (asks the user through elicitation: a request in the 2025 era, an
input-required result in 2026-07-28, the SDK's own resolver either way). Prompt: sdk_prompt.
Resource: sdk://hello.
"""

from __future__ import annotations

import sys
from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from pydantic import BaseModel, Field

mcp = MCPServer("moniker-sdk-server", version="1.0.0", log_level="WARNING")


@mcp.tool(structured_output=False)
def sdk_echo(text: str) -> str:
    """Echo the text back, prefixed with 'sdk:'."""
    return f"sdk:{text}"


@mcp.tool(structured_output=False)
async def sdk_progress(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then answer."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done after {steps}"


class Answer(BaseModel):
    answer: str = Field(description="Your answer")


def ask_the_user(question: str) -> Elicit[Answer]:
    return Elicit(question, Answer)


@mcp.tool(structured_output=False)
def sdk_ask(
    question: str,
    answer: Annotated[ElicitationResult[Answer], Resolve(ask_the_user)],
) -> str:
    """Ask the user the question and return the answer."""
    if isinstance(answer, AcceptedElicitation):
        return f"answer:{answer.data.answer}"
    return f"no answer ({answer.action})"


@mcp.prompt()
def sdk_prompt(topic: str = "gateways") -> str:
    """A one-message prompt about a topic."""
    return f"Tell me about {topic}."


@mcp.resource("sdk://hello", mime_type="text/plain")
def sdk_hello() -> str:
    """A static text resource."""
    return "hello from the sdk"


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[1] == "stdio":
        mcp.run("stdio")
    elif len(argv) == 3 and argv[1] == "http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(argv[2]), streamable_http_path="/mcp")
    else:
        sys.exit("usage: sdk_server.py stdio | sdk_server.py http PORT")


if __name__ == "__main__":
    main(sys.argv)
