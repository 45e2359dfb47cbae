"""Live config reload of `moniker serve`, with the official Python SDK in one session kept open
throughout: an alias added to the file is announced (`tools/list_changed`) and answers; a broken
file changes nothing (the old surface answers, the log names the error with its line and
column); fixed, it applies; a server added and one removed live; one server's args changed
restarts that server only (the other's process id is unchanged)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

pytestmark = pytest.mark.anyio

WAIT = 15  # seconds for a reload to show


def inventory(tmp_path: Path, name: str) -> Path:
    """A one-tool inventory for moniker-fixture: tool `<name>_echo`, answered with its arguments."""
    path = tmp_path / f"{name}.json"
    path.write_text(
        json.dumps(
            {
                "serverInfo": {"name": name, "version": "1"},
                "tools": [
                    {
                        "name": f"{name}_echo",
                        "description": f"Echo of server {name}.",
                        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                    }
                ],
            }
        )
    )
    return path


def fixture_pids(marker: Path) -> list[int]:
    """Process ids of moniker-fixture processes serving the inventory `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"moniker-fixture") and str(marker).encode() in argv:
            pids.append(int(entry.name))
    return pids


async def tool_names(session) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def until(what: str, check) -> Any:
    """Polls `check` (async) until it returns something truthy, within WAIT seconds."""
    with anyio.fail_after(WAIT):
        while True:
            got = await check()
            if got:
                return got
            await anyio.sleep(0.1)
    pytest.fail(f"never: {what}")


def text_of(result) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_config_edits_apply_live_without_a_restart(
    moniker, fixture_bin: Path, write_config, tmp_path: Path
) -> None:
    a, b, c = (inventory(tmp_path, n) for n in ("alpha", "beta", "gamma"))

    def server(inv: Path, *extra: str) -> dict[str, Any]:
        return {"command": str(fixture_bin), "args": [str(inv), "--echo", *extra]}

    config: dict[str, Any] = {"servers": {"alpha": server(a), "beta": server(b)}}
    path = write_config(config)
    changed = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            changed.set()

    stderr = tmp_path / "moniker.stderr"
    async with moniker(path, stderr_path=stderr, message_handler=on_message, env={"RUST_LOG": "info"}) as session:
        assert await tool_names(session) == {"alpha_echo", "beta_echo"}
        alpha_pid = fixture_pids(a)
        beta_pid = fixture_pids(b)
        assert len(alpha_pid) == 1 and len(beta_pid) == 1, (alpha_pid, beta_pid)

        # 1. An alias added to the file: announced, and it answers.
        config["tools"] = {"alpha_echo": {"aliases": ["say"]}}
        write_config(config)
        with anyio.fail_after(WAIT):
            await changed.wait()
        changed = anyio.Event()
        said = await session.call_tool("say", {"text": "hi"})
        assert not said.isError and "hi" in text_of(said), said

        # 2. A broken file: nothing changes, the log says where.
        path.write_text(path.read_text() + "tools: [oops\n")
        await until(
            "the refused reload in the log",
            lambda: anyio.to_thread.run_sync(lambda: "config reload refused" in stderr.read_text()),
        )
        log = stderr.read_text()
        assert re.search(r"moniker\.yaml:\d+:\d+", log), log[-2000:]
        still = await session.call_tool("say", {"text": "still"})
        assert not still.isError and "still" in text_of(still), still

        # 3. Fixed, with a server added and one removed.
        config["servers"] = {"alpha": server(a), "gamma": server(c)}
        write_config(config)
        with anyio.fail_after(WAIT):
            await changed.wait()
        changed = anyio.Event()

        async def gamma_there() -> bool:
            return await tool_names(session) == {"alpha_echo", "gamma_echo"}

        await until("gamma listed and beta gone", gamma_there)
        assert fixture_pids(b) == [] or await until("beta stopped", lambda: anyio.to_thread.run_sync(lambda: fixture_pids(b) == []))
        gamma = await session.call_tool("gamma_echo", {"text": "new"})
        assert "new" in text_of(gamma), gamma

        # 4. One server's args changed: only it restarts.
        gamma_pid = fixture_pids(c)
        config["servers"]["alpha"] = server(a, "--delay-ms", "1")
        write_config(config)

        async def alpha_restarted() -> bool:
            pids = await anyio.to_thread.run_sync(lambda: fixture_pids(a))
            return len(pids) == 1 and pids != alpha_pid

        await until("alpha restarted with its new args", alpha_restarted)
        assert fixture_pids(c) == gamma_pid, "gamma was restarted though its config did not change"

        async def alpha_answers() -> bool:
            result = await session.call_tool("say", {"text": "back"})
            return not result.isError and "back" in text_of(result)

        await until("the alias answers after alpha's restart", alpha_answers)
