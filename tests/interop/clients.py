"""The client stacks, each driven as its users drive it, minus the model: list the tools, call one.

Each stack is an async context manager `open_<stack>(target)` yielding a `Client`:

- `list_tools()`: the names the stack got from moniker, through the stack's own listing (its
  tool objects where it makes them);
- `call(name, arguments)`: one call through the stack's own call path, its result reduced to the
  JSON value of its one text part (every tool called here answers JSON text).

None of them is given a model, an API key or anything outside loopback; conftest.py turns their
telemetry and tracing off before they are imported.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# Reads of one request; moniker's first listing spawns the fixture, a debug build is slow.
READ_TIMEOUT = 30.0


@dataclass
class Target:
    """Where the client finds moniker: a command it spawns (stdio) or a URL (Streamable HTTP)."""

    transport: str  # "stdio" | "http"
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    stderr_log: Path | None = None  # where a stdio client may put moniker's stderr


class Client(Protocol):
    async def list_tools(self) -> list[str]: ...

    async def call(self, name: str, arguments: dict[str, Any]) -> Any: ...


def value_of(text: str) -> Any:
    """A result's text as its JSON value; a text that is not JSON (a search's compact lines) as
    it is."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def only_text(texts: list[str], what: Any) -> Any:
    """The value of a result's single text part (see `value_of`)."""
    if len(texts) != 1:
        raise AssertionError(f"expected one text part, got {len(texts)}: {what!r}")
    return value_of(texts[0])


# --------------------------------------------------------------------------------------------
# LangChain: langchain-mcp-adapters
# --------------------------------------------------------------------------------------------


class LangChainClient:
    """`MultiServerMCPClient.get_tools()`: LangChain tools, each call in a session of its own."""

    def __init__(self, connection: dict[str, Any]):
        from langchain_mcp_adapters.client import MultiServerMCPClient

        self.connection = connection
        self.client = MultiServerMCPClient({"moniker": connection}, handle_tool_errors=False)
        self.tools: dict[str, Any] = {}

    async def list_tools(self) -> list[str]:
        tools = await self.client.get_tools()
        self.tools = {t.name: t for t in tools}
        return [t.name for t in tools]

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        tool = self.tools.get(name)
        if tool is None:
            # A name the listing does not show (an alias): the adapter's converter makes a
            # LangChain tool of it, as an app that knows the name would.
            import mcp.types
            from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool

            tool = convert_mcp_tool_to_langchain_tool(
                None,
                mcp.types.Tool(name=name, inputSchema={"type": "object"}),
                connection=self.connection,
                server_name="moniker",
                handle_tool_errors=False,
            )
        content = await tool.ainvoke(arguments)
        if isinstance(content, str):
            return value_of(content)
        texts = [block["text"] for block in content if isinstance(block, dict) and block.get("type") == "text"]
        return only_text(texts, content)


@asynccontextmanager
async def open_langchain(target: Target) -> AsyncIterator[Client]:
    if target.transport == "stdio":
        connection: dict[str, Any] = {
            "transport": "stdio",
            "command": target.command,
            "args": target.args,
            "env": target.env,
        }
    else:
        connection = {
            "transport": "streamable_http",
            "url": target.url,
            "timeout": READ_TIMEOUT,
            "sse_read_timeout": READ_TIMEOUT,
        }
    yield LangChainClient(connection)


# --------------------------------------------------------------------------------------------
# OpenAI Agents SDK: openai-agents
# --------------------------------------------------------------------------------------------


class AgentsClient:
    """`MCPServerStdio` / `MCPServerStreamableHttp`: the tools become the SDK's function tools
    (`MCPUtil.to_function_tool`, strict schemas as an agent asks for them), called through
    `on_invoke_tool` as the SDK's runner calls them."""

    def __init__(self, server: Any):
        self.server = server
        self.mcp_tools: dict[str, Any] = {}

    async def list_tools(self) -> list[str]:
        from agents.mcp import MCPUtil

        tools = await self.server.list_tools()
        self.mcp_tools = {t.name: t for t in tools}
        for tool in tools:  # each must convert, as an agent run converts them
            MCPUtil.to_function_tool(tool, self.server, convert_schemas_to_strict=True)
        return [t.name for t in tools]

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        import mcp.types
        from agents.mcp import MCPUtil
        from agents.tool_context import ToolContext

        tool = self.mcp_tools.get(name) or mcp.types.Tool(name=name, inputSchema={"type": "object"})
        function_tool = MCPUtil.to_function_tool(
            tool, self.server, convert_schemas_to_strict=True, failure_error_function=None
        )
        raw = json.dumps(arguments)
        context = ToolContext(context=None, tool_name=name, tool_call_id=f"call_{name}", tool_arguments=raw)
        output = await function_tool.on_invoke_tool(context, raw)
        if isinstance(output, str):
            return value_of(output)
        if isinstance(output, dict):
            return only_text([output["text"]] if output.get("type") == "text" else [], output)
        texts = [o["text"] for o in output if isinstance(o, dict) and o.get("type") == "text"]
        return only_text(texts, output)


@asynccontextmanager
async def open_openai_agents(target: Target) -> AsyncIterator[Client]:
    from agents import set_tracing_disabled
    from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

    set_tracing_disabled(True)
    if target.transport == "stdio":
        server = MCPServerStdio(
            params={"command": target.command, "args": target.args, "env": target.env},
            name="moniker",
            client_session_timeout_seconds=READ_TIMEOUT,
        )
    else:
        server = MCPServerStreamableHttp(
            params={"url": target.url, "timeout": READ_TIMEOUT, "sse_read_timeout": READ_TIMEOUT},
            name="moniker",
            client_session_timeout_seconds=READ_TIMEOUT,
        )
    async with server:
        yield AgentsClient(server)


# --------------------------------------------------------------------------------------------
# Pydantic AI: pydantic-ai-slim[mcp] (MCPToolset, on FastMCP's client)
# --------------------------------------------------------------------------------------------


class PydanticAIClient:
    def __init__(self, toolset: Any):
        self.toolset = toolset

    async def list_tools(self) -> list[str]:
        return [t.name for t in await self.toolset.list_tools()]

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        # What the agent's tool call does for a tool without an MCP App UI; the toolset maps the
        # result for the model: JSON text parsed, or the structured content when every part is text.
        result = await self.toolset.direct_call_tool(name, arguments)
        if isinstance(result, str):
            return value_of(result)
        if isinstance(result, list):
            return only_text([r for r in result if isinstance(r, str)], result)
        return result


@asynccontextmanager
async def open_pydantic_ai(target: Target) -> AsyncIterator[Client]:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    if target.transport == "stdio":
        source: Any = StdioTransport(
            command=target.command,
            args=target.args,
            env=target.env,
            keep_alive=False,  # the default keeps the process after the toolset closes
            log_file=target.stderr_log,
        )
    else:
        source = target.url  # the toolset builds a Streamable HTTP transport from a URL ending in /mcp
    toolset = MCPToolset(
        source,
        tool_error_behavior="error",
        init_timeout=READ_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        cache_tools=False,
    )
    async with toolset:
        yield PydanticAIClient(toolset)


# --------------------------------------------------------------------------------------------
# mcp-use
# --------------------------------------------------------------------------------------------


class McpUseClient:
    def __init__(self, session: Any):
        self.session = session

    async def list_tools(self) -> list[str]:
        return [t.name for t in await self.session.list_tools()]

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        from datetime import timedelta

        result = await self.session.call_tool(name, arguments, read_timeout_seconds=timedelta(seconds=READ_TIMEOUT))
        if result.isError:
            raise AssertionError(f"{name}: isError result: {result.content!r}")
        return only_text([c.text for c in result.content if c.type == "text"], result)


@asynccontextmanager
async def open_mcp_use(target: Target) -> AsyncIterator[Client]:
    from mcp_use.client.client import MCPClient

    if target.transport == "stdio":
        server: dict[str, Any] = {"command": target.command, "args": target.args, "env": target.env}
    else:
        server = {"url": target.url, "timeout": READ_TIMEOUT, "sse_read_timeout": READ_TIMEOUT}
    client = MCPClient({"mcpServers": {"moniker": server}})
    try:
        session = await client.create_session("moniker")
        if target.transport == "http":
            # mcp-use falls back to the old HTTP+SSE transport when Streamable HTTP fails: it must not.
            transport = getattr(session.connector, "transport_type", None)
            assert transport == "streamable HTTP", f"mcp-use connected over {transport!r}"
        yield McpUseClient(session)
    finally:
        await client.close_all_sessions()


OPENERS: dict[str, Callable[[Target], AbstractAsyncContextManager[Client]]] = {
    "langchain": open_langchain,
    "openai-agents": open_openai_agents,
    "pydantic-ai": open_pydantic_ai,
    "mcp-use": open_mcp_use,
}
