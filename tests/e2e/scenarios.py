"""Checks shared by the direct harness tests and the tests through moniker.

Each takes an initialized `mcp.ClientSession`, so the same check proves the plumbing against a
server directly (test_harness_direct.py) and then proves moniker (test_real_servers.py).

Names below are those of the pinned @modelcontextprotocol/server-everything (package.json).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

# server-everything (2026.8.31)
EVERYTHING_ECHO = "echo"  # {"message": str} -> "Echo: <message>"
EVERYTHING_SUM = "get-sum"  # {"a": number, "b": number}
EVERYTHING_LONG_RUNNING = "trigger-long-running-operation"  # {"duration": s, "steps": n}
EVERYTHING_SAMPLING = "trigger-sampling-request"  # {"prompt": str, "maxTokens": n}; listed only
# when the client (for moniker: moniker itself, towards the server) declares `sampling`
EVERYTHING_PROMPT = "simple-prompt"  # no arguments
EVERYTHING_PROMPT_TEXT = "This is a simple prompt without arguments."
EVERYTHING_ARGS_PROMPT = "args-prompt"  # {"city": str, "state"?: str} -> "What's weather in <city>?"
EVERYTHING_RESOURCE_NAME = "features.md"
EVERYTHING_RESOURCE_URI = "demo://resource/static/document/features.md"
EVERYTHING_RESOURCE_TEXT = "# Everything Server - Features"

# server-filesystem / server-memory
FILESYSTEM_READ = "read_text_file"  # {"path": str}
MEMORY_CREATE = "create_entities"  # {"entities": [{"name", "entityType", "observations"}]}
MEMORY_READ = "open_nodes"  # {"names": [str]}

# moniker-fixture without an inventory file
FIXTURE_ECHO = "echo"  # answers with its arguments as JSON text

# Tools each server must list, directly and through moniker (where fixture's echo is renamed).
EXPECTED_TOOLS = {
    "everything": {EVERYTHING_ECHO, EVERYTHING_SUM, EVERYTHING_LONG_RUNNING},
    "filesystem": {FILESYSTEM_READ, "write_file", "list_allowed_directories"},
    "memory": {MEMORY_CREATE, MEMORY_READ, "read_graph"},
    "fixture": {FIXTURE_ECHO},
}


def import_claude_desktop(moniker_bin: Path, home: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`moniker install claude-desktop --import`, as the person whose home is `home` (the
    client's file under `home/.config/Claude`), with no proxy set (a proxy keeps the network of
    a server known to reach only HTTPS on, not port 443 alone): it must succeed."""
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "RUST_LOG": "off"}
    for name in ("CLAUDE_CONFIG_DIR", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    done = subprocess.run(
        [str(moniker_bin), "install", "claude-desktop", "--import", "--command", str(moniker_bin)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


async def list_all_tools(session: ClientSession, max_pages: int = 50) -> list[types.Tool]:
    """tools/list, following nextCursor."""
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(max_pages):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools
    raise AssertionError(f"tools/list still had a nextCursor after {max_pages} pages")


def extras(model: Any) -> dict[str, Any]:
    """The fields a pydantic model of the SDK kept beyond the MCP schema (moniker's additions)."""
    return dict(model.model_extra or {})


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


def dump(result: Any) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def check_echo(session: ClientSession, tool: str = EVERYTHING_ECHO) -> None:
    result = await session.call_tool(tool, {"message": "over the wire"})
    assert not result.isError, dump(result)
    assert texts(result) == ["Echo: over the wire"], dump(result)


async def check_progress(session: ClientSession, tool: str = EVERYTHING_LONG_RUNNING) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await session.call_tool(tool, {"duration": 1, "steps": 4}, progress_callback=on_progress)
    assert not result.isError, dump(result)
    assert "Long running operation completed" in " ".join(texts(result)), dump(result)
    assert [p for p, _, _ in seen] == [1, 2, 3, 4], f"progress notifications seen: {seen}"
    assert all(total == 4 for _, total, _ in seen), f"progress notifications seen: {seen}"


class Sampler:
    """A sampling_callback for ClientSession that records the requests and answers them."""

    ANSWER = "sampled by the e2e client"

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.requests.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=self.ANSWER),
            model="e2e-fake-model",
            stopReason="endTurn",
        )


async def check_sampling(session: ClientSession, sampler: Sampler, tool: str = EVERYTHING_SAMPLING) -> None:
    result = await session.call_tool(tool, {"prompt": "say something", "maxTokens": 16})
    assert not result.isError, dump(result)
    assert len(sampler.requests) == 1, f"sampling requests seen by the client: {sampler.requests}"
    request = sampler.requests[0]
    asked = json.dumps(request.model_dump(mode="json"))
    assert "say something" in asked, asked
    assert request.maxTokens == 16, asked
    # The server puts the client's CreateMessageResult into its tool result.
    answer = " ".join(texts(result))
    assert Sampler.ANSWER in answer and "e2e-fake-model" in answer, dump(result)


async def check_resource(session: ClientSession) -> None:
    listed = await session.list_resources()
    matches = [
        r for r in listed.resources if r.name == EVERYTHING_RESOURCE_NAME or str(r.uri).endswith("/features.md")
    ]
    assert matches, f"{EVERYTHING_RESOURCE_NAME} not in resources/list: {[(r.name, str(r.uri)) for r in listed.resources]}"
    resource = matches[0]
    read = await session.read_resource(resource.uri)
    assert read.contents, dump(read)
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents), dump(read)
    assert content.text.startswith(EVERYTHING_RESOURCE_TEXT), content.text[:200]


async def check_prompts(session: ClientSession) -> None:
    listed = await session.list_prompts()
    names = [p.name for p in listed.prompts]
    assert EVERYTHING_PROMPT in names and EVERYTHING_ARGS_PROMPT in names, names
    simple = await session.get_prompt(EVERYTHING_PROMPT)
    assert [m.content.text for m in simple.messages] == [EVERYTHING_PROMPT_TEXT], dump(simple)
    with_args = await session.get_prompt(EVERYTHING_ARGS_PROMPT, {"city": "Lyon"})
    assert [m.content.text for m in with_args.messages] == ["What's weather in Lyon?"], dump(with_args)


async def check_memory_roundtrip(session: ClientSession, create_tool: str = MEMORY_CREATE) -> None:
    entity = {"name": "moniker_e2e", "entityType": "test", "observations": [f"created via {create_tool}"]}
    created = await session.call_tool(create_tool, {"entities": [entity]})
    assert not created.isError, dump(created)
    read = await session.call_tool(MEMORY_READ, {"names": ["moniker_e2e"]})
    assert not read.isError, dump(read)
    seen = json.dumps(dump(read))
    assert "moniker_e2e" in seen and f"created via {create_tool}" in seen, seen


@asynccontextmanager
async def bearer_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP session (official Python SDK, Streamable HTTP) sending `token`."""
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=15) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session
