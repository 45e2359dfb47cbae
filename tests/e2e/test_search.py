"""Search mode through the official Python SDK, in front of the real memory and filesystem
servers: the listing holds the pinned tool and moniker's `search_tools` and `call_tool`; a
search finds a tool by what it does; the found tool is called through `call_tool` by name and
by alias, exactly as a direct call; a toolset's boundary holds through both."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mcp.shared.exceptions import McpError

import scenarios as s
from conftest import GATEWAY_TOOLS


def search_config(server_specs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "servers": {k: server_specs[k] for k in ("filesystem", "memory")},
        "tools": {k: v for k, v in GATEWAY_TOOLS.items() if not k.startswith("fixture/")},
        "discovery": {"mode": "search", "pin": ["cat"]},
        "toolsets": {"files": {"tools": ["read_text_file", "list_directory"]}},
    }


async def found(session, query: str, **extra: Any) -> list[dict[str, Any]]:
    result = await session.call_tool("search_tools", {"query": query, **extra})
    assert not result.isError, result.content
    text = s.texts(result)[0]
    try:
        # A tool's exact name: its full definition, the same in the text.
        assert json.loads(text) == result.structuredContent
        return result.structuredContent["tools"]
    except ValueError:
        # Else a compact line each, `- name(parameters) [server]: what it does`; no schema.
        assert result.structuredContent is None and "inputSchema" not in text, s.dump(result)
        return [{"name": line[2:].split("(")[0]} for line in text.splitlines() if line.startswith("- ")]


async def test_search_then_call_the_found_tool(moniker, write_config, server_specs, fs_root: Path) -> None:
    config = write_config(search_config(server_specs))
    async with moniker(config) as session:
        listed = [t.name for t in (await session.list_tools()).tools]
        assert listed == ["read_text_file", "search_tools", "call_tool"]

        tools = await found(session, "add new people and things to the knowledge graph", limit=5)
        names = [t["name"] for t in tools]
        assert len(names) == 5 and "create_entities" in names, names
        # Its exact name gives its full definition: what calling the tool needs.
        [entities] = await found(session, "create_entities")
        assert "entities" in entities["inputSchema"]["properties"]
        assert "remember" in entities["aliases"]

        created = await session.call_tool(
            "call_tool",
            {"name": "remember", "arguments": {"entities": [{"name": "moniker", "entityType": "project", "observations": ["search works"]}]}},
        )
        assert not created.isError, created.content

        tools = await found(session, "read the entire graph")
        assert tools[0]["name"] == "read_graph", [t["name"] for t in tools]
        graph = await session.call_tool("call_tool", {"name": "read_graph"})
        assert not graph.isError and "search works" in s.texts(graph)[0], graph.content

        tagged = await found(session, "", tags=["memory"])
        assert [t["name"] for t in tagged] == ["create_entities"]


async def test_a_toolset_bounds_search_and_call_tool(mcp_session, moniker_bin: Path, write_config, server_specs, memory_file: Path) -> None:
    config = write_config(search_config(server_specs))
    args = ["serve", "-c", str(config), "--toolset", "files"]
    async with mcp_session(moniker_bin, args, env={"MEMORY_FILE_PATH": str(memory_file)}) as session:
        listed = [t.name for t in (await session.list_tools()).tools]
        assert listed == ["read_text_file", "search_tools", "call_tool"]
        names = [t["name"] for t in await found(session, "entities knowledge graph files directory", limit=50)]
        assert names and set(names) <= {"read_text_file", "list_directory"}, names
        try:
            await session.call_tool("call_tool", {"name": "create_entities", "arguments": {"entities": []}})
            raise AssertionError("a tool outside the toolset was called through call_tool")
        except McpError as e:
            assert e.error.code == -32004 and "create_entities" in e.error.message
        listing = await session.call_tool("call_tool", {"name": "list_directory", "arguments": {"path": "."}})
        assert listing.content, listing


def words(text: str) -> set[str]:
    """Lowercased words, a plural's `s` taken off."""
    return {w.removesuffix("s") for w in re.findall(r"[a-z0-9]+", text.lower())}


async def test_plain_words_find_a_tool_that_says_none_of_them(moniker, write_config, server_specs, fs_root: Path) -> None:
    """The semantic half of the ranking: a request that shares no word (stop words aside)
    with anything the tool's definition says is found all the same, and the found tool is
    called through `call_tool`."""
    (fs_root / "notes.txt").write_text("hello")
    config = write_config(search_config(server_specs))
    async with moniker(config) as session:
        query = "how large is this document and who may open it"
        tools = await found(session, query, limit=5)
        names = [t["name"] for t in tools]
        assert "get_file_info" in names, names
        info = tools[names.index("get_file_info")]
        stop = words("how is this and who may it")
        shared = (words(query) - stop) & words(json.dumps(info))
        assert not shared, f"the request shares {shared} with the tool"
        called = await session.call_tool(
            "call_tool", {"name": "get_file_info", "arguments": {"path": str(fs_root / "notes.txt")}}
        )
        assert not called.isError, called.content
        assert "size" in s.texts(called)[0].lower(), called.content
