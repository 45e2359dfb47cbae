"""Servers in a sandbox (issue "Servers in a sandbox"), through the official Python SDK: a
hostile server (target/debug/moniker-hostile) that tries to read the user's SSH key and another
project's files, to read moniker's environment or another process's command line, to write outside its folder, to connect out and
to fork without bound is refused each time under `sandbox`, while its honest tool answers; the
same attempts without the sandbox succeed (so each refusal is the sandbox's). Real servers
(filesystem, memory and everything from npm; time, git and fetch from PyPI; memory through
`npx` and time through `uvx`, offline) work under the default sandbox; what a sandboxed server reports as refused is logged with the setting that would
allow it, and a tool's error that reads so carries that note to the client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import scenarios as s
from conftest import REPO_ROOT


@pytest.fixture
def hostile_bin(fixture_bin: Path) -> Path:
    return fixture_bin.parent / "moniker-hostile"


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts: what a server would exfiltrate to."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    """A home with an SSH key, another project, and the server's own folder."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "plans.txt").write_text("the other project's plans\n")
    work = tmp_path / "work"
    work.mkdir()
    return {"home": home, "other": other, "work": work}


async def attempt(session, action: str, target: str) -> str:
    result = await session.call_tool("attempt", {"action": action, "target": target})
    text = s.texts(result)[0]
    assert result.isError == text.startswith("refused: "), result
    return text


def attempts(world: dict[str, Path], port: int) -> dict[str, tuple[str, str]]:
    return {
        "the SSH key": ("read", str(world["home"] / ".ssh" / "id_rsa")),
        "another project": ("read", str(world["other"] / "plans.txt")),
        "moniker's environment": ("environ", "moniker"),
        # The test's own process: outside the sandbox's PID namespace, its /proc has no entry.
        "another process's command line": ("cmdline", str(os.getpid())),
        "a write outside": ("write", str(world["other"] / "dropped.txt")),
        "a connection out": ("connect", f"127.0.0.1:{port}"),
        "forking without bound": ("fork", "64"),
    }


def hostile_config(write_config, hostile_bin: Path, world: dict[str, Path], sandbox: Any) -> Path:
    server: dict[str, Any] = {"command": str(hostile_bin), "args": [str(world["work"])]}
    if sandbox is not None:
        server["sandbox"] = sandbox
    return write_config({"servers": {"hostile": server}}, name=f"hostile-{sandbox is not None}.yaml")


async def test_a_hostile_server_is_refused_everything_its_config_does_not_name(
    moniker, write_config, hostile_bin: Path, world: dict[str, Path], listener: int, tmp_path: Path
) -> None:
    config = hostile_config(write_config, hostile_bin, world, {"processes": 16})
    async with moniker(config, env={"HOME": str(world["home"]), "RUST_LOG": "warn,moniker::server=info"}) as session:
        for what, (action, target) in attempts(world, listener).items():
            said = await attempt(session, action, target)
            assert said.startswith("refused: "), f"{what}: {said}"
        # What its config names, and its honest work, it does.
        assert (await attempt(session, "write", str(world["work"] / "notes.txt"))).startswith("allowed")
        assert (await attempt(session, "fork", "4")).startswith("allowed")
        echoed = await session.call_tool("echo", {"message": "still honest"})
        assert s.texts(echoed) == ["still honest"]
    assert not (world["other"] / "dropped.txt").exists()
    assert (world["work"] / "notes.txt").exists()
    # Each refusal the server reported is logged with the setting that would allow it.
    log = "".join(p.read_text() for p in tmp_path.glob("*.stderr"))
    for setting in ("`sandbox.network`", "`sandbox.read` or `sandbox.write`", "`sandbox.processes`"):
        assert f"(likely its sandbox: {setting} would allow it)" in log, log[-3000:]
    assert "only its own processes seen (a PID namespace and its /proc)" in log, log[-3000:]



async def test_a_sandbox_s_temporary_folder_goes_with_its_server(
    moniker, write_config, hostile_bin: Path, world: dict[str, Path], tmp_path: Path
) -> None:
    """A sandboxed server's temporary folder (its `TMPDIR`) is made in moniker's, and removed
    with what the server left in it once the server has ended (each start made one that stayed,
    before)."""
    temp = tmp_path / "moniker-temp"
    temp.mkdir()
    config = hostile_config(write_config, hostile_bin, world, True)
    async with moniker(config, env={"HOME": str(world["home"]), "TMPDIR": str(temp)}) as session:
        await session.list_tools()  # once it has joined: its sandbox is made
        made = list(temp.glob("moniker-sandbox-*"))
        assert len(made) == 1, made
        left = made[0] / "left-behind.txt"
        assert (await attempt(session, "write", str(left))).startswith("allowed")
        assert left.is_file()
    assert not list(temp.iterdir())


def test_a_sandbox_s_temporary_folder_goes_when_moniker_is_killed(
    moniker_bin: Path, write_config, hostile_bin: Path, world: dict[str, Path], tmp_path: Path
) -> None:
    """moniker killed (SIGKILL: it runs no code): the guard ends the server and removes the
    folder itself."""
    import signal
    import time

    temp = tmp_path / "moniker-temp"
    temp.mkdir()
    config = hostile_config(write_config, hostile_bin, world, True)
    env = {"PATH": os.environ["PATH"], "HOME": str(world["home"]), "TMPDIR": str(temp),
           "MONIKER_STANDALONE": "1", "XDG_STATE_HOME": str(tmp_path / "state")}
    process = subprocess.Popen([str(moniker_bin), "serve", "-c", str(config)], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not list(temp.glob("moniker-sandbox-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(temp.glob("moniker-sandbox-*")), "the sandbox was not made"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while list(temp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not list(temp.iterdir())
    finally:
        process.kill()
        process.wait()

def test_check_says_what_each_sandbox_gives(moniker_bin: Path, write_config, hostile_bin: Path, world: dict[str, Path]) -> None:
    config = hostile_config(write_config, hostile_bin, world, {"processes": 16, "network": [443]})
    done = subprocess.run(
        [str(moniker_bin), "check", "-c", str(config)],
        env={"PATH": "/usr/bin:/bin", "HOME": str(world["home"])},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [line] = [l for l in done.stdout.splitlines() if l.startswith("server `hostile` runs in a sandbox")]
    assert f"writes {world['work']};" in line and "network TCP to port [443]" in line, line
    assert "at most 16 processes" in line and str(world["home"]) not in line, line


def test_doctor_and_check_say_what_a_server_s_sandbox_refused_it(
    moniker_bin: Path, write_config, hostile_bin: Path, world: dict[str, Path]
) -> None:
    """A server that reads the SSH key as it starts, and cannot start without it: `moniker
    doctor` and `moniker check` name what its sandbox refused and the setting that would allow
    it (the server's own words, the kernel telling Landlock's refusals to its audit log only)."""
    key = world["home"] / ".ssh" / "id_rsa"
    config = write_config(
        {
            "servers": {
                "hostile": {
                    "command": str(hostile_bin),
                    "args": [str(world["work"])],
                    "env": {"HOSTILE_AT_START": f"read:{key}"},
                    "sandbox": True,
                }
            },
            "gateway": {"restart": {"max_attempts": 0}},
        },
        name="hostile-at-start.yaml",
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(world["home"])}
    for command in ("doctor", "check"):
        done = subprocess.run(
            [str(moniker_bin), "-c", str(config), command] if command == "doctor" else [str(moniker_bin), command, "-c", str(config)],
            env=env, capture_output=True, text=True, timeout=60,
        )
        said = done.stdout + done.stderr
        assert str(key) in said and "Permission denied" in said, f"{command}: {said}"
        assert "likely its sandbox: `sandbox.read`" in said, f"{command}: {said}"


async def test_without_the_sandbox_the_same_attempts_succeed(
    moniker, write_config, hostile_bin: Path, world: dict[str, Path], listener: int
) -> None:
    """The control: each refusal above is the sandbox's, not the test's."""
    config = hostile_config(write_config, hostile_bin, world, None)
    async with moniker(config, env={"HOME": str(world["home"])}) as session:
        for what, (action, target) in attempts(world, listener).items():
            said = await attempt(session, action, target)
            assert said.startswith("allowed: "), f"{what}: {said}"


# Real servers start in a sandbox from cold caches (node, uv, Python): on a loaded machine their
# first start can outlast the 3 s a first listing waits by default. The tests are about the
# sandbox, not that wait: their first listing waits for every server (as a user's config can).
REAL_SERVERS_WAIT = {"list_wait": "10s"}  # under the client's 15 s request time-out

async def test_real_servers_work_in_the_default_sandbox(
    moniker, write_config, server_specs: dict[str, dict[str, Any]], fs_root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not the filesystem server's\n")
    servers = {name: {**server_specs[name], "sandbox": True} for name in ("filesystem", "memory", "everything")}
    # And one from PyPI, run from its venv (its interpreter and packages are its runtime).
    time_server = Path(sys.executable).with_name("mcp-server-time")
    servers["time"] = {"command": str(time_server), "args": ["--local-timezone", "UTC"], "sandbox": True}
    config = write_config({"servers": servers, "gateway": REAL_SERVERS_WAIT}, name="sandboxed.yaml")
    async with moniker(config, env={"RUST_LOG": "info"}) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"read_text_file", "create_entities", "echo"} <= names, names
        read = await session.call_tool("read_text_file", {"path": str(fs_root / "hello.txt")})
        assert not read.isError and "hello from moniker e2e" in s.texts(read)[0], read.content
        outside = await session.call_tool("read_text_file", {"path": str(fs_root / ".." / "secret.txt")})
        assert outside.isError and "not the filesystem server's" not in str(outside.content), outside.content
        made = await session.call_tool(
            "create_entities", {"entities": [{"name": "sandbox", "entityType": "test", "observations": ["kept"]}]}
        )
        assert not made.isError, made.content
        echoed = await session.call_tool("echo", {"message": "from the sandbox"})
        assert "from the sandbox" in s.texts(echoed)[0], echoed.content
        now = await session.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
        assert not now.isError and "Asia/Tokyo" in s.texts(now)[0], now.content
    # Each server said what it was given (its guard, on its stderr, which moniker logs).
    log = "".join(p.read_text() for p in tmp_path.glob("*.stderr"))
    enforced = [line for line in log.splitlines() if "moniker sandbox: files fully enforced (Landlock); network off" in line]
    assert {server for line in enforced for server in servers if f"server={server}" in line} == set(servers), log[-3000:]


@pytest.fixture
def web_page(tmp_path: Path) -> Iterator[str]:
    """A page on 127.0.0.1, what the fetch server is asked for."""
    import http.server
    import threading

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body><h1>Sandboxed fetch</h1><p>the page's words</p></body></html>")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(site), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
        server.shutdown()


async def test_git_and_fetch_from_pypi_work_in_their_sandboxes(
    moniker, write_config, tmp_path: Path, web_page: str
) -> None:
    """mcp-server-git and mcp-server-fetch (PyPI, mcp 2.x: from the 2026 SDK's venv, their own
    runtime) under `sandbox: true`: git reads the repository its arguments name; fetch with the
    network off fails, and its error names the setting that would allow it; with `network: on`
    the same page is fetched."""
    bin_dir = REPO_ROOT / ".venv-2026" / "bin"
    repo = tmp_path / "project"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=moniker", "-c", "user.email=e2e@moniker.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("a project in a sandbox\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "First words of the sandboxed project"], check=True)
    fetch = [str(bin_dir / "mcp-server-fetch"), "--ignore-robots-txt", "--allow-private-ips"]
    # No node on the fetch server's PATH: with node there, its HTML extraction (readabilipy)
    # runs `npm install` into its own package at its first use, which a sandbox refuses (its
    # package is read-only), and readabilipy then crashes the call. Without node it extracts
    # in Python.
    only_its_venv = {"PATH": str(bin_dir)}
    servers = {
        "git": {"command": str(bin_dir / "mcp-server-git"), "args": ["--repository", str(repo)], "sandbox": True},
        "fetch": {"command": fetch[0], "args": fetch[1:], "env": only_its_venv, "sandbox": True},
        "online": {
            "command": fetch[0],
            "args": fetch[1:],
            "env": only_its_venv,
            "sandbox": {"network": "on"},
            "prefix": True,
        },
    }
    config = write_config({"servers": servers, "gateway": REAL_SERVERS_WAIT}, name="pypi-sandboxed.yaml")
    async with moniker(config, env={"RUST_LOG": "info"}) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"git_log", "git_status", "fetch", "online_fetch"} <= names, names
        log = await session.call_tool("git_log", {"repo_path": str(repo)})
        assert not log.isError and "First words of the sandboxed project" in s.texts(log)[0], log.content
        status = await session.call_tool("git_status", {"repo_path": str(repo)})
        assert not status.isError, status.content
        offline = await session.call_tool("fetch", {"url": web_page})
        texts = s.texts(offline)
        assert offline.isError, offline.content
        # The server's own words first, as it sent them; then moniker's, naming the setting.
        assert "connection" in texts[0].lower(), texts
        assert texts[-1].startswith("moniker: ") and "`sandbox.network` would allow it" in texts[-1], texts
        online = await session.call_tool("online_fetch", {"url": web_page})
        assert not online.isError and "the page's words" in s.texts(online)[0], online.content


async def test_servers_npx_and_uvx_run_work_offline_in_the_sandbox(moniker, write_config, tmp_path: Path) -> None:
    """The commands people's configs hold: `npx -y <package>` and `uvx <package>`, under
    `sandbox: true`, from the caches a first run left (scripts/test fetches them into a home of
    their own, .tools/home; `--offline`: nothing is fetched now). The sandbox gives each runtime
    its cache to write (`~/.npm`, `~/.cache/uv`) and its interpreter to run."""
    home = REPO_ROOT / ".tools" / "home"
    assert (home / ".npm").is_dir() and (home / ".cache" / "uv").is_dir(), "scripts/test fills .tools/home"
    memory = tmp_path / "memory" / "memory.jsonl"
    memory.parent.mkdir()
    servers = {
        "memory": {
            "command": "npx",
            "args": ["--offline", "--yes", "@modelcontextprotocol/server-memory@2026.8.31"],
            "env": {"MEMORY_FILE_PATH": str(memory)},
            "sandbox": True,
        },
        "time": {
            "command": str(Path(sys.executable).with_name("uvx")),
            "args": ["--offline", "mcp-server-time==2026.8.18", "--local-timezone", "UTC"],
            "env": {"UV_PYTHON": "/usr/bin/python3"},
            "sandbox": True,
        },
    }
    config = write_config({"servers": servers, "gateway": REAL_SERVERS_WAIT}, name="npx-uvx-sandboxed.yaml")
    async with moniker(config, env={"HOME": str(home), "RUST_LOG": "info"}) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"create_entities", "get_current_time"} <= names, names
        made = await session.call_tool(
            "create_entities", {"entities": [{"name": "npx", "entityType": "test", "observations": ["offline"]}]}
        )
        assert not made.isError, made.content
        now = await session.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
        assert not now.isError and "Asia/Tokyo" in s.texts(now)[0], now.content
    assert '"name":"npx"' in memory.read_text()


async def test_what_a_running_server_says_its_sandbox_refused_is_noted(
    moniker, write_config, fixture_bin: Path, tmp_path: Path
) -> None:
    """A sandboxed server's stderr is read for refusals as it runs, not only when it fails to
    start (an `npm install` a package tries into its own read-only folder): the line is logged
    with the setting that would allow it, and noted for `/healthz` and `doctor`."""
    secret = tmp_path / "elsewhere" / "secret.txt"
    script = f"echo 'open {secret}: Permission denied' >&2; exec {fixture_bin} --echo"
    server = {"command": "/bin/sh", "args": ["-c", script], "sandbox": {"read": [str(fixture_bin.parent)]}}
    config = write_config({"servers": {"talker": server}}, name="talker.yaml")
    noted = f"open {secret}: Permission denied (likely its sandbox: `sandbox.read` or `sandbox.write` would allow it)"
    async with moniker(config, env={"RUST_LOG": "info"}) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert "echo" in names, names
        # moniker's log reaches its file through the SDK's reader of its stderr: read while
        # the session is open, until the line is there.
        log = ""
        for _ in range(100):
            log = "".join(p.read_text() for p in tmp_path.glob("*.stderr"))
            if noted in log:
                break
            await anyio.sleep(0.05)
    assert noted in log, log[-3000:]
