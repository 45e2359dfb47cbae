"""Fixtures of the interop tests: moniker's config, an HTTP moniker, the leak check, the matrix.

Nothing here reaches past loopback, and nothing waits without a bound:

- each test's client work has a deadline (``MONIKER_INTEROP_DEADLINE``, 45 s), inside
  pytest-timeout's limit (pytest.ini: 60 s; ``--timeout`` overrides), which stays the hard stop;
- an HTTP moniker must answer ``GET /healthz`` within ``MONIKER_INTEROP_START_TIMEOUT`` (20 s),
  and gets 10 s to stop on SIGTERM before it is killed;
- every process a test started (its config and inventory live in the test's own directory, and
  so appear in their command lines) must be gone 10 s after the test; one still there is killed
  (by its pid) and the test fails.

The client libraries' own telemetry and tracing are turned off before any of them is imported.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before any client library is imported (test modules are imported after this conftest):
# no telemetry, no tracing exporters, and loopback never through a proxy.
os.environ["MCP_USE_ANONYMIZED_TELEMETRY"] = "false"  # mcp-use: PostHog and Scarf
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # openai-agents: traces to OpenAI
os.environ["LANGCHAIN_TRACING_V2"] = "false"  # LangSmith
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["DO_NOT_TRACK"] = "1"
os.environ["OTEL_SDK_DISABLED"] = "true"
_no_proxy = "127.0.0.1,localhost,::1"
for _var in ("NO_PROXY", "no_proxy"):
    os.environ[_var] = ",".join(filter(None, [os.environ.get(_var, ""), _no_proxy]))

import matrix  # noqa: E402  (this folder is on sys.path: pytest's rootdir-relative import)

# And a guard: this process (the clients) resolves and connects to loopback only. Anything else
# is refused where it starts (an audit hook raises) and recorded, and fails the test it was in.
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_off_loopback: list[str] = []


def _is_loopback(host: object) -> bool:
    if host is None:
        return True  # getaddrinfo(None, port): the local wildcard
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES or host == "::1" or host.startswith("127."):
        return True
    return host.startswith("::ffff:127.")


def _network_guard(event: str, args: tuple) -> None:
    if event == "socket.getaddrinfo":
        host = args[0]
    elif event == "socket.connect":
        address = args[1]
        if not isinstance(address, tuple):
            return  # a Unix socket
        host = address[0]
    else:
        return
    if not _is_loopback(host):
        _off_loopback.append(f"{event} {host!r}")
        raise ConnectionRefusedError(f"interop tests: no network past loopback ({event} {host!r})")


sys.addaudithook(_network_guard)

INTEROP_DIR = Path(__file__).resolve().parent
REPO_ROOT = INTEROP_DIR.parents[1]
INVENTORY = REPO_ROOT / "fixtures" / "contextgraph.json"

DEADLINE = float(os.environ.get("MONIKER_INTEROP_DEADLINE", "45"))
START_TIMEOUT = float(os.environ.get("MONIKER_INTEROP_START_TIMEOUT", "20"))

# The tool every cell calls, its alias (the config's), and the one tool pinned in search mode.
TOOL = "discover_sub_goals"
ALIAS = "discover_goals"
PINNED = "utl_status"


def target_dir() -> Path:
    configured = os.environ.get("CARGO_TARGET_DIR")
    if configured:
        path = Path(configured)
        return path if path.is_absolute() else REPO_ROOT / path
    return REPO_ROOT / "target"


def cargo_binary(name: str) -> Path:
    path = target_dir() / "debug" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: build it first (`cargo build --workspace`, or ./scripts/test)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def moniker_bin() -> Path:
    return cargo_binary("moniker")


@pytest.fixture(scope="session")
def fixture_bin() -> Path:
    return cargo_binary("moniker-fixture")


@pytest.fixture(scope="session")
def inventory_names() -> list[str]:
    return sorted(t["name"] for t in json.loads(INVENTORY.read_text())["tools"])


# --------------------------------------------------------------------------------------------
# A test's own world: a directory, moniker's environment, its config
# --------------------------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """The test's directory, with moniker's user dirs (cache: the search index) inside it, so
    every cell starts cold, as a first run does."""
    for sub in ("cache", "config", "data", "state", "run"):
        (tmp_path / "xdg" / sub).mkdir(parents=True)
    (tmp_path / "xdg" / "run").chmod(0o700)
    return tmp_path


@pytest.fixture
def moniker_env(world: Path) -> dict[str, str]:
    """The variables a client passes to the moniker it spawns (the SDKs merge them into their
    default environment); the HTTP moniker gets them on top of this process's."""
    return {
        "HOME": os.environ.get("HOME", str(world)),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "XDG_CACHE_HOME": str(world / "xdg" / "cache"),
        "XDG_CONFIG_HOME": str(world / "xdg" / "config"),
        "XDG_DATA_HOME": str(world / "xdg" / "data"),
        "XDG_STATE_HOME": str(world / "xdg" / "state"),
        # Over stdio, the client's moniker attaches to the shared gateway of the config, as a
        # user's does: its socket is in the test's own runtime directory.
        "XDG_RUNTIME_DIR": str(world / "xdg" / "run"),
        "RUST_BACKTRACE": "1",
    }


def write_config(world: Path, fixture_bin: Path, mode: str) -> Path:
    """moniker.yaml in the test's directory: the fixture (its inventory copied there too, so its
    command line names the directory), the alias, and in search mode the discovery section."""
    inventory = world / INVENTORY.name
    shutil.copyfile(INVENTORY, inventory)
    lines = [
        "servers:",
        "  contextgraph:",
        f"    command: {json.dumps(str(fixture_bin))}",
        f"    args: [{json.dumps(str(inventory))}]",
        "tools:",
        f"  {TOOL}:",
        f"    aliases: [{ALIAS}]",
        # The shared gateway stops soon after the test's last session.
        "gateway: { idle_stop: 1s }",
    ]
    if mode == "search":
        lines.append(f"discovery: {{ mode: search, pin: [{PINNED}] }}")
    elif mode != "list":
        raise ValueError(mode)
    config = world / "moniker.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


# --------------------------------------------------------------------------------------------
# moniker over HTTP, started and stopped by the test
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthz(port: int) -> int | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


def stop(proc: subprocess.Popen, grace: float = 10) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class HttpMoniker:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path):
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}/mcp"


def start_http(moniker_bin: Path, config: Path, env: dict[str, str], world: Path) -> HttpMoniker:
    """`moniker serve --http 127.0.0.1:PORT -c CONFIG`, ready when GET /healthz answers 200; on a
    port taken between the probe and the bind, again with another port (3 tries)."""
    for attempt in range(3):
        port = free_port()
        log = world / f"moniker-http-{attempt}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(moniker_bin), "serve", "--http", f"127.0.0.1:{port}", "-c", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                cwd=world,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if healthz(port) == 200:
                return HttpMoniker(proc, port, log)
            time.sleep(0.1)
        stop(proc)
        if "in use" not in tail(log).lower():
            pytest.fail(
                f"moniker serve --http 127.0.0.1:{port} did not answer GET /healthz 200 within "
                f"{START_TIMEOUT:.0f}s (exit {proc.returncode}); its log:\n{tail(log)}",
                pytrace=False,
            )
    pytest.fail(f"moniker serve --http: no free port in 3 tries; its log:\n{tail(log)}", pytrace=False)


@pytest.fixture
def http_moniker(moniker_bin: Path) -> Iterator:
    """A factory: start_http(config, env) for the test; each one is stopped after it."""
    started: list[HttpMoniker] = []

    def start(config: Path, env: dict[str, str]) -> HttpMoniker:
        server = start_http(moniker_bin, config, env, config.parent)
        started.append(server)
        return server

    yield start
    for server in started:
        stop(server.proc)


# --------------------------------------------------------------------------------------------
# Every process the test started is gone after it
# --------------------------------------------------------------------------------------------


def processes_under(directory: Path) -> dict[int, str]:
    """Live processes whose command line names a path inside `directory` (pid -> command line)."""
    marker = str(directory) + os.sep
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            state = next(
                (line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), ""
            )
        except OSError:
            continue
        if "Z" in state.split(":", 1)[-1].split()[:1]:
            continue  # a zombie: exited, not yet reaped by its parent
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if marker in cmdline:
            found[int(entry.name)] = cmdline
    return found


@pytest.fixture(autouse=True)
def loopback_only() -> Iterator[None]:
    del _off_loopback[:]
    yield
    if _off_loopback:
        pytest.fail("the client tried to reach past loopback: " + ", ".join(_off_loopback), pytrace=False)


@pytest.fixture(autouse=True)
def no_process_left(world: Path) -> Iterator[None]:
    yield
    deadline = time.monotonic() + 10
    left = processes_under(world)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = processes_under(world)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        pytest.fail(
            "processes the test started were still running 10 s after it (killed now):\n"
            + "\n".join(f"  {pid}: {cmd}" for pid, cmd in left.items()),
            pytrace=False,
        )


# --------------------------------------------------------------------------------------------
# The matrix: each cell's outcome, written when a run ran them all
# --------------------------------------------------------------------------------------------

_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    cell = dict(report.user_properties).get("interop_cell")
    if cell is None:
        return
    before = _outcomes.get(cell)
    if report.failed:
        _outcomes[cell] = "failed"
    elif report.skipped and before != "failed":
        _outcomes[cell] = "skipped"
    elif report.when == "call" and report.passed and before is None:
        _outcomes[cell] = "passed"


def moniker_version() -> str:
    try:
        out = subprocess.run(
            [str(target_dir() / "debug" / "moniker"), "--version"], capture_output=True, text=True, timeout=10
        ).stdout.split()  # moniker 0.3.0 (commit ...): the version alone, so the matrix
        return out[1] if len(out) > 1 else "?"  # changes only when a result or a version does
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    expected = matrix.all_cells()
    if not _outcomes:
        return
    missing = [c for c in expected if c not in _outcomes]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing:
        if reporter:
            reporter.write_line(
                f"interop: {len(missing)} of {len(expected)} cells not run: "
                f"{matrix.MATRIX.name} left as it was"
            )
        return
    results = {
        "moniker": moniker_version(),
        "python": platform.python_version(),
        "versions": matrix.installed_versions(),
        "pins": matrix.pins(),
        "cells": {c: _outcomes[c] for c in expected},
    }
    matrix.RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    matrix.write_matrix(results)
    readme = REPO_ROOT / "README.md"
    in_readme = readme.is_file() and matrix.update_readme(readme, results)
    if reporter:
        also = f" and the table in {readme}" if in_readme else ""
        reporter.write_line(f"interop: wrote {matrix.RESULTS} and {matrix.MATRIX}{also}")
        reporter.write_line(matrix.table(results))


@pytest.fixture
def cell(request):
    """Names the test's matrix cell: cell(stack, transport, mode)."""

    def name(stack: str, transport: str, mode: str) -> None:
        request.node.user_properties.append(("interop_cell", matrix.cell_key(stack, transport, mode)))

    return name


def pytest_report_header(config) -> list[str]:
    versions = matrix.installed_versions()
    return [
        f"interop: moniker {moniker_version()} ({target_dir() / 'debug'}), "
        + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"interop: python {sys.version.split()[0]}, deadline {DEADLINE:.0f}s per test",
    ]
