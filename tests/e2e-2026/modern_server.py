"""A 2026-07-28-only MCP server, built on the official Python SDK (`mcp` 2.3.0, MCPServer).

The "modern server" moniker's end-to-end tests put behind the gateway:

    python modern_server.py stdio          # stdio transport
    python modern_server.py http PORT      # Streamable HTTP, stateless, JSON responses,
                                           # http://127.0.0.1:PORT/mcp

Modern only: the SDK serves both eras on one server and has no switch to turn the handshake era
off, so a `ServerMiddleware` (the SDK's documented veto point for `initialize`) refuses
`initialize`, and every request that is not on the 2026-07-28 per-request envelope, with
UNSUPPORTED_PROTOCOL_VERSION (-32022) naming the supported versions (["2026-07-28"]): the answer a
2026 server gives to a legacy handshake, which an `auto` client reads as "modern only". Handshake-
era notifications are dropped.

Tools: modern_echo, modern_add, modern_grow (adds modern_grown and says the tool list changed), modern_touch (says
modern://hello was updated), modern_region (its `region` argument carries
`x-mcp-header: Region`, so 2026 HTTP clients mirror it into an `Mcp-Param-Region` header; the tool
reports the header it saw), modern_ask (elicitation the 2026 way: an InputRequiredResult, through
the SDK's `Resolve`/`Elicit` resolvers). Prompt: modern_prompt. Resource: modern://hello.
Tools answer plain text content (no outputSchema / structuredContent).

MODERN_SERVER_STATE_KEY (optional, >= 32 chars): the key sealing modern_ask's requestState, for
replicas that must accept each other's rounds; without it each process has its own key.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    RequestStateSecurity,
    Resolve,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field


async def modern_only(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    """Refuse the handshake era: `initialize`, and anything not on a 2026-07-28 envelope."""
    if ctx.method == "initialize" or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        if ctx.request_id is None:
            return None  # a handshake-era notification (notifications/initialized, ...): dropped
        requested = (ctx.params or {}).get("protocolVersion") if ctx.method == "initialize" else None
        raise MCPError(
            code=UNSUPPORTED_PROTOCOL_VERSION,
            message="this server speaks only the 2026-07-28 protocol (server/discover, per-request _meta); "
            "the initialize handshake is not accepted",
            data={
                "supported": list(MODERN_PROTOCOL_VERSIONS),
                "requested": requested if isinstance(requested, str) else ctx.protocol_version,
            },
        )
    return await call_next(ctx)


# modern_ask's requestState is sealed (AES-GCM) with a per-process key by default, so its second
# round must reach the same process. Replicas behind one gateway share a key through this
# variable (at least 32 characters).
_state_key = os.environ.get("MODERN_SERVER_STATE_KEY")

mcp = MCPServer(
    "moniker-modern-server",
    version="1.0.0",
    instructions="A 2026-07-28-only test server for moniker.",
    middleware=[modern_only],
    request_state_security=RequestStateSecurity(keys=[_state_key]) if _state_key else None,
    # MODERN_SERVER_LIST_TTL_MS: how long its tool and prompt lists may be cached (default: 0).
    cache_hints={
        m: CacheHint(ttl_ms=int(os.environ.get("MODERN_SERVER_LIST_TTL_MS", "0")))
        for m in ("tools/list", "prompts/list")
    },
    log_level="WARNING",
)


@mcp.tool(structured_output=False)  # plain text content, no outputSchema
def modern_echo(text: str) -> str:
    """Echo the text back, prefixed with 'modern:'."""
    return f"modern:{text}"


def modern_grown() -> str:
    """A tool that exists once modern_grow was called."""
    return "grown"


@mcp.tool(structured_output=False)
async def modern_grow(ctx: Context) -> str:
    """Add the tool modern_grown, and tell the listeners that the tool list changed."""
    if "modern_grown" not in {t.name for t in mcp._tool_manager.list_tools()}:
        mcp.add_tool(modern_grown, structured_output=False)
    await ctx.notify_tools_changed()
    return "grew"


@mcp.tool(structured_output=False)
async def modern_touch(ctx: Context) -> str:
    """Say that the resource modern://hello was updated (to its listeners that follow it)."""
    await ctx.notify_resource_updated("modern://hello")
    return "touched"


@mcp.tool(structured_output=False)
def modern_add(a: int, b: int) -> str:
    """Add two integers; the sum as text."""
    return str(a + b)


@mcp.tool(structured_output=False)
def modern_region(
    region: Annotated[str, Field(description="A region; mirrored into Mcp-Param-Region", json_schema_extra={"x-mcp-header": "Region"})],
    item: str,
    ctx: Context,
) -> str:
    """Return, as JSON, the item, the region argument and the Mcp-Param-Region header the request came with."""
    request = ctx.request_context.request  # the Starlette Request over HTTP; None over stdio
    headers = getattr(request, "headers", None)
    raw = headers.get("mcp-param-region") if headers is not None else None
    return json.dumps(
        {
            "item": item,
            "region": region,
            "header": decode_header_value(raw),  # =?base64?...?= decoded (non-ASCII values)
            "header_raw": raw,
            "protocol_version": ctx.request_context.protocol_version,
        },
        ensure_ascii=False,
    )


class Answer(BaseModel):
    answer: str = Field(description="Your answer")


def ask_the_user(question: str) -> Elicit[Answer]:
    """Resolver: at 2026-07-28 the SDK turns this into an InputRequiredResult (MRTR)."""
    return Elicit(question, Answer)


@mcp.tool(structured_output=False)
def modern_ask(
    question: str,
    answer: Annotated[ElicitationResult[Answer], Resolve(ask_the_user)],
) -> str:
    """Ask the user the question (elicitation via an input-required result) and return the answer."""
    if isinstance(answer, AcceptedElicitation):
        return f"answer:{answer.data.answer}"
    return f"no answer ({answer.action})"


@mcp.prompt()
def modern_prompt(topic: str = "gateways") -> str:
    """A one-message prompt about a topic."""
    return f"Tell me about {topic}, the modern way."


@mcp.resource("modern://hello", mime_type="text/plain")
def modern_hello() -> str:
    """A static text resource."""
    return "hello from modern"


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[1] == "stdio":
        mcp.run("stdio")
    elif len(argv) == 3 and argv[1] == "http":
        mcp.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(argv[2]),
            streamable_http_path="/mcp",
            json_response=True,
            stateless_http=True,
        )
    else:
        sys.exit("usage: modern_server.py stdio | modern_server.py http PORT")


if __name__ == "__main__":
    main(sys.argv)
