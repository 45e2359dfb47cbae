"""The lock's integrity against a real server's own history: server-everything 2025.11.25
(serverInfo 1.0.0) locked, then 2026.8.31 (2.0.0) run in its place. Between the two releases
`echo` kept its name but its description, annotations and schema changed; `add` became
`get-sum`, `longRunningOperation` became `trigger-long-running-operation`, and so on.

`moniker lock --diff` names every change; under `integrity: block` the changed and new tools
stay out (not listed, their calls refused with the command that accepts them) until
`moniker lock --accept`; under `warn` they are served and said by `doctor`. A tool that
appears live (a server's list_changed) is caught at once."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import McpError

import scenarios as s
from conftest import npm_entry

OLD = "server-everything-2025"
NEW = "@modelcontextprotocol/server-everything"


def lock_cli(moniker_bin: Path, config: Path, *args: str) -> str:
    done = subprocess.run(
        [str(moniker_bin), "lock", "-c", str(config), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RUST_BACKTRACE": "1"},
    )
    assert done.returncode == 0, f"moniker lock {args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def everything(node_bin: Path, package: str) -> dict[str, Any]:
    return {"command": str(node_bin), "args": [str(npm_entry(package)), "stdio"]}


async def test_a_changed_tool_is_shown_blocked_then_accepted(moniker, moniker_bin: Path, node_bin: Path, write_config) -> None:
    config = write_config({"servers": {"everything": everything(node_bin, OLD)}, "integrity": "block"})
    wrote = lock_cli(moniker_bin, config)
    assert "wrote" in wrote, wrote
    lock_text = (config.parent / "moniker.lock").read_text()
    assert '  version "1.0.0"' in lock_text and '  description "Echoes back the input"' in lock_text, lock_text

    # The server is upgraded in place.
    write_config({"servers": {"everything": everything(node_bin, NEW)}, "integrity": "block"})
    diff = lock_cli(moniker_bin, config, "--diff")
    assert "tool `echo` (server `everything`): description, annotations, input, other changed" in diff, diff
    assert "server version: 1.0.0 -> 2.0.0" in diff, diff
    assert "description: Echoes back the input{+ string+}" in diff, diff
    assert "annotation readOnlyHint: (none) -> true" in diff, diff
    assert "annotation destructiveHint: (none) -> false" in diff, diff
    assert '-   "additionalProperties": false,' in diff, diff
    assert "tool `get-sum` (server `everything`): new since the lock" in diff, diff
    assert "- tool add server=everything" in diff, "the gone name is in the names' diff"
    assert "likely renamed" not in diff, "no parameter of echo was renamed in this history"
    assert "(not written)" in diff
    assert (config.parent / "moniker.lock").read_text() == lock_text, "--diff writes nothing"

    async with moniker(config) as session:
        listed = [t.name for t in (await session.list_tools()).tools]
        echo = await session.call_tool("echo", {"message": "hi"})
    assert listed == [], f"every tool of 2.0.0 changed or is new: {listed}"
    assert echo.isError, s.dump(echo)
    refusal = s.texts(echo)[0]
    assert "changed since moniker.lock: description, annotations, input" in refusal, refusal
    assert "moniker lock --accept echo" in refusal, refusal

    # One surface for every path: `moniker call` and `moniker list` take the same decision.
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(moniker_bin), *args, "-c", str(config)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
        )

    called = cli("call", "echo", '{"message": "hi"}')
    assert called.returncode != 0, called.stdout
    assert "moniker lock --accept echo" in called.stdout + called.stderr, called.stdout + called.stderr
    rows = {row["name"]: row for row in json.loads(cli("list", "--json").stdout)}
    assert rows["echo"]["kind"] == "withheld" and not rows["echo"]["listed"], rows["echo"]
    assert "changed since moniker.lock" in rows["echo"]["withheld"], rows["echo"]

    accepted = lock_cli(moniker_bin, config, "--accept", "echo")
    assert "wrote" in accepted, accepted
    after = (config.parent / "moniker.lock").read_text()
    assert '  description "Echoes back the input string"' in after, after
    assert "tool add server=everything" in after, "every other entry is kept as it was"
    async with moniker(config) as session:
        listed = [t.name for t in (await session.list_tools()).tools]
        echo = await session.call_tool("echo", {"message": "hi"})
        still = await session.call_tool("get-sum", {"a": 1, "b": 2})
    assert listed == ["echo"], listed
    assert not echo.isError and s.texts(echo) == ["Echo: hi"], s.dump(echo)
    assert still.isError and "moniker lock --accept get-sum" in s.texts(still)[0], s.dump(still)


async def test_under_warn_changes_are_served_and_said(moniker, moniker_bin: Path, node_bin: Path, write_config) -> None:
    # The old name keeps working through an alias of the renamed tool (the fix `moniker check` gives).
    config = write_config({"servers": {"everything": everything(node_bin, OLD)}})
    lock_cli(moniker_bin, config)
    write_config({"servers": {"everything": everything(node_bin, NEW)}, "tools": {"get-sum": {"aliases": ["add"]}}})
    async with moniker(config) as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        summed = await session.call_tool("add", {"a": 1, "b": 2})
    assert {"echo", "get-sum"} <= listed, listed
    assert not summed.isError and "3" in s.texts(summed)[0], s.dump(summed)
    done = subprocess.run(
        [str(moniker_bin), "doctor", "-c", str(config)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    out = done.stdout + done.stderr
    assert "CHANGED" in out and "tool `echo` of server `everything` changed since moniker.lock" in out, out
    assert "served (integrity: warn)" in out and "moniker lock --accept echo" in out, out


async def test_integrity_changed_alone_in_the_file_applies_live(moniker, moniker_bin: Path, node_bin: Path, write_config) -> None:
    # A reload that changes `integrity` and nothing else was once taken for no change at all.
    config = write_config({"servers": {"everything": everything(node_bin, OLD)}})
    lock_cli(moniker_bin, config)
    write_config({"servers": {"everything": everything(node_bin, NEW)}})
    async with moniker(config) as session:
        served = {t.name for t in (await session.list_tools()).tools}
        assert "echo" in served, served  # warn: served, and said
        write_config({"servers": {"everything": everything(node_bin, NEW)}, "integrity": "block"})
        listed = served
        with anyio.fail_after(30):
            while listed:
                await anyio.sleep(0.1)
                listed = {t.name for t in (await session.list_tools()).tools}
        echo = await session.call_tool("echo", {"message": "hi"})
    assert echo.isError and "moniker lock --accept echo" in s.texts(echo)[0], s.dump(echo)


async def test_a_tool_that_appears_live_is_withheld_at_once(moniker, moniker_bin: Path, fixture_bin: Path, write_config) -> None:
    config = write_config({"servers": {"fix": {"command": str(fixture_bin), "args": ["--toggle-tool-each-call"]}}, "integrity": "block"})
    lock_cli(moniker_bin, config)
    async with moniker(config) as session:
        before = [t.name for t in (await session.list_tools()).tools]
        first = await session.call_tool("echo", {"text": "x"})  # the server adds fixture_added_tool
        added = None
        for _ in range(100):
            try:
                added = await session.call_tool("fixture_added_tool", {})
                break
            except McpError:  # not known yet: its list_changed is on its way
                await anyio.sleep(0.05)
        after = [t.name for t in (await session.list_tools()).tools]
    assert not first.isError, s.dump(first)
    assert "fixture_added_tool" not in before and "fixture_added_tool" not in after, after
    assert sorted(after) == sorted(before), (before, after)
    assert added is not None, "the added tool never became known"
    assert added.isError and "moniker lock --accept fixture_added_tool" in s.texts(added)[0], s.dump(added)


def test_healthz_says_each_changed_tool(moniker_bin: Path, node_bin: Path, write_config, tmp_path: Path) -> None:
    import socket
    import time
    import urllib.request

    config = write_config({"servers": {"everything": everything(node_bin, OLD)}})
    lock_cli(moniker_bin, config)
    write_config({"servers": {"everything": everything(node_bin, NEW)}})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = open(tmp_path / "http.stderr", "w")
    proc = subprocess.Popen(
        [str(moniker_bin), "serve", "--http", f"127.0.0.1:{port}", "-c", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path)},
    )
    health = ""
    try:
        deadline = time.time() + 30
        while "changed since moniker.lock" not in health and time.time() < deadline:
            try:
                health = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read().decode()
            except OSError:
                pass
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
    assert "tool `echo` of server `everything` changed since moniker.lock: description, annotations, input, other; served (integrity: warn)" in health, health
    assert "tool `get-sum` of server `everything` is not in moniker.lock; served (integrity: warn)" in health, health
