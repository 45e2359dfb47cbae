"""moniker over Streamable HTTP, driven by the official Python SDK's HTTP client: the same four
servers as test_real_servers.py behind `moniker serve --http`, two sessions at once."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

import scenarios as s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_http(moniker_bin: Path, config: Path, tmp_path: Path, env: dict[str, str]):
    """`moniker serve --http` with `config` on a free port, once `/healthz` answers: its
    `/mcp` URL, then it is stopped."""
    port = free_port()
    log_path = tmp_path / f"{config.stem}-http.stderr"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [str(moniker_bin), "serve", "--http", f"127.0.0.1:{port}", "-c", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={"PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(tmp_path), **env},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f"{base}/healthz", timeout=1).read()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError(f"moniker --http did not come up: {log_path.read_text()}")
            time.sleep(0.1)
    yield f"{base}/mcp"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture
def moniker_http(moniker_bin: Path, gateway_config: Path, tmp_path: Path, memory_file: Path):
    yield from serve_http(moniker_bin, gateway_config, tmp_path, {"MEMORY_FILE_PATH": str(memory_file)})


@asynccontextmanager
async def session_at(url: str):
    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def test_list_and_call_by_alias_over_http(moniker_http: str) -> None:
    async with session_at(moniker_http) as session:
        tools = {tool.name: tool for tool in await s.list_all_tools(session)}
        assert {"fixture_echo", "echo", "read_text_file", "create_entities"} <= set(tools)
        assert s.extras(tools["read_text_file"])["aliases"] == ["cat"]
        by_name = await session.call_tool("echo", {"message": "over http"})
        assert not by_name.isError and "over http" in by_name.content[0].text
        by_alias = await session.call_tool("cat", {"path": "hello.txt"})
        by_canonical = await session.call_tool("read_text_file", {"path": "hello.txt"})
        assert by_alias.content == by_canonical.content
        with pytest.raises(McpError) as refused:
            await session.call_tool("nonexistent_tool", {})
        assert refused.value.error.code == -32004


async def test_progress_reaches_the_http_client(moniker_http: str) -> None:
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with session_at(moniker_http) as session:
        result = await session.call_tool(s.EVERYTHING_LONG_RUNNING, {"duration": 1, "steps": 4}, progress_callback=progress)
        assert not result.isError
    assert seen, "no progress notification reached the client"


async def test_two_sessions_at_once(moniker_http: str) -> None:
    async with session_at(moniker_http) as a, session_at(moniker_http) as b:
        ra = await a.call_tool("echo", {"message": "from a"})
        rb = await b.call_tool("echo", {"message": "from b"})
        assert "from a" in ra.content[0].text and "from b" in rb.content[0].text


@pytest.fixture
def moniker_http_tokens(moniker_bin: Path, write_config, server_specs, tmp_path: Path):
    """`moniker serve --http` with two tokens, alice's and bob's."""
    config = write_config({"servers": {"everything": server_specs["everything"]}, "http": {"tokens": [ALICE, BOB]}}, name="tokens.yaml")
    yield from serve_http(moniker_bin, config, tmp_path, {})


ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"


async def until_listed(session: ClientSession, name: str) -> None:
    """Waits (30 s at most) until `name` is listed: its server has come up (on a loaded
    machine, npx's `everything` may come up after `/healthz` answers)."""
    deadline = time.time() + 30
    while name not in {t.name for t in (await session.list_tools()).tools}:
        assert time.time() < deadline, f"{name} never listed"
        await anyio.sleep(0.2)


async def test_a_task_is_its_token_s_in_every_session_of_it(moniker_http_tokens: str) -> None:
    """Hold the boundary, round three: with a token, a task is the token's (its principal's),
    not one session's: another session of the token reaches it, and the token's budget of
    tasks counts every session of it (before, each session counted as a principal of its own,
    so one token's thousand sessions could push out another token's tasks). Another token
    still cannot reach it."""
    import mcp.types as types

    async with s.bearer_session(moniker_http_tokens, ALICE) as a1, s.bearer_session(moniker_http_tokens, ALICE) as a2, s.bearer_session(moniker_http_tokens, BOB) as b:
        await until_listed(a1, "simulate-research-query")
        created = await a1.experimental.call_tool_as_task("simulate-research-query", {"topic": "mine"})
        task_id = created.task.taskId
        status = await a2.experimental.get_task(task_id)
        assert status.taskId == task_id
        assert task_id in [t.taskId for t in (await a2.experimental.list_tasks()).tasks]
        with pytest.raises(McpError) as refused:
            await b.experimental.get_task_result(task_id, types.CallToolResult)
        assert refused.value.error.code == -32602 and "unknown task" in refused.value.error.message
        assert task_id not in [t.taskId for t in (await b.experimental.list_tasks()).tasks]


async def test_a_task_is_its_starters_alone(moniker_http: str) -> None:
    """Hold the boundary, finding 12: a task belongs to the session that started it. Another
    client of the same endpoint (same toolset, same lack of a token) can neither read, fetch,
    cancel nor list it."""
    import mcp.types as types

    async with session_at(moniker_http) as a, session_at(moniker_http) as b:
        await until_listed(a, "simulate-research-query")
        created = await a.experimental.call_tool_as_task("simulate-research-query", {"topic": "mine"})
        task_id = created.task.taskId
        assert task_id.startswith("everything/"), task_id
        for attempt in (
            lambda: b.experimental.get_task(task_id),
            lambda: b.experimental.get_task_result(task_id, types.CallToolResult),
            lambda: b.experimental.cancel_task(task_id),
        ):
            with pytest.raises(McpError) as refused:
                await attempt()
            assert refused.value.error.code == -32602 and "unknown task" in refused.value.error.message
        listed = await b.experimental.list_tasks()
        assert task_id not in [t.taskId for t in listed.tasks], listed
        # The starter still reaches it.
        status = await a.experimental.get_task(task_id)
        assert status.taskId == task_id
        listed = await a.experimental.list_tasks()
        assert task_id in [t.taskId for t in listed.tasks], listed
