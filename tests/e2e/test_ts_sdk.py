"""moniker's metadata through the official TypeScript SDK (ts_client.mjs). That SDK drops a tool's
unknown top-level fields, so the tags and the server are in `_meta` alone, under moniker's keys
(`io.moniker/tags`, `io.moniker/server`), merged into the `_meta` a server sent; the listed
aliases reach it in the description's `Aliases:` line (the top-level `aliases` it drops). Where
every tool (or prompt) is of one server, the listing result's own `_meta` says it once and no
entry does; with several, each entry says its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import E2E_DIR

TS_TIMEOUT = 30  # seconds for the whole client run, moniker's start-up included

INVENTORY = {
    "serverInfo": {"name": "ts-fixture", "version": "1.0.0"},
    "tools": [
        {
            "name": "echo",
            "description": "Echoes its input.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
            "_meta": {"vendor.example/hint": {"level": 2}},
        },
        {"name": "plain", "description": "Has no _meta.", "inputSchema": {"type": "object"}},
    ],
    "prompts": [{"name": "review", "description": "Review some code."}],
}


def run_ts_client(moniker_bin: Path, config: Path, calls: list[Any] | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    node = shutil.which("node")
    if not node:
        pytest.fail("`node` is not on PATH (Node 20+ is needed for the TypeScript SDK)", pytrace=False)
    sdk = E2E_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    if not sdk.is_file():
        pytest.fail("the TypeScript SDK is not installed: run `npm ci --prefix tests/e2e`", pytrace=False)
    try:
        done = subprocess.run(
            [node, str(E2E_DIR / "ts_client.mjs"), str(moniker_bin), str(config)],
            stdin=subprocess.DEVNULL,
            env={**os.environ, "TS_ENV": json.dumps(env or {}), "TS_CALLS": json.dumps(calls or [])},
            capture_output=True,
            text=True,
            timeout=TS_TIMEOUT,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"ts_client.mjs did not end within {TS_TIMEOUT} s: {expired}")
    assert done.returncode == 0, f"exit {done.returncode}\n--- stderr ---\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def test_moniker_metadata_reaches_a_typescript_client_in_meta(
    moniker_bin: Path, fixture_bin: Path, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(INVENTORY))
    config = write_config(
        {
            "servers": {"fix": {"command": str(fixture_bin), "args": [str(inventory)], "tags": ["demo"]}},
            "tools": {"echo": {"aliases": ["say", {"name": "shout", "hidden": True}], "tags": ["text"]}},
            "prompts": {"review": {"aliases": ["code-review"]}},
        }
    )
    listed = run_ts_client(moniker_bin, config)
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert set(tools) == {"echo", "plain"}, listed

    echo = tools["echo"]
    # (The SDK 1.x drops the top-level `aliases` here; `_meta` it keeps.)
    meta = echo["_meta"]
    assert "io.moniker/aliases" not in meta, meta  # said once: in `aliases` and the description
    assert meta["io.moniker/tags"] == ["demo", "text"], meta
    # One server: said once, by the listing.
    assert listed["toolsMeta"] == {"io.moniker/server": "fix"}, listed["toolsMeta"]
    assert listed["promptsMeta"] == {"io.moniker/server": "fix"}, listed["promptsMeta"]
    assert "io.moniker/server" not in meta, meta
    # The server's own `_meta` is kept beside moniker's keys.
    assert meta["vendor.example/hint"] == {"level": 2}, meta
    assert echo["description"].endswith("Aliases: say"), echo

    plain = tools["plain"]["_meta"]
    assert "io.moniker/aliases" not in plain, plain
    assert plain == {"io.moniker/tags": ["demo"]}, plain

    prompts = {prompt["name"]: prompt for prompt in listed["prompts"]}
    review = prompts["review"]["_meta"]
    assert prompts["review"]["description"].endswith("Aliases: code-review"), prompts["review"]
    assert "io.moniker/server" not in review, review


def test_with_several_servers_each_entry_says_its_own(
    moniker_bin: Path, fixture_bin: Path, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(INVENTORY))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}))
    config = write_config(
        {
            "servers": {
                "fix": {"command": str(fixture_bin), "args": [str(inventory)]},
                "two": {"command": str(fixture_bin), "args": [str(other)]},
            },
        }
    )
    listed = run_ts_client(moniker_bin, config)
    servers = {tool["name"]: tool["_meta"]["io.moniker/server"] for tool in listed["tools"]}
    assert servers == {"echo": "fix", "plain": "fix", "ping": "two"}, listed["tools"]
    assert "io.moniker/server" not in (listed.get("toolsMeta") or {}), listed
    # The server's own `_meta` is kept beside moniker's key.
    echo = next(tool for tool in listed["tools"] if tool["name"] == "echo")
    assert echo["_meta"]["vendor.example/hint"] == {"level": 2}, echo
    # Every prompt is of one server: that listing says it once.
    assert listed["promptsMeta"] == {"io.moniker/server": "fix"}, listed
