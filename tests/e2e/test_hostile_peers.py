"""Round three of the boundary: what a server or a stdio client can make moniker hold, each kind
of peer with its own limit (the guide's "Budgets" table). `moniker serve` over stdio, a raw
client on its pipes, and `servers/hostile_server.py` as the servers:

- a server's stderr line without end is skipped past 16 KiB, not held (moniker stays small);
- a server's stderr line that is not UTF-8 is logged with replacement characters, and its
  stderr is read on (before, moniker stopped reading it, and the server's next log line got
  EPIPE, or SIGPIPE);
- what a client sends to servers that read nothing is held to 16 MiB a server: then notes
  are dropped and calls refused;
- a stdio client that reads none of its answers has its session ended at 64 MiB;
- a server's requests to the client: 64 unanswered at most, ids of 1 KiB at most, the rest
  refused at once (`-32043`);
- a server whose relists fail with a huge error: its error is cut, and said 10 times;
- a server's tool under one of moniker's own names is refused (`naming::duplicate`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HOSTILE = Path(__file__).parent / "servers" / "hostile_server.py"
MIB = 1024 * 1024


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def hostile(mode: str, out: Path, **env: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(HOSTILE)],
        "env": {"HOSTILE": mode, "HOSTILE_OUT": str(out), **env},
    }


class Gate:
    """`moniker serve` over stdio with `servers`; its log in `log`."""

    def __init__(self, moniker_bin: Path, tmp_path: Path, write_config, servers: dict[str, Any], log: str = "warn") -> None:
        config = write_config({"servers": servers})
        self.log = tmp_path / "moniker.log"
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        }
        self.proc = subprocess.Popen(
            [str(moniker_bin), "serve", "--standalone", "-c", str(config), "--log", log],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log.open("wb"),
            env=env,
        )
        self.next_id = 0

    def write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, f"moniker closed its stdout; log:\n{self.log_text()[-2000:]}"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message

    def initialize(self, capabilities: dict[str, Any] | None = None) -> None:
        answer = self.ask("initialize", {
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "hostile-test", "version": "1"},
        })
        assert "result" in answer, answer
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def log_text(self) -> str:
        return self.log.read_bytes().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def gate(moniker_bin: Path, tmp_path: Path, write_config):
    gates: list[Gate] = []

    def start(servers: dict[str, Any], log: str = "warn") -> Gate:
        g = Gate(moniker_bin, tmp_path, write_config, servers, log)
        gates.append(g)
        return g

    yield start
    for g in gates:
        g.stop()


def wait_for(what, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    return what()


def test_a_stderr_line_without_end_is_skipped_not_held(gate, tmp_path: Path) -> None:
    g = gate({"h": hostile("stderr_endless", tmp_path)}, log="moniker::server=info,warn")
    g.initialize()
    assert g.ask("tools/call", {"name": "echo", "arguments": {}})["result"]["content"][0]["text"] == "ok"
    # The server writes about 100 MiB a second of one line; moniker held it all before (265 MiB
    # a second). Now it reads it through, keeping nothing past 16 KiB.
    time.sleep(3)
    assert rss_mib(g.proc.pid) < 100, f"moniker holds {rss_mib(g.proc.pid):.0f} MiB"
    assert g.ask("tools/call", {"name": "echo", "arguments": {}})["result"]["content"][0]["text"] == "ok"


def test_a_stderr_line_that_is_not_utf8_is_logged_and_stderr_read_on(gate, tmp_path: Path) -> None:
    g = gate({"h": hostile("stderr_not_utf8", tmp_path)}, log="moniker::server=info,warn")
    g.initialize()
    g.ask("tools/call", {"name": "echo", "arguments": {}})
    written = tmp_path / "stderr_written"

    def fifty() -> bool:
        return written.exists() and "then" not in written.read_text() and int(written.read_text()) >= 50

    assert wait_for(fifty), f"the server's stderr: {written.read_text() if written.exists() else 'nothing written'}"
    log = g.log_text()
    assert "a file named caf\ufffd \ufffd\ufffd" in log, log[-2000:]
    assert "log line 49" in log
    # The server was never restarted: no write of its failed.
    assert "disconnected" not in log


def test_notes_to_servers_that_read_nothing_are_held_to_a_budget(gate, tmp_path: Path) -> None:
    servers = {name: hostile("stop_reading", tmp_path) | {"prefix": name} for name in ["a", "b", "c"]}
    g = gate(servers)
    g.initialize()
    assert len(g.ask("tools/list")["result"]["tools"]) == 3
    before = rss_mib(g.proc.pid)
    # 60 notes of 2 MiB each, to each of three servers: 360 MiB held before.
    note = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {"_meta": {"pad": "x" * (2 * MIB)}}}
    for _ in range(60):
        g.write(note)
    # moniker still answers its client, and held at most 16 MiB for each server (and what the
    # pipes and the allocator keep).
    assert g.ask("ping")["result"] == {}
    peak = rss_mib(g.proc.pid)
    assert peak - before < 150, f"moniker went from {before:.0f} to {peak:.0f} MiB"
    assert "the server has not read what was sent to it" in g.log_text()
    # A call to one of them is refused at once, not queued behind what it does not read.
    refused = g.ask("tools/call", {"name": "a_echo", "arguments": {}})
    assert "has not read" in json.dumps(refused), refused


def test_a_stdio_client_that_reads_nothing_has_its_session_ended(gate, tmp_path: Path) -> None:
    tools = ",".join(f"tool_{i:04d}_" + "x" * 40 for i in range(500))
    g = gate({"h": hostile("", tmp_path, TOOLS=tools)})
    g.initialize()
    assert len(g.ask("tools/list")["result"]["tools"]) == 500
    # Listings asked for and never read: about 80 KiB each, without end before.
    assert g.proc.stdin is not None
    try:
        for k in range(10, 40_000, 10):
            burst = "".join(json.dumps({"jsonrpc": "2.0", "id": k + j, "method": "tools/list"}) + "\n" for j in range(10))
            g.proc.stdin.write(burst.encode())
            g.proc.stdin.flush()
    except BrokenPipeError:
        pass
    # moniker ends the session (and, serving one client on stdio, its process).
    assert g.proc.wait(timeout=60) == 0
    assert "the stdio client does not read its answers; its session ends" in g.log_text()


def test_a_server_s_requests_to_the_client_are_held_to_a_budget(gate, tmp_path: Path) -> None:
    g = gate({"h": hostile("asks", tmp_path, ASKS="100", ID_BYTES="2048")})
    g.initialize(capabilities={"roots": {"listChanged": True}})
    answers = tmp_path / "answers"

    def refused() -> list[dict[str, Any]]:
        if not answers.exists():
            return []
        found = [json.loads(line) for line in answers.read_text().splitlines()]
        return found if len(found) >= 136 else []

    # 100 requests with ids over 1 KiB, then 100 with short ids; the client answers none.
    found = wait_for(refused)
    assert len(found) == 136, found[:3]
    assert all(e["code"] == -32043 for e in found)
    long_ids = [e for e in found if "request ids of at most 1024 bytes" in e["message"]]
    unanswered = [e for e in found if "has not answered 64 requests of this server" in e["message"]]
    assert (len(long_ids), len(unanswered)) == (100, 36)


def test_a_server_s_failing_relists_are_said_cut_and_seldom(gate, tmp_path: Path) -> None:
    g = gate({"h": hostile("relist_fails", tmp_path, ERROR_BYTES=str(4 * MIB))})
    g.initialize()
    assert g.ask("tools/list")["result"]["tools"][0]["name"] == "echo"

    def said() -> list[str]:
        lines = [l for l in g.log_text().splitlines() if "cannot list the server's tools" in l]
        return lines if len(lines) >= 10 else []

    lines = wait_for(said)
    assert len(lines) == 10, len(lines)
    # About 20 more failures come in the next 5 s (one relist each 250 ms): none is said.
    time.sleep(5)
    lines = [l for l in g.log_text().splitlines() if "cannot list the server's tools" in l]
    assert len(lines) == 10
    assert max(len(l) for l in lines) < 2048
    # The server keeps its last listing.
    assert g.ask("tools/list")["result"]["tools"][0]["name"] == "echo"


def test_a_tool_under_moniker_s_own_name_is_refused(moniker_bin: Path, tmp_path: Path, write_config) -> None:
    config = write_config({"servers": {"h": hostile("", tmp_path, TOOLS="search_tools,equip-toolset,echo")}})
    done = subprocess.run([str(moniker_bin), "check", "-c", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "tool name `search_tools` is moniker's own tool's: a tool of a server cannot have it" in out
    assert "tool name `equip-toolset` is moniker's own tool's" in out
    # The fix it offers works.
    assert "h/search_tools: { name: h_search_tools }" in out
    fixed = write_config({
        "servers": {"h": hostile("", tmp_path, TOOLS="search_tools,equip-toolset,echo")},
        "tools": {"h/search_tools": {"name": "h_search_tools"}, "h/equip-toolset": {"name": "h_equip-toolset"}},
    })
    done = subprocess.run([str(moniker_bin), "check", "-c", str(fixed)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
