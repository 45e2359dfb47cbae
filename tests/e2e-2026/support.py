"""What the 2026-SDK tests share: the binaries, free ports, and processes started on
127.0.0.1 that are stopped however the test ends."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def binary(name: str) -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    path = target / "debug" / name
    if not path.exists():
        pytest.fail(f"{path} is missing: cargo build --workspace first")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def started(command: list[str], port: int, what: str, log: Path):
    """Runs `command` (its output to `log`) until it takes connections on `port` (20 s at
    most); stops it at the end."""
    handle = open(log, "w")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(f"{what} did not start:\n{log.read_text() if log.exists() else ''}")
                time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        handle.close()


@contextlib.contextmanager
def serving_http(config: Path, log: Path, level: str = "info"):
    """`moniker serve --http` on a free port with `config`: (its /mcp URL, its log, its process)."""
    port = free_port()
    command = [str(binary("moniker")), "serve", "--http", f"127.0.0.1:{port}", "-c", str(config), "--log", level]
    with started(command, port, "moniker serve --http", log) as process:
        yield f"http://127.0.0.1:{port}/mcp", log, process


async def tools_when(client, wanted: set[str], within: float = 30.0) -> set[str]:
    """The names of the client's listing once it has every name in `wanted`, listing again
    until then (`within` seconds at most). A server's tools are listed once it has joined;
    moniker's first listing waits for it only `gateway.list_wait`, which a slow server on a
    loaded machine outlasts (it then joins with `list_changed`)."""
    import anyio

    with anyio.fail_after(within):
        while True:
            names = {t.name for t in (await client.list_tools()).tools}
            if wanted <= names:
                return names
            await anyio.sleep(0.1)
