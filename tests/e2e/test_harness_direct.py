"""The harness itself, without moniker: the same SDK session helper against each real server
directly, the same checks test_real_servers.py runs through moniker, and the guarantees that a
misbehaving server fails a test quickly instead of hanging it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import McpError

import scenarios as s
from conftest import SessionFailed


@pytest.fixture
def direct(server_specs: dict[str, dict[str, Any]], mcp_session):
    """direct(server_id, **kw): a session straight to one of the configured servers."""

    def open_direct(server: str, **kwargs: Any):
        spec = server_specs[server]
        return mcp_session(spec["command"], spec["args"], env=spec.get("env"), label=server, **kwargs)

    return open_direct


@pytest.mark.parametrize("server", sorted(s.EXPECTED_TOOLS))
async def test_server_lists_its_tools(direct, server: str) -> None:
    async with direct(server) as session:
        names = {tool.name for tool in await s.list_all_tools(session)}
    missing = s.EXPECTED_TOOLS[server] - names
    assert not missing, f"{server} does not list {sorted(missing)}; it lists {sorted(names)}"


async def test_everything_echo_resource_and_prompts(direct) -> None:
    async with direct("everything") as session:
        await s.check_echo(session)
        await s.check_resource(session)
        await s.check_prompts(session)


async def test_everything_progress(direct) -> None:
    async with direct("everything") as session:
        await s.check_progress(session)


async def test_everything_sampling(direct) -> None:
    sampler = s.Sampler()
    async with direct("everything", sampling_callback=sampler) as session:
        names = {tool.name for tool in await s.list_all_tools(session)}
        assert s.EVERYTHING_SAMPLING in names, sorted(names)
        await s.check_sampling(session, sampler)


async def test_everything_hides_sampling_tool_without_sampling_capability(direct) -> None:
    # Why moniker must declare `sampling` towards its servers for the sampling test to pass.
    async with direct("everything") as session:
        names = {tool.name for tool in await s.list_all_tools(session)}
    assert s.EVERYTHING_SAMPLING not in names


async def test_filesystem_reads_the_test_file(direct, fs_root: Path) -> None:
    async with direct("filesystem") as session:
        result = await session.call_tool(s.FILESYSTEM_READ, {"path": str(fs_root / "hello.txt")})
    assert not result.isError, s.dump(result)
    assert s.texts(result) == ["hello from moniker e2e\nsecond line\n"], s.dump(result)


async def test_memory_roundtrip(direct, memory_file: Path) -> None:
    async with direct("memory") as session:
        await s.check_memory_roundtrip(session)
    assert memory_file.is_file(), "the memory server did not write MEMORY_FILE_PATH"


async def test_fixture_echo(direct) -> None:
    async with direct("fixture") as session:
        result = await session.call_tool(s.FIXTURE_ECHO, {"text": "hi"})
    assert not result.isError, s.dump(result)
    assert s.texts(result) == ['{"text":"hi"}'], s.dump(result)


# --- the harness does not hang -----------------------------------------------------------------


async def test_server_that_exits_fails_fast_with_its_stderr(mcp_session, fixture_bin: Path) -> None:
    started = time.monotonic()
    with pytest.raises(SessionFailed) as failed:
        async with mcp_session(fixture_bin, ["--no-such-switch"]):
            pytest.fail("initialize succeeded against a server that exited")
    assert time.monotonic() - started < 10
    assert "during initialize" in str(failed.value)
    assert "--no-such-switch" in str(failed.value), "the server's stderr should be in the message"


async def test_server_that_never_answers_fails_fast(mcp_session) -> None:
    started = time.monotonic()
    with pytest.raises(SessionFailed) as failed:
        async with mcp_session(sys.executable, ["-c", "import time; time.sleep(600)"], request_timeout=2):
            pytest.fail("initialize succeeded against a silent server")
    assert time.monotonic() - started < 15
    assert "during initialize" in str(failed.value)


async def test_tool_that_never_answers_times_out(mcp_session, fixture_bin: Path) -> None:
    async with mcp_session(fixture_bin, ["--hang-tools", "echo"], request_timeout=2) as session:
        started = time.monotonic()
        with pytest.raises(McpError) as timed_out:
            await session.call_tool("echo", {"text": "never answered"})
        assert time.monotonic() - started < 10
        assert "Timed out" in str(timed_out.value)
        await session.send_ping()  # the session is still usable


async def test_session_deadline_stops_a_slow_test(mcp_session, fixture_bin: Path) -> None:
    started = time.monotonic()
    with pytest.raises(SessionFailed) as failed:
        async with mcp_session(fixture_bin, ["--delay-ms", "60000"], session_timeout=3) as session:
            await session.call_tool("echo", {"text": "slow"})
    assert time.monotonic() - started < 15
    assert "deadline during session" in str(failed.value)


async def test_test_errors_come_out_unwrapped(mcp_session, fixture_bin: Path) -> None:
    with pytest.raises(ZeroDivisionError):
        async with mcp_session(fixture_bin, []):
            1 / 0  # noqa: B018
