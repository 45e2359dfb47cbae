"""moniker end to end: `moniker serve` in front of four real MCP servers (server-everything,
server-filesystem, server-memory from npm, and moniker-fixture), driven by the official MCP
Python SDK as a client would. The config is conftest.gateway_config:

    tools:
      fixture/echo:    { name: fixture_echo }     # everything has an `echo` too
      read_text_file:  { aliases: [cat] }
      create_entities: { aliases: [remember], tags: [memory] }
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import McpError

import scenarios as s

UNKNOWN_TOOL = -32004

# exposed name -> the server it must route to
EXPECTED_SERVER = {
    **{name: "everything" for name in s.EXPECTED_TOOLS["everything"]},
    **{name: "filesystem" for name in s.EXPECTED_TOOLS["filesystem"]},
    **{name: "memory" for name in s.EXPECTED_TOOLS["memory"]},
    "fixture_echo": "fixture",
}


async def test_lists_clean_names_of_all_four_servers(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        tools = await s.list_all_tools(session)
    by_name = {tool.name: tool for tool in tools}
    assert len(by_name) == len(tools), f"duplicate names: {[t.name for t in tools]}"

    missing = set(EXPECTED_SERVER) - set(by_name)
    assert not missing, f"missing {sorted(missing)}; listed {sorted(by_name)}"
    for tool in tools:
        extra, meta = s.extras(tool), tool.meta or {}
        # One place per fact: the server and the tags in `_meta`, the aliases in `aliases`.
        assert isinstance(meta.get("io.moniker/server"), str), f"{tool.name}: no server in {meta}"
        assert "server_name" not in extra and "tags" not in extra, (tool.name, extra)
        assert "io.moniker/aliases" not in meta, (tool.name, meta)
        # What says nothing is not said: no empty tags, no empty `aliases`.
        for field, where in (("io.moniker/tags", meta), ("aliases", extra)):
            if field in where:
                assert isinstance(where[field], list) and where[field], f"{tool.name}: `{field}` present but empty"
    for name, server in EXPECTED_SERVER.items():
        assert (by_name[name].meta or {})["io.moniker/server"] == server, (name, by_name[name].meta)

    # `echo` stays everything's; the fixture's is renamed by the config
    assert "aliases" not in s.extras(by_name["echo"])

    read = by_name["read_text_file"]
    assert s.extras(read)["aliases"] == ["cat"]
    assert (read.description or "").endswith("\n\nAliases: cat"), read.description

    create = by_name["create_entities"]
    assert s.extras(create)["aliases"] == ["remember"]
    assert "memory" in (create.meta or {})["io.moniker/tags"], create.meta


async def test_colliding_echo_tools_route_to_their_servers(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        await s.check_echo(session, "echo")
        fixture = await session.call_tool("fixture_echo", {"text": "hi"})
    assert not fixture.isError, s.dump(fixture)
    assert s.texts(fixture) == ['{"text":"hi"}'], s.dump(fixture)


async def test_name_and_alias_give_identical_results(moniker, gateway_config: Path, fs_root: Path) -> None:
    args = {"path": str(fs_root / "hello.txt")}
    async with moniker(gateway_config) as session:
        by_name = await session.call_tool("read_text_file", args)
        by_alias = await session.call_tool("cat", args)
    assert not by_name.isError, s.dump(by_name)
    assert s.texts(by_name) == ["hello from moniker e2e\nsecond line\n"], s.dump(by_name)
    assert s.dump(by_alias) == s.dump(by_name)


async def test_memory_create_via_alias_then_read_back(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        await s.check_memory_roundtrip(session, create_tool="remember")


async def test_reads_a_resource_of_everything(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        await s.check_resource(session)


async def test_gets_prompts_of_everything(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        await s.check_prompts(session)


async def test_unknown_tool_is_error_32004(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        with pytest.raises(McpError) as raised:
            await session.call_tool("no_such_tool", {})
        # the session survives the error
        await s.check_echo(session, "echo")
    assert raised.value.error.code == UNKNOWN_TOOL, raised.value.error
    assert raised.value.error.message == "Unknown tool: no_such_tool", raised.value.error


async def test_progress_notifications_are_forwarded(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        await s.check_progress(session)


async def test_sampling_request_goes_to_the_client_and_back(moniker, gateway_config: Path) -> None:
    sampler = s.Sampler()
    async with moniker(gateway_config, sampling_callback=sampler) as session:
        names = {tool.name for tool in await s.list_all_tools(session)}
        assert s.EVERYTHING_SAMPLING in names, (
            f"{s.EVERYTHING_SAMPLING} is not listed: server-everything registers it only when its "
            "client (moniker) declares the `sampling` capability in initialize"
        )
        await s.check_sampling(session, sampler)
