"""Fixtures of moniker's end-to-end tests.

Every session is opened with the official MCP Python SDK (`mcp`) over stdio, the way a real
client talks to `moniker serve`. Nothing here waits without a bound:

- each MCP request has a read timeout (``MONIKER_E2E_REQUEST_TIMEOUT``, 15 s);
- each whole session has a deadline (``MONIKER_E2E_SESSION_TIMEOUT``, 45 s);
- each async test is cancelled 10 s before pytest-timeout's limit (pytest.ini, 60 s;
  ``--timeout`` overrides), which stays the hard stop;
- whatever a test started and left running is killed when the test run ends.

A session that cannot start (the binary exits, never answers, writes garbage) raises
``SessionFailed`` with the tail of the server's stderr, within seconds.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import shutil
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]

# What moniker's searches learn from calls is kept in the user's state directory: a run of the
# tests keeps its own, never the machine's (each `moniker` fixture has its test's own).
if "XDG_STATE_HOME" not in os.environ:
    import tempfile

    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="moniker-e2e-state-")

REQUEST_TIMEOUT = float(os.environ.get("MONIKER_E2E_REQUEST_TIMEOUT", "15"))
SESSION_TIMEOUT = float(os.environ.get("MONIKER_E2E_SESSION_TIMEOUT", "45"))

# server id in moniker configs -> npm package (pinned in package.json / package-lock.json)
NPM_SERVERS = {
    "everything": "@modelcontextprotocol/server-everything",
    "filesystem": "@modelcontextprotocol/server-filesystem",
    "memory": "@modelcontextprotocol/server-memory",
}


class SessionFailed(Exception):
    """An MCP session could not be opened, or broke down outside the test's own code."""


# --------------------------------------------------------------------------------------------
# Paths: repo, binaries, npm servers
# --------------------------------------------------------------------------------------------


def target_dir() -> Path:
    """Cargo's target directory (honours CARGO_TARGET_DIR like cargo does)."""
    configured = os.environ.get("CARGO_TARGET_DIR")
    if configured:
        path = Path(configured)
        return path if path.is_absolute() else REPO_ROOT / path
    return REPO_ROOT / "target"


def cargo_binary(name: str) -> Path:
    path = target_dir() / "debug" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"{path} is missing: build it first (`cargo build --workspace`, or just run ./scripts/test)",
            pytrace=False,
        )
    return path


def npm_entry(package: str) -> Path:
    """The JS entry of an installed npm server, from its package.json `bin` (else `main`)."""
    package_dir = E2E_DIR / "node_modules" / package
    manifest = package_dir / "package.json"
    if not manifest.is_file():
        pytest.fail(
            f"{package} is not installed under {E2E_DIR / 'node_modules'}: "
            "run `npm ci --prefix tests/e2e` (or just ./scripts/test)",
            pytrace=False,
        )
    meta = json.loads(manifest.read_text())
    bin_field = meta.get("bin")
    if isinstance(bin_field, str):
        relative = bin_field
    elif isinstance(bin_field, dict) and bin_field:
        # One bin is the norm; with several, prefer the one named after the package.
        short = package.rsplit("/", 1)[-1]
        relative = next((v for k, v in bin_field.items() if k.endswith(short)), None) or next(
            iter(bin_field.values())
        )
    else:
        relative = meta.get("main") or "index.js"
    entry = (package_dir / relative).resolve()
    if not entry.is_file():
        pytest.fail(f"{package}: entry {entry} (from its package.json) does not exist", pytrace=False)
    return entry


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def moniker_bin() -> Path:
    return cargo_binary("moniker")


@pytest.fixture(scope="session")
def fixture_bin() -> Path:
    return cargo_binary("moniker-fixture")


@pytest.fixture(scope="session")
def node_bin() -> Path:
    found = shutil.which("node")
    if not found:
        pytest.fail("`node` is not on PATH (Node 20+ is needed for the npm MCP servers)", pytrace=False)
    return Path(found).resolve()


@pytest.fixture(scope="session")
def npm_entries() -> dict[str, Path]:
    """Server id (everything, filesystem, memory) -> absolute path of its JS entry."""
    return {server: npm_entry(package) for server, package in NPM_SERVERS.items()}


# --------------------------------------------------------------------------------------------
# Server specs and moniker configs
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fs_root(tmp_path: Path) -> Path:
    """The directory the filesystem server may touch, with one known file in it."""
    root = tmp_path / "fsroot"
    root.mkdir()
    (root / "hello.txt").write_text("hello from moniker e2e\nsecond line\n")
    return root


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    """Where the memory server keeps its graph (never inside node_modules)."""
    return tmp_path / "memory.jsonl"


@pytest.fixture
def server_specs(
    node_bin: Path, npm_entries: dict[str, Path], fixture_bin: Path, fs_root: Path, memory_file: Path
) -> dict[str, dict[str, Any]]:
    """The four servers as moniker config entries (absolute paths everywhere)."""
    return {
        "everything": {"command": str(node_bin), "args": [str(npm_entries["everything"]), "stdio"]},
        "filesystem": {"command": str(node_bin), "args": [str(npm_entries["filesystem"]), str(fs_root)]},
        "memory": {
            "command": str(node_bin),
            "args": [str(npm_entries["memory"])],
            "env": {"MEMORY_FILE_PATH": str(memory_file)},
        },
        "fixture": {"command": str(fixture_bin), "args": []},
    }


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


def _yaml_key(key: Any) -> str:
    key = str(key)
    if _PLAIN_KEY.fullmatch(key) and key.lower() not in {"true", "false", "null", "yes", "no", "on", "off"}:
        return key
    return json.dumps(key)


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML; scalar values are JSON literals (valid YAML 1.2), keys plain when safe."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return pad + "{}\n"
        out = []
        for key, item in value.items():
            head = f"{pad}{_yaml_key(key)}:"
            if isinstance(item, (dict, list)) and item:
                out.append(head + "\n" + to_yaml(item, indent + 2))
            else:
                out.append(head + " " + to_yaml(item).strip() + "\n")
        return "".join(out)
    if isinstance(value, list):
        if not value:
            return pad + "[]\n"
        out = []
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = to_yaml(item, indent + 2)
                out.append(f"{pad}- " + nested[indent + 2 :])
            else:
                out.append(f"{pad}- " + to_yaml(item).strip() + "\n")
        return "".join(out)
    return pad + json.dumps(value) + "\n"


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """write_config(config_dict, name="moniker.yaml") -> path of the YAML file in tmp_path."""

    def write(config: dict[str, Any], name: str = "moniker.yaml") -> Path:
        path = tmp_path / name
        path.write_text("# written by tests/e2e/conftest.py\n" + to_yaml(config))
        return path

    return write


# The tool rules of the standard gateway config (see tests/e2e/README.md).
GATEWAY_TOOLS: dict[str, Any] = {
    "fixture/echo": {"name": "fixture_echo"},  # everything has an `echo` too
    "read_text_file": {"aliases": ["cat"]},
    "create_entities": {"aliases": ["remember"], "tags": ["memory"]},
}


@pytest.fixture
def gateway_config(write_config: Callable[..., Path], server_specs: dict[str, dict[str, Any]]) -> Path:
    """moniker config: everything + filesystem + memory + fixture, with GATEWAY_TOOLS."""
    return write_config({"servers": server_specs, "tools": GATEWAY_TOOLS})


# --------------------------------------------------------------------------------------------
# MCP sessions
# --------------------------------------------------------------------------------------------


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no stderr file)"
    kept = text.splitlines()[-lines:]
    return "\n".join(kept) if kept else "(empty)"


@asynccontextmanager
async def open_session(
    command: str | Path,
    args: list[str | Path] = (),  # type: ignore[assignment]
    *,
    stderr_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    label: str | None = None,
    request_timeout: float = REQUEST_TIMEOUT,
    session_timeout: float = SESSION_TIMEOUT,
    **session_kwargs: Any,
) -> AsyncIterator[ClientSession]:
    """Spawn `command args` as an MCP stdio server, initialize a ClientSession, yield it.

    `session_kwargs` go to `mcp.ClientSession` (sampling_callback, logging_callback,
    message_handler, ...). The server's stderr goes to `stderr_path`. An exception raised by the
    code in the `async with` body comes out as it is; any other failure (spawn, initialize,
    transport) comes out as SessionFailed carrying the stderr tail.
    """
    __tracebackhide__ = True  # pytest shows the test's line and the message, not this helper
    label = label or " ".join([Path(command).name, *map(str, args)])
    # The SDK hands a server a short list of the environment: the run's state directory too.
    env = {"XDG_STATE_HOME": os.environ["XDG_STATE_HOME"], **(env or {})}
    params = StdioServerParameters(
        command=str(command), args=[str(a) for a in args], env=env, cwd=str(cwd) if cwd else None
    )
    phase = "spawn"
    body_error: BaseException | None = None
    deadline = None
    with open(stderr_path, "w") as errlog:
        try:
            with anyio.fail_after(session_timeout) as deadline:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    phase = "initialize"
                    async with ClientSession(
                        read, write, read_timeout_seconds=timedelta(seconds=request_timeout), **session_kwargs
                    ) as session:
                        await session.initialize()
                        phase = "session"
                        try:
                            yield session
                        except BaseException as exc:
                            body_error = exc
                            raise
                        phase = "shutdown"
        except BaseException as exc:
            if isinstance(exc, TimeoutError) and deadline is not None and deadline.cancelled_caught:
                raise SessionFailed(
                    f"MCP session with `{label}` passed its {session_timeout:g} s deadline during {phase}"
                    f"\n--- its stderr ({stderr_path}), last lines ---\n{_tail(stderr_path)}"
                ) from exc
            cancelled = anyio.get_cancelled_exc_class()
            if any(isinstance(e, cancelled) for e in _leaves(exc)):
                # An outer deadline (the test's): let its cancel scope see its cancellation, and
                # leave word of where this session was for the deadline's message.
                _CANCELLED_SESSIONS.append(f"`{label}` was in {phase}; its stderr:\n{_tail(stderr_path, 15)}")
                raise
            if body_error is not None:
                if exc is body_error:
                    raise
                # The transport's teardown wrapped the test's own error in a group (or hid it).
                raise body_error from (None if body_error in _leaves(exc) else exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit, pytest.fail.Exception, pytest.skip.Exception)):
                raise  # Ctrl-C, pytest.fail() and pytest-timeout's hard stop pass through
            leaves = _leaves(exc)
            causes = "; ".join(f"{type(e).__name__}: {e}".rstrip(": ") for e in leaves)
            if any(
                isinstance(e, (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream))
                or (isinstance(e, McpError) and "Connection closed" in str(e))
                for e in leaves
            ):
                causes += " (the server closed its stdout: it exited or crashed)"
            # Transport breakdowns and timeouts are fully told by the message; anything else keeps
            # its traceback as the cause.
            plain = (McpError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)
            raise SessionFailed(
                f"MCP session with `{label}` failed during {phase}: {causes}"
                f"\n--- its stderr ({stderr_path}), last lines ---\n{_tail(stderr_path)}"
            ) from (None if all(isinstance(e, plain) for e in leaves) else exc)


# Sessions cancelled by a test's deadline, reported in that deadline's failure message.
_CANCELLED_SESSIONS: list[str] = []

SessionOpener = Callable[..., AbstractAsyncContextManager[ClientSession]]


@pytest.fixture
def mcp_session(tmp_path: Path) -> SessionOpener:
    """mcp_session(command, args, **kw): `async with` it to get an initialized ClientSession
    with any stdio MCP server (see open_session for the keywords)."""
    count = 0

    def opener(command: str | Path, args: list[str | Path] = (), **kwargs: Any):  # type: ignore[assignment]
        nonlocal count
        count += 1
        kwargs.setdefault("stderr_path", tmp_path / f"{Path(command).name}.{count}.stderr")
        return open_session(command, list(args), **kwargs)

    return opener


@pytest.fixture
def moniker(mcp_session: SessionOpener, moniker_bin: Path, memory_file: Path, tmp_path: Path) -> SessionOpener:
    """moniker(config_path, **kw): `async with` it to get a ClientSession with
    `moniker serve -c config_path` (keywords as for open_session)."""

    def opener(config: Path, **kwargs: Any):
        # A gateway of the session's own (not the shared one): its log is the session's stderr.
        # What its searches learn is the test's own.
        env = {
            "RUST_BACKTRACE": "1",
            "MEMORY_FILE_PATH": str(memory_file),
            "MONIKER_STANDALONE": "1",
            "XDG_STATE_HOME": str(tmp_path / "state"),
            **kwargs.pop("env", {}),
        }
        for passed in ("RUST_LOG", "MONIKER_LOG"):
            if passed in os.environ:
                env.setdefault(passed, os.environ[passed])
        kwargs.setdefault("label", f"moniker serve -c {config}")
        return mcp_session(moniker_bin, ["serve", "-c", str(config)], env=env, **kwargs)

    return opener


@pytest.fixture
def anyio_backend() -> str:
    # The SDK runs on anyio; the tests run on its asyncio backend only (trio is not installed).
    return "asyncio"


# --------------------------------------------------------------------------------------------
# Per-test deadline for async tests
# --------------------------------------------------------------------------------------------
# pytest-timeout (pytest.ini) is the hard stop: its `thread` method dumps the stacks and ends the
# whole run, since interrupting a running event loop (its `signal` method) can leave the loop
# waiting forever while it cancels the tasks. So an async test first gets a clean anyio deadline,
# 10 s before that hard stop: the test is cancelled, its sessions close and their servers are
# killed, and the run goes on with the next test.


def _hard_timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    if marker is not None and "timeout" in marker.kwargs:
        return float(marker.kwargs["timeout"])
    option = item.config.getoption("timeout", None)
    if option is not None:
        return float(option)
    return float(item.config.getini("timeout") or 0)


def _with_deadline(test: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    @functools.wraps(test)
    async def run(**kwargs: Any) -> Any:
        __tracebackhide__ = True
        _CANCELLED_SESSIONS.clear()
        with anyio.move_on_after(seconds) as deadline:
            return await test(**kwargs)
        if deadline.cancelled_caught:
            where = "\n".join(_CANCELLED_SESSIONS) or "no MCP session was open"
            pytest.fail(f"the test did not end within its {seconds:g} s deadline\n{where}", pytrace=False)

    return run


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    test = pyfuncitem.obj
    hard = _hard_timeout(pyfuncitem)
    if hard > 0 and inspect.iscoroutinefunction(test):
        pyfuncitem.obj = _with_deadline(test, hard - 10 if hard > 20 else hard * 0.8)
        try:
            return (yield)
        finally:
            pyfuncitem.obj = test
    return (yield)


# --------------------------------------------------------------------------------------------
# Leftovers: kill what this test run spawned and left behind (e.g. after a hard timeout)
# --------------------------------------------------------------------------------------------


def _children_of(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not Path("/proc").is_dir():
        return
    # stdio_client starts every server as the leader of a new session and process group, so
    # killing that group takes the server's own children (moniker's node servers) with it.
    for child in _children_of(os.getpid()):
        try:
            if os.getpgid(child) == child:
                os.killpg(child, signal.SIGKILL)
        except OSError:
            pass
