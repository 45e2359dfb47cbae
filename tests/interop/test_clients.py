"""Four MCP client stacks besides the official SDKs list and call through moniker, over stdio and
Streamable HTTP, in list and search mode: one test per cell of MATRIX.md.

Behind moniker: moniker-fixture serving fixtures/contextgraph.json (35 tools), with the alias
`discover_goals` of `discover_sub_goals` in moniker's config. The fixture answers a call with
`{"tool": <origin name>, "arguments": <the arguments>}` as text, so each result says which tool
was reached and with what.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import matrix
from clients import OPENERS, Client, Target
from conftest import ALIAS, DEADLINE, PINNED, TOOL, tail, write_config

QUERY = "propose sub-goals under the north star"
CLEANUP = 10.0  # seconds for a client to wind down after its deadline


def answer(arguments: dict[str, Any]) -> dict[str, Any]:
    """The fixture's answer to a call of TOOL with these arguments."""
    return {"tool": TOOL, "arguments": arguments}


async def list_mode(client: Client, inventory_names: list[str]) -> None:
    names = await client.list_tools()
    assert sorted(names) == inventory_names, "list mode lists every tool of the fixture, aliases not as tools"
    assert len(names) == len(set(names)), f"a name listed twice: {names}"
    # The listed tool, through the stack's own tool object.
    assert await client.call(TOOL, {"max_goals": 3}) == answer({"max_goals": 3})
    # Its alias: not listed, callable all the same.
    assert await client.call(ALIAS, {"max_goals": 2}) == answer({"max_goals": 2})


async def search_mode(client: Client) -> None:
    names = await client.list_tools()
    assert sorted(names) == sorted([PINNED, "search_tools", "call_tool"]), (
        "search mode lists the pinned tool and moniker's search_tools and call_tool"
    )
    found = await client.call("search_tools", {"query": QUERY})
    # A compact line each, best first: `- name(parameters) [server]: what it does`.
    ranked = [line[2:].split("(")[0] for line in str(found).splitlines() if line.startswith("- ")]
    assert ranked, f"search_tools found nothing for {QUERY!r}: {found}"
    assert ranked[0] == TOOL, f"search_tools ranked {ranked} for {QUERY!r}"
    # Its exact name gives its full definition.
    best = (await client.call("search_tools", {"query": TOOL}))["tools"][0]
    assert best["name"] == TOOL, best
    assert ALIAS in best.get("aliases", []), f"the found tool's definition lacks its alias: {best}"
    assert "inputSchema" in best, f"search_tools gave no inputSchema: {best}"
    # The found name, then the alias, through call_tool.
    got = await client.call("call_tool", {"name": best["name"], "arguments": {"max_goals": 3}})
    assert got == answer({"max_goals": 3})
    got = await client.call("call_tool", {"name": ALIAS, "arguments": {"max_goals": 2}})
    assert got == answer({"max_goals": 2})


async def scenario(stack: str, target: Target, mode: str, inventory_names: list[str]) -> None:
    async with OPENERS[stack](target) as client:
        if mode == "list":
            await list_mode(client, inventory_names)
        else:
            await search_mode(client)


def run(coro) -> None:
    """Runs the scenario on a loop of its own, within DEADLINE; then gives a cancelled one, and
    whatever tasks a client left behind, CLEANUP seconds to end, and closes the loop whatever they
    do (a client whose cleanup hangs leaves processes: no_process_left kills them, the test fails)."""
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(coro)
        done, _ = loop.run_until_complete(asyncio.wait({task}, timeout=DEADLINE))
        if not done:
            task.cancel()
            loop.run_until_complete(asyncio.wait({task}, timeout=CLEANUP))
            raise TimeoutError(f"the client's work did not end within {DEADLINE:g}s")
        task.result()
    finally:
        left = asyncio.all_tasks(loop)
        for t in left:
            t.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=CLEANUP))
        loop.run_until_complete(asyncio.wait({loop.create_task(loop.shutdown_asyncgens())}, timeout=CLEANUP))
        loop.close()


STACK_IDS = [s["id"] for s in matrix.STACKS]


@pytest.mark.parametrize("mode", [m for m, _ in matrix.MODES])
@pytest.mark.parametrize("transport", [t for t, _ in matrix.TRANSPORTS])
@pytest.mark.parametrize("stack", STACK_IDS)
def test_client(
    stack: str,
    transport: str,
    mode: str,
    cell,
    world: Path,
    moniker_env: dict[str, str],
    moniker_bin: Path,
    fixture_bin: Path,
    http_moniker,
    inventory_names: list[str],
) -> None:
    cell(stack, transport, mode)
    config = write_config(world, fixture_bin, mode)
    log: Path | None = None
    if transport == "stdio":
        target = Target(
            "stdio",
            command=str(moniker_bin),
            args=["serve", "-c", str(config)],
            env=moniker_env,
            stderr_log=world / "moniker-stdio.log",
        )
    else:
        server = http_moniker(config, moniker_env)
        target = Target("http", url=server.url)
        log = server.log
    try:
        run(scenario(stack, target, mode, inventory_names))
    except BaseException as e:
        if log is not None and not isinstance(e, KeyboardInterrupt):
            e.add_note(f"--- moniker serve --http's log ({log}) ---\n{tail(log) or '(empty)'}")
        raise
