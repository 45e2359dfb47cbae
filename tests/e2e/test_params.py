"""Parameter rules in front of the real filesystem server from npm (and the time server from PyPI), through the official Python
and TypeScript SDK clients: a parameter renamed, with its old name still working; a default; a
hidden parameter refused; a fixed parameter (from the environment) never in any listing, search
result or error, and always sent.

    tools:
      read_text_file:
        params:
          path: { rename: file, aliases: [path] }   # the old name keeps old calls working
          head: { default: 1 }
          tail: { hidden: true }
      list_directory:
        params:
          path: { fixed: "${PARAMS_ROOT}" }
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import scenarios as s
from test_ts_sdk import run_ts_client

RULES: dict[str, Any] = {
    "read_text_file": {
        "params": {
            "path": {"rename": "file", "aliases": ["path"]},
            "head": {"default": 1},
            "tail": {"hidden": True},
        }
    },
    "list_directory": {"params": {"path": {"fixed": "${PARAMS_ROOT}"}}},
}


def config(write_config: Callable[..., Path], server_specs: dict[str, dict[str, Any]], **more: Any) -> Path:
    return write_config({"servers": {"filesystem": server_specs["filesystem"]}, "tools": RULES, **more})


def schema_of(tools: list[Any], name: str) -> dict[str, Any]:
    tool = next(t for t in tools if t.name == name)
    return tool.inputSchema


async def test_the_listed_schema_is_the_servers_transformed(moniker, write_config, server_specs, fs_root: Path) -> None:
    async with moniker(config(write_config, server_specs), env={"PARAMS_ROOT": str(fs_root)}) as session:
        tools = (await session.list_tools()).tools
    read = schema_of(tools, "read_text_file")
    assert list(read["properties"]) == ["file", "head"], read
    assert read["required"] == ["file"], read
    assert read["properties"]["head"]["default"] == 1, read
    listing = schema_of(tools, "list_directory")
    assert "path" not in listing.get("properties", {}), listing
    assert "path" not in listing.get("required", []), listing
    everything = json.dumps([t.model_dump(mode="json") for t in tools])
    assert str(fs_root) not in everything, "a fixed value is never listed"


async def test_calls_go_back_through_the_rules(moniker, write_config, server_specs, fs_root: Path) -> None:
    hello = str(fs_root / "hello.txt")
    async with moniker(config(write_config, server_specs), env={"PARAMS_ROOT": str(fs_root)}) as session:
        by_new = await session.call_tool("read_text_file", {"file": hello})
        by_old = await session.call_tool("read_text_file", {"path": hello})
        two = await session.call_tool("read_text_file", {"file": hello, "head": 2})
        tail = await session.call_tool("read_text_file", {"file": hello, "tail": 1})
        listed = await session.call_tool("list_directory", {})
        refused = await session.call_tool("list_directory", {"path": "/"})
    assert not by_new.isError, s.dump(by_new)
    assert s.texts(by_new) == ["hello from moniker e2e"], "the default head is 1"
    assert s.dump(by_old) == s.dump(by_new), "the old name still works"
    assert s.texts(two) == ["hello from moniker e2e\nsecond line"], s.dump(two)
    assert tail.isError and "`tail` is not accepted" in s.texts(tail)[0], s.dump(tail)
    assert not listed.isError and "hello.txt" in s.texts(listed)[0], s.dump(listed)
    assert refused.isError, s.dump(refused)
    assert "`path` is set by the gateway" in s.texts(refused)[0], s.dump(refused)
    assert str(fs_root) not in s.dump(refused), "a fixed value is in no error"


async def test_a_fixed_value_is_in_no_search_result(moniker, write_config, server_specs, fs_root: Path) -> None:
    searching = config(write_config, server_specs, discovery={"mode": "search"})
    async with moniker(searching, env={"PARAMS_ROOT": str(fs_root)}) as session:
        found = await session.call_tool("search_tools", {"query": "list the files of a directory", "limit": 20})
        described = await session.call_tool("search_tools", {"query": "list_directory"})
        called = await session.call_tool("call_tool", {"name": "list_directory", "arguments": {}})
        refused = await session.call_tool("call_tool", {"name": "list_directory", "arguments": {"path": "/"}})
    assert not found.isError, s.dump(found)
    assert "- list_directory(" in s.texts(found)[0] and "path" not in s.texts(found)[0].split("- list_directory(")[1].split(")")[0]
    tools = {t["name"]: t for t in described.structuredContent["tools"]}
    assert "list_directory" in tools and "path" not in tools["list_directory"]["inputSchema"].get("properties", {})
    assert str(fs_root) not in s.dump(found)
    assert not called.isError and "hello.txt" in s.texts(called)[0], s.dump(called)
    assert refused.isError and str(fs_root) not in s.dump(refused), s.dump(refused)


async def test_rules_in_front_of_a_real_pypi_server(moniker, write_config) -> None:
    server = Path(sys.executable).with_name("mcp-server-time")
    rules = {
        "get_current_time": {"params": {"timezone": {"rename": "zone", "aliases": ["timezone"]}}},
        "convert_time": {"params": {"source_timezone": {"fixed": "Europe/Paris"}}},
    }
    path = write_config({"servers": {"time": {"command": str(server), "args": ["--local-timezone", "UTC"]}}, "tools": rules})
    async with moniker(path) as session:
        tools = (await session.list_tools()).tools
        by_new = await session.call_tool("get_current_time", {"zone": "Asia/Tokyo"})
        by_old = await session.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
        converted = await session.call_tool("convert_time", {"time": "12:00", "target_timezone": "UTC"})
        refused = await session.call_tool(
            "convert_time", {"time": "12:00", "target_timezone": "UTC", "source_timezone": "UTC"}
        )
    assert list(schema_of(tools, "get_current_time")["properties"]) == ["zone"]
    assert "source_timezone" not in schema_of(tools, "convert_time")["properties"]
    assert "Europe/Paris" not in json.dumps([t.model_dump(mode="json") for t in tools])
    for result in (by_new, by_old):
        assert not result.isError and json.loads(s.texts(result)[0])["timezone"] == "Asia/Tokyo", s.dump(result)
    assert not converted.isError, s.dump(converted)
    assert json.loads(s.texts(converted)[0])["source"]["timezone"] == "Europe/Paris", s.dump(converted)
    assert refused.isError and "Europe/Paris" not in s.dump(refused), s.dump(refused)


def test_the_old_parameter_name_works_through_the_typescript_sdk(
    moniker_bin: Path, write_config, server_specs, fs_root: Path
) -> None:
    hello = str(fs_root / "hello.txt")
    listed = run_ts_client(
        moniker_bin,
        config(write_config, server_specs),
        calls=[
            ["read_text_file", {"path": hello}],
            ["read_text_file", {"file": hello, "head": 2}],
            ["list_directory", {}],
            ["list_directory", {"path": "/"}],
        ],
        env={"PARAMS_ROOT": str(fs_root), "MONIKER_STANDALONE": "1"},
    )
    read = next(t for t in listed["tools"] if t["name"] == "read_text_file")
    assert list(read["inputSchema"]["properties"]) == ["file", "head"], read
    assert str(fs_root) not in json.dumps(listed["tools"])
    old, two, directory, refused = (c.get("result") or c for c in listed["calls"])
    text = lambda r: [c["text"] for c in r["content"] if c["type"] == "text"]  # noqa: E731
    assert text(old) == ["hello from moniker e2e"], old
    assert text(two) == ["hello from moniker e2e\nsecond line"], two
    assert "hello.txt" in text(directory)[0], directory
    assert refused.get("isError") and "set by the gateway" in text(refused)[0], refused
    assert str(fs_root) not in json.dumps(refused)
