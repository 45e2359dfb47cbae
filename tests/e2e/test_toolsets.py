"""Toolsets through the official Python SDK, as seed 002's success criteria ask: build a
toolset with aliases through `build-toolset`, equip it, see `list_changed` and the new
listing, call by alias, be refused outside it, restart moniker, find the toolset again,
equip it and call by alias."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp.types as types
from mcp.shared.exceptions import McpError

import scenarios as s


async def test_build_equip_persist_restart_equip_call(
    mcp_session, moniker_bin: Path, gateway_config: Path, tmp_path: Path, memory_file: Path
) -> None:
    store = tmp_path / "toolsets.json"
    args = ["serve", "-c", str(gateway_config), "--manage", "--store", str(store)]
    env = {"MEMORY_FILE_PATH": str(memory_file), "XDG_DATA_HOME": str(tmp_path)}
    changed = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ToolListChangedNotification):
            changed.set()

    async with mcp_session(moniker_bin, args, env=env, message_handler=on_message) as session:
        built = await session.call_tool(
            "build-toolset",
            {"name": "notes", "tools": [{"name": "create_entities", "alias": "note_down"}, {"name": "read_graph", "alias": "recall"}], "description": "Notes."},
        )
        assert not built.isError, built.content
        equipped = await session.call_tool("equip-toolset", {"name": "notes"})
        assert not equipped.isError, equipped.content
        with anyio.fail_after(10):
            await changed.wait()
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {"create_entities", "read_graph"} <= set(listed)
        assert "echo" not in listed and "fixture_echo" not in listed
        assert "note_down" in s.extras(listed["create_entities"])["aliases"]

        created = await session.call_tool("note_down", {"entities": [{"name": "moniker", "entityType": "project", "observations": ["toolsets work"]}]})
        assert not created.isError, created.content
        try:
            await session.call_tool("echo", {"message": "outside"})
            raise AssertionError("a tool outside the toolset was called")
        except McpError as e:
            assert e.error.code == -32004 and "Unknown tool: echo" in e.error.message

    async with mcp_session(moniker_bin, args, env=env) as session:
        saved = await session.call_tool("list-saved-toolsets", {})
        names = [t["name"] for t in json.loads(saved.content[0].text)["toolsets"]]
        assert "notes" in names
        await session.call_tool("equip-toolset", {"name": "notes"})
        graph = await session.call_tool("recall", {})
        assert not graph.isError and "toolsets work" in graph.content[0].text, graph.content


async def test_invalid_aliases_are_refused_with_the_reason(mcp_session, moniker_bin: Path, gateway_config: Path, tmp_path: Path, memory_file: Path) -> None:
    args = ["serve", "-c", str(gateway_config), "--manage", "--store", str(tmp_path / "toolsets.json")]
    async with mcp_session(moniker_bin, args, env={"MEMORY_FILE_PATH": str(memory_file)}) as session:
        for tools, needle in [
            ([{"name": "read_graph", "alias": "Recall"}], "^[a-z0-9][a-z0-9_-]{1,63}$"),
            ([{"name": "read_graph", "alias": "x1"}, {"name": "open_nodes", "alias": "x1"}], "x1"),
            ([{"name": "read_graph", "alias": "create_entities"}], "create_entities"),
        ]:
            result = await session.call_tool("build-toolset", {"name": "bad", "tools": tools})
            assert result.isError, tools
            assert needle in result.content[0].text, result.content[0].text


async def test_the_store_is_held_to_a_budget(mcp_session, moniker_bin: Path, gateway_config: Path, tmp_path: Path, memory_file: Path) -> None:
    """Hold the boundary, round three: what a client may save is bounded (every replica reads
    the whole store again and again): a description of at most 1 KiB, 256 toolsets; a toolset
    saved again under its name replaces itself, and one deleted makes room."""
    args = ["serve", "-c", str(gateway_config), "--manage", "--store", str(tmp_path / "toolsets.json")]
    async with mcp_session(moniker_bin, args, env={"MEMORY_FILE_PATH": str(memory_file)}) as session:
        long = await session.call_tool("build-toolset", {"name": "long", "tools": ["read_graph"], "description": "x" * 1025})
        assert long.isError and "at most 1024 bytes" in long.content[0].text, long.content
        for n in range(256):
            built = await session.call_tool("build-toolset", {"name": f"set-{n}", "tools": ["read_graph"], "description": "x" * 1024})
            assert not built.isError, (n, built.content)
        over = await session.call_tool("build-toolset", {"name": "one-more", "tools": ["read_graph"]})
        assert over.isError and "holds 256 toolsets, the most it keeps" in over.content[0].text, over.content
        again = await session.call_tool("build-toolset", {"name": "set-0", "tools": ["open_nodes"]})
        assert not again.isError, again.content
        deleted = await session.call_tool("delete-toolset", {"name": "set-1"})
        assert not deleted.isError, deleted.content
        room = await session.call_tool("build-toolset", {"name": "one-more", "tools": ["read_graph"]})
        assert not room.isError, room.content
