"""moniker in front of a 2026-07-28-only server (tests/e2e-2026/modern_server.py, built on the
official Python SDK, which refuses `initialize`) and a 2025 one (server-everything), side by
side: the SDK client in `2026-07-28`, `auto` and `legacy` modes lists and calls tools of both,
by name, by alias and through an action tool. The modern server is reached over Streamable HTTP
and over stdio; over HTTP it checks the routing headers, so a call succeeds only when moniker
sends `Mcp-Method`, `Mcp-Name` with the origin name and, for `modern_region` (whose `region`
is an `x-mcp-header` parameter), `Mcp-Param-Region` — also when the call came through an
action tool, whose own schema does not carry the annotation. The modern server's elicitation
(an input-required result) reaches a modern client through moniker, and its tool list changes
reach every client."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from support import ROOT, binary, free_port, serving_http, started, tools_when

MODES = ["2026-07-28", "auto", "legacy"]
HERE = Path(__file__).resolve().parent
EVERYTHING = ROOT / "tests/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def modern_url(tmp_path: Path):
    port = free_port()
    command = [sys.executable, str(HERE / "modern_server.py"), "http", str(port)]
    with started(command, port, "the modern SDK server", tmp_path / "modern.log"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def config(tmp_path: Path, modern_url: str) -> Path:
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: npm ci --prefix tests/e2e")
    path = tmp_path / "moniker.yaml"
    path.write_text(
        f"""servers:
  everything:
    command: node
    args: ["{EVERYTHING}", stdio]
  modern:
    url: "{modern_url}"
    protocol: 2026-07-28
  local:
    command: "{sys.executable}"
    args: ["{HERE / 'modern_server.py'}", stdio]
    protocol: 2026-07-28
    prefix: local
tools:
  modern/modern_echo: {{ aliases: [shout] }}
actions:
  regional:
    tools: {{ lookup: modern_region, add: modern_add }}
toolsets:
  mixed:
    tools: [regional, shout, echo]
"""
    )
    return path


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def exercise(client: Client) -> None:
    tools = await tools_when(client, {"echo", "modern_echo", "regional", "local_modern_echo", "local_modern_region"})
    assert "modern_region" not in tools, "a member of an action tool is listed through it"

    legacy = await client.call_tool("echo", {"message": "from 2025"})
    assert not legacy.is_error and "from 2025" in text_of(legacy), legacy
    for name in ["modern_echo", "shout", "local_modern_echo"]:
        echoed = await client.call_tool(name, {"text": "hi"})
        assert not echoed.is_error and text_of(echoed) == "modern:hi", (name, echoed)
    added = await client.call_tool("regional", {"action": "add", "a": 40, "b": 2})
    assert not added.is_error and text_of(added) == "42", added

    # Through the action tool: the modern server checks Mcp-Param-Region against the body.
    for region in ["eu-west", "zürich"]:
        looked = await client.call_tool("regional", {"action": "lookup", "region": region, "item": "disk"})
        assert not looked.is_error, looked
        seen = json.loads(text_of(looked))
        assert seen["region"] == region and seen["header"] == region, seen
    # Over stdio there are no headers: the same tool answers all the same.
    local = await client.call_tool("local_modern_region", {"region": "ap-south", "item": "cpu"})
    assert not local.is_error and json.loads(text_of(local))["header"] is None, local

    read = await client.read_resource("modern://hello")
    assert "hello from modern" in str(read.contents[0]), read


async def grow(client: Client) -> None:
    """A modern server's tool list changes: moniker hears it on its own `subscriptions/listen`
    to that server (HTTP and stdio), lists again, and the client sees the new tools."""
    for name in ["modern_grow", "local_modern_grow"]:
        grew = await client.call_tool(name, {})
        assert not grew.is_error, grew
    with anyio.fail_after(10):
        while True:
            tools = {t.name for t in (await client.list_tools()).tools}
            if {"modern_grown", "local_modern_grown"} <= tools:
                break
            await anyio.sleep(0.1)


async def answer(context, params):
    import mcp_types as types

    if params.message.startswith("Please provide inputs"):  # server-everything's form
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})
    return types.ElicitResult(action="accept", content={"answer": f"asked {params.message}"})


async def ask_through(client: Client) -> None:
    """The modern server's elicitation: a 2026-07-28 client gets its input-required result
    untouched and sends the retry with the server's `requestState` back through moniker; a
    2025 client gets an `elicitation/create` request from moniker, whose answer moniker sends
    back to the server with its state. And the 2025 server's elicitation request reaches either
    client the way it takes requests."""
    asked = await client.call_tool("modern_ask", {"question": "why?"})
    assert not asked.is_error and text_of(asked) == "answer:asked why?", asked
    # A 2025 server's elicitation request in the middle of a call: moniker turns it into an
    # input-required result for the client, and its answer into the server's response.
    elicited = await client.call_tool("trigger-elicitation-request", {})
    assert not elicited.is_error and "Ada Lovelace" in text_of(elicited), elicited


def run_all(target, mode: str) -> None:
    """Everything above, through moniker at `target` (stdio parameters or a URL)."""

    async def run() -> None:
        with anyio.fail_after(60):
            async with Client(target, mode=mode, elicitation_callback=answer) as client:
                await exercise(client)
                await ask_through(client)
                await grow(client)

    anyio.run(run)


@pytest.mark.parametrize("mode", MODES)
def test_over_stdio(config: Path, mode: str) -> None:
    run_all(StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)]), mode)


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_over_http(config: Path, tmp_path: Path, mode: str) -> None:
    with serving_http(config, tmp_path / "serve.log") as (url, _, _):
        run_all(url, mode)


async def follow_a_resource(client: Client) -> None:
    """`subscriptions/listen` with a resource: moniker subscribes to it at server-everything
    for as long as the stream lasts, and the server's updates reach the stream."""
    from mcp.shared.subscriptions import ResourceUpdated

    resources = (await client.list_resources()).resources
    uri = next(str(r.uri) for r in resources if str(r.uri).startswith("demo://"))
    async with client.listen(resource_subscriptions=[uri], tools_list_changed=True) as subscription:
        assert list(subscription.honored.resource_subscriptions or []) == [uri], subscription.honored
        toggled = await client.call_tool("toggle-subscriber-updates", {})
        assert not toggled.is_error, toggled
        with anyio.fail_after(15):
            async for event in subscription:
                if isinstance(event, ResourceUpdated):
                    assert event.uri == uri, event
                    break
    await client.call_tool("toggle-subscriber-updates", {})


def through(config: Path, tmp_path: Path, transport: str, work) -> None:
    """`work(client)` with a 2026-07-28 client of moniker over `transport`."""

    async def run(target) -> None:
        with anyio.fail_after(60):
            async with Client(target, mode="2026-07-28") as client:
                await work(client)

    if transport == "stdio":
        anyio.run(run, StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)]))
    else:
        with serving_http(config, tmp_path / "serve.log") as (url, _, _):
            anyio.run(run, url)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_resource_followed_through_listen(config: Path, tmp_path: Path, transport: str) -> None:
    through(config, tmp_path, transport, follow_a_resource)


def test_lists_may_be_cached_as_long_as_every_server_says(tmp_path: Path) -> None:
    """With only 2026-07-28 servers behind it, moniker's lists carry the smallest `ttlMs` of
    theirs (a 2025 server, which says none, would make it 0)."""
    config = tmp_path / "ttl.yaml"
    config.write_text(
        f"""servers:
  local:
    command: "{sys.executable}"
    args: ["{HERE / 'modern_server.py'}", stdio]
    env: {{ MODERN_SERVER_LIST_TTL_MS: "30000" }}
    protocol: 2026-07-28
  other:
    command: "{sys.executable}"
    args: ["{HERE / 'modern_server.py'}", stdio]
    env: {{ MODERN_SERVER_LIST_TTL_MS: "45000" }}
    protocol: 2026-07-28
    prefix: other
"""
    )

    async def run() -> None:
        with anyio.fail_after(30):
            params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)])
            async with Client(params, mode="2026-07-28") as client:
                # Once both servers have joined, the smaller time is said; before (a server
                # still starting), 0: the listing will change, nothing is to be cached yet.
                with anyio.fail_after(20):
                    while (listed := await client.list_tools()).ttl_ms != 30000:
                        assert listed.ttl_ms == 0, listed
                        await anyio.sleep(0.1)

    anyio.run(run)


def test_a_server_that_refuses_the_handshake_is_spoken_to_in_2026(tmp_path: Path, modern_url: str) -> None:
    """No `protocol` in the config: moniker tries the 2025 handshake, the server refuses it with
    -32022 naming 2026-07-28, and moniker speaks 2026-07-28 to it (stdio and HTTP)."""
    config = tmp_path / "found.yaml"
    config.write_text(
        f"""servers:
  modern:
    url: "{modern_url}"
  local:
    command: "{sys.executable}"
    args: ["{HERE / 'modern_server.py'}", stdio]
    prefix: local
"""
    )

    async def run() -> None:
        with anyio.fail_after(30):
            params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)])
            async with Client(params, mode="2026-07-28") as client:
                await tools_when(client, {"modern_echo", "local_modern_echo"})
                for name in ["modern_echo", "local_modern_echo"]:
                    echoed = await client.call_tool(name, {"text": "found"})
                    assert text_of(echoed) == "modern:found", echoed
                looked = await client.call_tool("modern_region", {"region": "eu-north", "item": "x"})
                assert json.loads(text_of(looked))["header"] == "eu-north", looked

    anyio.run(run)


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_toolset_by_url_over_both_eras(config: Path, tmp_path: Path, mode: str) -> None:
    """`/mcp/mixed`: an action tool of the modern server, an alias of one of its tools and a
    tool of server-everything; nothing else is listed or callable."""
    from mcp.shared.exceptions import MCPError

    with serving_http(config, tmp_path / "serve.log") as (url, _, _):

        async def run() -> None:
            with anyio.fail_after(30):
                async with Client(f"{url}/mixed", mode=mode) as client:
                    tools = await tools_when(client, {"regional", "modern_echo", "echo"})
                    assert tools == {"regional", "modern_echo", "echo"}, tools
                    echoed = await client.call_tool("shout", {"text": "set"})
                    assert text_of(echoed) == "modern:set", echoed
                    looked = await client.call_tool("regional", {"action": "lookup", "region": "us-east", "item": "y"})
                    assert json.loads(text_of(looked))["header"] == "us-east", looked
                    with pytest.raises(MCPError) as outside:
                        await client.call_tool("local_modern_echo", {"text": "no"})
                    assert outside.value.error.code == -32004, outside.value

        anyio.run(run)


async def follow_the_modern_resource(client: Client) -> None:
    """A resource of the 2026-07-28 server: there is no resources/subscribe in that era, so
    moniker follows it on its own `subscriptions/listen` to the server for as long as a client
    of its follows it."""
    from mcp.shared.subscriptions import ResourceUpdated

    uri = "modern://hello"
    async with client.listen(resource_subscriptions=[uri]) as subscription:
        assert list(subscription.honored.resource_subscriptions or []) == [uri], subscription.honored
        with anyio.fail_after(15):
            # The server's listen is opened again with the resource: touch until it is heard.
            while True:
                await client.call_tool("modern_touch", {})
                with anyio.move_on_after(0.5):
                    event = await subscription.__anext__()
                    assert isinstance(event, ResourceUpdated) and event.uri == uri, event
                    break


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_modern_servers_resource_followed(config: Path, tmp_path: Path, transport: str) -> None:
    through(config, tmp_path, transport, follow_the_modern_resource)


def test_a_2025_client_subscribes_to_a_modern_servers_resource(config: Path) -> None:
    """`resources/subscribe` from a 2025 client to a resource of the 2026-07-28 server: moniker
    follows it on its listen to the server, and the updates reach the client as
    `notifications/resources/updated`."""
    import mcp_types as types

    updated = anyio.Event()

    async def on_message(message) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification) and str(root.params.uri) == "modern://hello":
            updated.set()

    async def run() -> None:
        with anyio.fail_after(30):
            params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)])
            async with Client(params, mode="legacy", message_handler=on_message) as client:
                await client.subscribe_resource("modern://hello")
                while not updated.is_set():
                    await client.call_tool("modern_touch", {})
                    with anyio.move_on_after(0.5):
                        await updated.wait()

    anyio.run(run)
