"""moniker in front of a 2025 server, for the official Python SDK's client in each mode:
`2026-07-28` (stateless: per-request `_meta`, no initialize, no session), `auto` (probes with
`server/discover`) and `legacy` (the 2025 handshake); over stdio and over Streamable HTTP.
Lists, calls by name and by alias, and an action tool.

The server behind moniker is the repo's moniker-fixture (a 2025 stdio server) serving the
ContextGraph inventory: moniker translates between the eras."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from support import ROOT, binary, serving_http

MODES = ["2026-07-28", "auto", "legacy"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "moniker.yaml"
    path.write_text(
        f"""servers:
  cg:
    command: "{binary('moniker-fixture')}"
    args: ["{ROOT / 'fixtures' / 'contextgraph.json'}", --echo]
tools:
  discover_sub_goals: {{ aliases: [discover_goals] }}
actions:
  goals:
    tools: {{ discover: discover_sub_goals }}
toolsets:
  memory:
    tools: [store_memory, abort_dream]
"""
    )
    return path


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def exercise(client: Client) -> None:
    tools = {t.name for t in (await client.list_tools()).tools}
    # The member of the action tool is listed through it; its own name and alias still answer.
    assert "goals" in tools and "discover_sub_goals" not in tools, sorted(tools)[:10]
    by_name = await client.call_tool("discover_sub_goals", {"max_goals": 11})
    assert not by_name.is_error and "11" in text_of(by_name), by_name
    by_alias = await client.call_tool("discover_goals", {"max_goals": 12})
    assert not by_alias.is_error and "12" in text_of(by_alias), by_alias
    action = await client.call_tool("goals", {"action": "discover", "max_goals": 13})
    assert not action.is_error and "13" in text_of(action), action


@pytest.mark.parametrize("mode", MODES)
def test_over_stdio(config: Path, mode: str) -> None:
    params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)])

    async def run() -> None:
        with anyio.fail_after(30):
            async with Client(params, mode=mode) as client:
                await exercise(client)

    anyio.run(run)


@pytest.fixture
def http_url(config: Path, tmp_path: Path):
    with serving_http(config, tmp_path / "serve.log") as (url, log, _):
        yield url, log


@pytest.mark.parametrize("mode", MODES)
def test_over_http(http_url, mode: str) -> None:
    url, log = http_url

    async def run() -> None:
        with anyio.fail_after(30):
            async with Client(url, mode=mode) as client:
                await exercise(client)

    anyio.run(run)
    sessions = log.read_text().count("HTTP session started")
    # A 2026-07-28 client never opens a session; a legacy one does.
    assert sessions == (1 if mode == "legacy" else 0), log.read_text()[-2000:]


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_toolset_by_url(http_url, mode: str) -> None:
    """`/mcp/<toolset>`: the client sees and calls only that toolset, whatever its mode."""
    url, _ = http_url

    async def run() -> None:
        with anyio.fail_after(30):
            async with Client(f"{url}/memory", mode=mode) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert tools == {"store_memory", "abort_dream"}, tools
                with pytest.raises(MCPError) as outside:
                    await client.call_tool("goals", {"action": "discover"})
                assert outside.value.error.code == -32004, outside.value

    anyio.run(run)


@pytest.fixture
def changing_config(tmp_path: Path) -> Path:
    """One server whose tool list grows after its first call (and which says so)."""
    path = tmp_path / "changing.yaml"
    path.write_text(
        f"""servers:
  fx:
    command: "{binary('moniker-fixture')}"
    args: [--list-changed-after, "1"]
"""
    )
    return path


async def see_a_list_change(client: Client) -> None:
    from mcp.shared.subscriptions import ToolsListChanged

    async with client.listen(tools_list_changed=True) as subscription:
        assert subscription.honored.tools_list_changed, subscription.honored
        before = {t.name for t in (await client.list_tools()).tools}
        assert "fixture_added_tool" not in before, before
        await client.call_tool("echo", {"text": "change"})
        with anyio.fail_after(10):
            event = await subscription.__anext__()
        assert isinstance(event, ToolsListChanged), event
    after = {t.name for t in (await client.list_tools()).tools}
    assert "fixture_added_tool" in after, after


def test_subscriptions_listen_over_stdio(changing_config: Path) -> None:
    params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(changing_config)])

    async def run() -> None:
        with anyio.fail_after(30):
            async with Client(params, mode="2026-07-28") as client:
                await see_a_list_change(client)

    anyio.run(run)


def test_subscriptions_listen_over_http(changing_config: Path, tmp_path: Path) -> None:
    with serving_http(changing_config, tmp_path / "serve.log") as (url, _, _):

        async def run() -> None:
            with anyio.fail_after(30):
                async with Client(url, mode="2026-07-28") as client:
                    await see_a_list_change(client)

        anyio.run(run)


@pytest.fixture
def sampling_config(tmp_path: Path) -> Path:
    """One 2025 server whose tool `fixture_sample` asks its client for sampling mid-call."""
    path = tmp_path / "sampling.yaml"
    path.write_text(
        f"""servers:
  fx:
    command: "{binary('moniker-fixture')}"
    args: [--sample-tool]
"""
    )
    return path


async def sample_through(client_factory) -> None:
    import mcp_types as types

    asked: list[str] = []

    async def sampling(context, params) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled by the 2026 client"),
            model="test-model",
            stop_reason="endTurn",
        )

    async with client_factory(sampling) as client:
        result = await client.call_tool("fixture_sample", {})
        assert not result.is_error, result
        assert "sampled by the 2026 client" in text_of(result), result
    assert asked, "the client's sampling callback was never asked"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_2025_servers_sampling_reaches_a_2026_client_as_input_required(
    sampling_config: Path, tmp_path: Path, transport: str
) -> None:
    async def run(url_or_params) -> None:
        with anyio.fail_after(30):
            await sample_through(
                lambda sampling: Client(url_or_params, mode="2026-07-28", sampling_callback=sampling)
            )

    if transport == "stdio":
        params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(sampling_config)])
        anyio.run(run, params)
    else:
        with serving_http(sampling_config, tmp_path / "serve.log") as (url, _, _):
            anyio.run(run, url)


def test_a_client_without_sampling_is_not_asked(sampling_config: Path) -> None:
    """A 2026-07-28 client that declares no sampling capability never gets an input-required
    result for it: moniker refuses the server's request as such a 2025 client would, and when
    the call fails for want of it, the client gets what the 2026-07-28 era prescribes: -32021
    with `requiredCapabilities` naming sampling ("Hold the boundary, round two", finding 14)."""
    params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(sampling_config)])

    async def run() -> None:
        with anyio.fail_after(30):
            async with Client(params, mode="2026-07-28") as client:
                try:
                    result = await client.call_tool("fixture_sample", {})
                except MCPError as error:
                    assert error.code == -32021, error
                    assert (error.data or {}).get("requiredCapabilities") == {"sampling": {}}, error.data
                else:
                    raise AssertionError(f"a call that needed sampling answered: {result}")

    anyio.run(run)


def test_concurrent_calls_each_get_their_own_servers_input_requests(tmp_path: Path) -> None:
    """Two 2026-07-28 calls at once on one stdio session, each to a 2025 server that asks for
    sampling mid-call: each call's input-required result holds its own server's request, and
    both finish with their own answer."""
    import mcp_types as types

    config = tmp_path / "two.yaml"
    config.write_text(
        f"""servers:
  one:
    command: "{binary('moniker-fixture')}"
    args: [--sample-tool]
    prefix: one
  two:
    command: "{binary('moniker-fixture')}"
    args: [--sample-tool]
    prefix: two
"""
    )
    asked: list[str] = []

    async def sampling(context, params) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)
        await anyio.sleep(0.2)  # both calls are waiting for their input at once
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"answer {len(asked)}"),
            model="test-model",
            stop_reason="endTurn",
        )

    params = StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(config)])
    results: dict[str, str] = {}

    async def run() -> None:
        with anyio.fail_after(30):
            async with Client(params, mode="2026-07-28", sampling_callback=sampling) as client:

                async def call(name: str) -> None:
                    result = await client.call_tool(name, {})
                    assert not result.is_error, result
                    results[name] = text_of(result)

                async with anyio.create_task_group() as group:
                    group.start_soon(call, "one_fixture_sample")
                    group.start_soon(call, "two_fixture_sample")

    anyio.run(run)
    assert set(results) == {"one_fixture_sample", "two_fixture_sample"}, results
    assert all("answer" in text for text in results.values()), results
    assert len(asked) == 2, asked


def test_a_2025_server_asking_twice_in_one_call(sampling_config: Path, tmp_path: Path) -> None:
    """Two rounds of input in one call: the server asks again after the first answer, and the
    2026-07-28 client gets a second input-required result for the same call."""
    import mcp_types as types

    asked: list[str] = []

    async def sampling(context, params) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"round {len(asked)}"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def run(target) -> None:
        with anyio.fail_after(30):
            async with Client(target, mode="2026-07-28", sampling_callback=sampling) as client:
                result = await client.call_tool("fixture_sample", {"rounds": 2})
                assert not result.is_error, result
                assert text_of(result).count('"text":"round ') == 2, result

    anyio.run(run, StdioServerParameters(command=str(binary("moniker")), args=["serve", "-c", str(sampling_config)]))
    with serving_http(sampling_config, tmp_path / "serve.log") as (url, _, _):
        anyio.run(run, url)
    assert len(asked) == 4, asked
