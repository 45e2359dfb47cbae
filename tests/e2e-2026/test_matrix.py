"""The interoperability matrix: what each client sees through moniker of each server.

Clients: the official Python SDK 2.3.0 in 2026-07-28 mode and in legacy (2025 handshake) mode,
each over moniker's stdio and over its Streamable HTTP. Servers: the same SDK's own MCPServer
(sdk_server.py, both eras, refusing on a connection of one era what belongs to the other), over
stdio (`command:`) and over HTTP (`url:`), and the same server written with FastMCP 4,, spoken to in moniker's default era (the handshake)
and in 2026-07-28 (`protocol: 2026-07-28`). Each cell lists the tools, calls by name, by alias
and through an action tool, runs an elicitation round trip, receives progress, and reads a
resource. One lenient server once hid that moniker sent the 2026 envelope to servers of the
2025 era; a strict one is behind every cell here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from support import ROOT, binary, free_port, serving_http, started, tools_when

HERE = ROOT / "tests" / "e2e-2026"
# The server of each cell: the SDK's own MCPServer, and FastMCP 4 on the same SDK.
SERVERS = {"sdk": HERE / "sdk_server.py", "fastmcp": HERE / "fastmcp_server.py"}
CLIENT_MODES = ["2026-07-28", "legacy"]
VIAS = ["stdio", "http"]
SERVER_TRANSPORTS = ["stdio", "http"]
SERVER_ERAS = ["2025", "2026-07-28"]


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def sdk_config(server: str, era: str) -> str:
    """moniker's config for a cell of sdk_server.py or fastmcp_server.py (`server`: its entry)."""
    protocol = "    protocol: 2026-07-28\n" if era == "2026-07-28" else ""
    return f"""servers:
  sdk:
{server}{protocol}tools:
  sdk_echo: {{ aliases: [say] }}
actions:
  kit:
    tools: {{ echo: sdk_echo, ask: sdk_ask }}
"""


def write_config(path: Path, server: str, era: str) -> Path:
    path.write_text(sdk_config(server, era))
    return path


async def exercise(client: Client, elicits: bool) -> None:
    await tools_when(client, {"kit", "sdk_progress"})

    by_name = await client.call_tool("sdk_echo", {"text": "a"})
    assert not by_name.is_error and text_of(by_name) == "sdk:a", by_name
    by_alias = await client.call_tool("say", {"text": "b"})
    assert not by_alias.is_error and text_of(by_alias) == "sdk:b", by_alias
    action = await client.call_tool("kit", {"action": "echo", "text": "c"})
    assert not action.is_error and text_of(action) == "sdk:c", action

    asked = await client.call_tool("kit", {"action": "ask", "question": "colour?"})
    if elicits:
        assert not asked.is_error and text_of(asked) == "answer:blue", asked
    else:
        # FastMCP 4's `ctx.elicit` sends a request of the server's own, which the 2026-07-28
        # era does not have: spoken to in that era, it says so itself, and moniker relays it.
        assert asked.is_error and "unavailable on 2026-07-28" in text_of(asked), asked

    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    done = await client.call_tool("sdk_progress", {"steps": 3}, progress_callback=progress)
    assert not done.is_error and text_of(done) == "done after 3", done
    assert seen == [1, 2, 3], seen

    read = await client.read_resource("sdk://hello")
    assert [getattr(c, "text", None) for c in read.contents] == ["hello from the sdk"], read


async def elicit(context, params) -> types.ElicitResult:
    assert "colour?" in params.message, params
    return types.ElicitResult(action="accept", content={"answer": "blue"})


def serve_and(script: Path, server_transport: str, tmp_path: Path, run) -> None:
    """Starts the cell's server (over HTTP, its process; over stdio, moniker starts it) and
    runs `run(server_entry)` with the config lines that name it."""
    if server_transport == "stdio":
        run(f'    command: "{sys.executable}"\n    args: ["{script}", stdio]\n')
    else:
        port = free_port()
        with started([sys.executable, str(script), "http", str(port)], port, script.name, tmp_path / "server.log"):
            run(f"    url: http://127.0.0.1:{port}/mcp\n")


@pytest.mark.parametrize("server_era", SERVER_ERAS)
@pytest.mark.parametrize("server_transport", SERVER_TRANSPORTS)
@pytest.mark.parametrize("server", sorted(SERVERS))
@pytest.mark.parametrize("via", VIAS)
def test_typescript_client(tmp_path: Path, via: str, server: str, server_transport: str, server_era: str) -> None:
    """The official TypeScript SDK (1.x, the 2025 handshake) as the client of the same cells."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: scripts/test installs Node.js for the e2e tests")
    if server == "fastmcp" and server_era == "2026-07-28":
        pytest.skip("FastMCP 4's ctx.elicit is unavailable on its 2026-07-28 connections (see test_cell)")
    client = HERE / "ts_matrix_client.mjs"

    def run(server_entry: str) -> None:
        config = write_config(tmp_path / "moniker.yaml", server_entry, server_era)
        if via == "stdio":
            command = [node, str(client), "stdio", str(binary("moniker")), str(config)]
            out = subprocess.run(command, capture_output=True, text=True, timeout=60)
        else:
            with serving_http(config, tmp_path / "serve.log") as (url, _, _):
                out = subprocess.run([node, str(client), "http", url], capture_output=True, text=True, timeout=60)
        lines = out.stdout.strip().splitlines()
        verdict = json.loads(lines[-1]) if lines else {"ok": False, "why": out.stderr[-2000:]}
        assert verdict.get("ok"), verdict.get("why")

    serve_and(SERVERS[server], server_transport, tmp_path, run)


@pytest.mark.parametrize("server_era", SERVER_ERAS)
@pytest.mark.parametrize("server_transport", SERVER_TRANSPORTS)
@pytest.mark.parametrize("server", sorted(SERVERS))
@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_cell(tmp_path: Path, mode: str, via: str, server: str, server_transport: str, server_era: str) -> None:
    script = SERVERS[server]

    async def run(target) -> None:
        with anyio.fail_after(60):
            async with Client(target, mode=mode, elicitation_callback=elicit) as client:
                await exercise(client, elicits=not (server == "fastmcp" and server_era == "2026-07-28"))

    def serve(server_entry: str) -> None:
        through_moniker(tmp_path, sdk_config(server_entry, server_era), via, run)

    serve_and(script, server_transport, tmp_path, serve)


def through_moniker(tmp_path: Path, config_text: str, via: str, run) -> None:
    """Writes `config_text` as moniker's config and runs the async `run(target)` through
    `moniker serve` over `via` (stdio: the server parameters; http: the URL)."""
    config = tmp_path / "moniker.yaml"
    config.write_text(config_text)
    if via == "stdio":
        anyio.run(run, StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)]))
    else:
        with serving_http(config, tmp_path / "serve.log") as (url, _, _):
            anyio.run(run, url)


MODERN = HERE / "modern_server.py"


async def exercise_modern(client: Client) -> None:
    await tools_when(client, {"kit", "modern_add"})
    by_alias = await client.call_tool("shout", {"text": "a"})
    assert not by_alias.is_error and text_of(by_alias) == "modern:a", by_alias
    action = await client.call_tool("kit", {"action": "echo", "text": "b"})
    assert not action.is_error and text_of(action) == "modern:b", action
    asked = await client.call_tool("kit", {"action": "ask", "question": "colour?"})
    assert not asked.is_error and text_of(asked) == "answer:blue", asked
    read = await client.read_resource("modern://hello")
    assert [getattr(c, "text", None) for c in read.contents] == ["hello from modern"], read


@pytest.mark.parametrize("server_transport", SERVER_TRANSPORTS)
@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_a_2026_only_server(tmp_path: Path, mode: str, via: str, server_transport: str) -> None:
    """A server that refuses the handshake (modern_server.py), named without `protocol:`:
    moniker finds out, and every client sees it, its elicitation (an input-required result of
    the server's) included."""

    async def run(target) -> None:
        with anyio.fail_after(60):
            async with Client(target, mode=mode, elicitation_callback=elicit) as client:
                await exercise_modern(client)

    def serve(server_entry: str) -> None:
        through_moniker(
            tmp_path,
            f"servers:\n  modern:\n{server_entry}"
            "tools:\n  modern_echo: { aliases: [shout] }\n"
            "actions:\n  kit:\n    tools: { echo: modern_echo, ask: modern_ask }\n",
            via,
            run,
        )

    serve_and(MODERN, server_transport, tmp_path, serve)


EVERYTHING = ROOT / "tests" / "e2e" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


async def exercise_everything(client: Client) -> None:
    await tools_when(client, {"kit", "trigger-long-running-operation"})
    by_alias = await client.call_tool("say", {"message": "a"})
    assert not by_alias.is_error and text_of(by_alias) == "Echo: a", by_alias
    action = await client.call_tool("kit", {"action": "echo", "message": "b"})
    assert not action.is_error and text_of(action) == "Echo: b", action
    asked = await client.call_tool("kit", {"action": "ask"})
    assert not asked.is_error and "User provided the requested information" in text_of(asked), asked
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    done = await client.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=progress)
    assert not done.is_error, done
    assert seen == [1, 2, 3], seen
    read = await client.read_resource("demo://resource/dynamic/text/1")
    assert read.contents and getattr(read.contents[0], "text", ""), read


async def elicit_everything(context, params) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("server_transport", SERVER_TRANSPORTS)
@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("mode", CLIENT_MODES)
def test_the_typescript_sdks_server(tmp_path: Path, mode: str, via: str, server_transport: str) -> None:
    """The TypeScript SDK as the server (server-everything), over stdio and HTTP."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: scripts/test installs Node.js for the e2e tests")
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: scripts/test installs tests/e2e/node_modules")

    async def run(target) -> None:
        with anyio.fail_after(60):
            async with Client(target, mode=mode, elicitation_callback=elicit_everything) as client:
                await exercise_everything(client)

    def serve(server_entry: str) -> None:
        through_moniker(
            tmp_path,
            f"servers:\n  everything:\n{server_entry}"
            "tools:\n  echo: { aliases: [say] }\n"
            "actions:\n  kit:\n    tools: { echo: echo, ask: trigger-elicitation-request }\n",
            via,
            run,
        )

    if server_transport == "stdio":
        serve(f'    command: "{node}"\n    args: ["{EVERYTHING}", stdio]\n')
    else:
        port = free_port()
        command = ["env", f"PORT={port}", node, str(EVERYTHING), "streamableHttp"]
        with started(command, port, "server-everything", tmp_path / "server.log"):
            serve(f"    url: http://127.0.0.1:{port}/mcp\n")

