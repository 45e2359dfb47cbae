"""Soak: `moniker serve --http` under 60 seconds of hostile traffic of every kind of peer at
once (client addresses, principals, sessions, server connections) while well-behaved clients
keep calling.

The acceptance texts. Round one: "60 seconds of mixed hostile traffic over HTTP (malformed
JSON, huge batches, smuggling attempts, 10,000 sessions from one token, half-open sockets,
unknown names, subscription floods) while a well-behaved client keeps calling: every
well-behaved call answers, moniker's RSS stays under a stated bound, and nothing reaches a
server that the token may not reach (the servers log what they receive; the test reads the
logs)." Round two ("Hold the boundary, round two"): "A 60 s soak (bounded, loopback only) where
hostile peers of every kind above run at once while well-behaved clients call tools: every
well-behaved call answered, RSS bounded by the budget table".

Setup: two servers, each recording every line moniker writes to it (`--record`): `cg` (the
contextgraph fixture) and `storm`, a hostile server (the fixture with `--notes-each-call 3000
--progress 5000 --extra-fields --garbage --stderr-noise --log-calls`: 3,000
notifications/tools/list_changed after every call, 5,000 notifications/progress before the
answer of a call that asks for progress, raw extra fields in every result, a line of garbage
before every response, a stderr line per message, an MCP log message per call). Three tokens:
ADMIN (every tool), REVIEW (toolset `review`: store_memory and search_graph) and STORM (toolset
`storm`: the storm server's `echo` only). `http.max_connections` is MAX_CONNECTIONS (64): a
quarter of it, 16, is an address's share of the connection places.

Client addresses (all loopback, 127.0.0.0/8): the well-behaved clients alone on 127.0.0.1, each
kind of hostile traffic from an address of its own (moniker shares its connection places by
address; it cannot tell two clients of one address apart): 127.0.0.2 the connection flood,
127.0.0.3 round one's content attacks and the storm calls, 127.0.0.4 the half-open sockets,
127.0.0.5 the listen streams, 127.0.0.6 the never-read streams.

Two well-behaved clients (ADMIN), each opening a new 2025 session every few calls (initialize,
notifications/initialized, then tools/call get_memetic_status of `cg`; the session before it
ends with DELETE once the new one is open), so opening a session is tried all through the
session flood too: one on one kept-alive connection as long as it lasts, one opening each
session on a new connection (what moniker must still accept while the floods hold every
place). Each of their requests (initialize included) must be answered with a result within
CALL_BOUND seconds.

The attackers, in threads, each loop bounded in count and in time. Round one (REVIEW unless
said; ADMIN's subscription flood is a runaway client with an unbound token):
- malformed JSON (truncated, not UTF-8, 100,000 nested arrays, ...), wrong content types,
  bodies shorter than their Content-Length, conflicting Content-Length / Transfer-Encoding;
- huge batches: 5,000 padded pings (~3 MB), 5,000 tools/list, 5,000 unknown methods, 500
  search_graph calls, and a body over the 4 MiB limit;
- smuggling: a complete tools/call of trigger_consolidation (not in `review`) between raw
  `\\n`, `\\r`, `\\r\\n`, `\\n\\r` as JSON whitespace in the arguments of store_memory, in `_meta`,
  in notifications/roots/list_changed, in logging/setLevel, in a batch, in a 2026-07-28
  stateless call; asked for outright (its name, upper case, with a space, prefixed by the
  server's id, in a batch, stateless with an Mcp-Name of another tool); in HTTP (conflicting
  Content-Length and Transfer-Encoding, a second request in a body, bare LF and CR);
- a session flood: up to 10,000 `initialize` of REVIEW, as fast as two threads go (50
  pipelined on a kept-alive connection at a time);
- half-open sockets: HALF_OPEN connections that send half a request header and stay open (one
  that moniker closes is opened again);
- unknown tool names (random, up to 4 KB) in tools/call, in sessions and stateless;
- subscription floods: resources/subscribe of random URIs (batches of 200) in REVIEW sessions
  (refused by moniker: `review` reaches no resource), and the same in sessions of ADMIN's
  (accepted, forwarded, kept per session), each of which ends with DELETE after 30,000
  subscriptions; up to LISTENS 2026-07-28 `subscriptions/listen` streams opened and left open.
Round two, one attacker per kind of peer:
- a client address: ADDRESS_SOCKETS (256, 4 x MAX_CONNECTIONS) sockets from 127.0.0.2, in
  ADDRESS_THREADS threads, each sending half a request header or nothing; every one moniker
  closes (its 10 s header timeout, or its place taken by an address below its share) is opened
  again at once (at most 20 x ADDRESS_SOCKETS in all);
- a principal (STORM) and its sessions: NEVER_READ POSTs at once, a tools/call of the storm
  server's tool with a progress token of BIG_TOKEN (2,048) characters and `Accept:
  text/event-stream` only (half in a 2025 session, half stateless 2026-07-28), whose streams
  are never read (the socket stays open, nothing is read: 5,000 notes of ~2 KB each, ~10 MB,
  against moniker's 4 MiB of unread notes for all of a principal's streams); and every fifth storm call (below) in a
  new session of STORM's, asking for progress answered as JSON: its 5,000 notes go to that
  session's replay buffer, and no session of STORM's is ever read (no GET stream, no DELETE),
  so the principal's replay buffers fill (16 MiB for all its sessions);
- a server connection: the storm calls, one after the other (every 0.2 s), so that the storm
  server's 3,000 list_changed notes after each call, its garbage lines and its noise keep
  coming while the well-behaved clients call `cg`. (A server spraying progress for calls that
  are not its own is covered by a unit test.)
The connection floods (the address flood and the half-open sockets) start FLOOD_DELAY (2 s)
after the others: the clients are connected, and the never-read streams open, when they come.

Bounds (stated here, asserted at the end):
- every well-behaved request (of both clients) answered with a result within CALL_BOUND
  (10 s), and at least MIN_GOOD_CALLS tools/call (one a second) made by each;
- moniker's RSS (VmRSS, sampled every second) below RSS_BOUND_MIB all along: 128 MiB (round
  one's bound, ~2x what its traffic measured: 18 MiB before the traffic, ~50 MiB after 3 s,
  flat at 56-60 MiB from 15 s on) plus what the budget table lets round two's peers hold on
  top: STORM's unread notes (4 MiB for all its POST streams) and its replay buffers (16 MiB),
  with what the allocator keeps of them (about 1.5 x: 8 streams of 4 MiB each measured ~48
  MiB of RSS alone, before the streams of a principal shared one budget; a principal's full
  replay buffers ~40 MiB), 176 MiB in all (measured: 144 MiB at the peak, below);
- what reached `cg`: no raw CR, every line a JSON object, no tools/call of
  trigger_consolidation; and the attacker's store_memory calls did reach it (else the log would
  prove nothing);
- what reached `storm`: at least 10 calls (its storms came) and at least NEVER_READ calls with
  a progress token (the never-read streams were there); moniker listed it again at most
  RELISTS_PER_SECOND (6) times in any second (one relist at a time, 250 ms apart: 4 a second;
  counted from its record each second);
- moniker alive at the end, /healthz answering, and a new well-behaved session then calls.

Measured (debug build, 2 cores, load average 2.4 with another test run beside it, one 60 s
run at the commit that made both clients pass): the kept-alive client made 919 requests (835
tools/call), all answered, p50 12 ms, p99 89 ms, slowest 0.39 s; the client on new connections
made 878 (798 tools/call), all answered, p50 12 ms, p99 184 ms, slowest 1.42 s (an initialize
while the address flood held every place: it took the oldest place of the flood's address).
Before that change (an address could keep up to 2 x max_connections sockets served and
waiting, which filled what moniker accepts and left a new connection in the kernel's queue,
where its address cannot be seen), 4-6 of its 28-49 requests timed out at 10 s in four runs.
RSS: 21 MiB before the traffic, 46 MiB after 3 s, 133 MiB from 30 s, 144 MiB at the peak, 81
MiB at the end; open fds at most 149. The session flood's 10,000 initializes were all answered
10.6 s in. The storm server was listed again 3.3/s on average, at most 4 in a second, for 172
calls (~516,000 list_changed notes); each never-read stream had ~128 KB waiting unread in its
socket at the end (one budget of 4 MiB of notes for all of STORM's streams together, since the
same change: each stream had its own before); moniker's stderr had 58 warnings, 16 of them for
the storm server's garbage lines (the first 10, then every 1,000th: ~6,500 before).
Measured again on 2026-11-29, in three runs each with a debug build:
- moniker's peak RSS with glibc's malloc was 99.0, 109.5 and 93.9 MiB. With mimalloc (which
  the build used for a while) it had been 190.9, 142.9 and 155.5 MiB, and 216.9 MiB in one
  CI run, over the bound.
- The client on new connections, once a freed place went to the oldest waiting connection of
  an address below its share: its slowest request took 0.46, 0.24 and 0.56 s. When a place
  went to whichever waiter woke first, it had taken 4.26, 8.25 and 1.02 s.

MONIKER_SOAK_SECONDS (default 60) shortens or lengthens the hostile traffic. The whole test is
bounded: every socket has a timeout, every thread is stopped and joined with a bound, moniker
is killed at the end (SIGKILL 5 s after SIGTERM); pytest-timeout's limit for it is
MONIKER_SOAK_SECONDS + 60 s (a run takes MONIKER_SOAK_SECONDS + 2 to 17 s).
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import random
import select
import signal
import socket
import string
import struct
import subprocess
import termios
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

SOAK_SECONDS = float(os.environ.get("MONIKER_SOAK_SECONDS", "60"))
CALL_BOUND = 10.0  # seconds for one well-behaved request
POST_STREAM_MIB = 4  # budget.rs POST_STREAM_BYTES: the notes a principal's unread POST streams hold
REPLAY_MIB = 16  # budget.rs REPLAY_BYTES_EACH: the replay buffers of one principal's sessions
MIN_GOOD_CALLS = max(10, int(SOAK_SECONDS))  # at least one well-behaved call a second
CALLS_PER_SESSION = 10  # the well-behaved client opens a new session after this many calls
SESSION_FLOOD = 10_000
HALF_OPEN = 300
LISTENS = 200
MAX_CONNECTIONS = 64  # http.max_connections: a place is a quarter of it, 16, per address
ADDRESS_SOCKETS = 256  # the connection flood's sockets at once (4 x MAX_CONNECTIONS)
ADDRESS_THREADS = 4
NEVER_READ = 8  # event streams of POSTs never read, at once
# Round one's bound (~2x what its traffic measured) and 48 MiB for round two's peers: the
# budget table lets them hold 20 MiB (STORM's unread notes, one budget for all its streams,
# and its replay buffers), ~30 MiB of RSS with what the allocator keeps (see the docstring);
# the rest is margin for a loaded machine.
RSS_BOUND_MIB = 128 + 48
STORM_NOTES = 3000  # notifications/tools/list_changed the storm server sends after each call
STORM_PROGRESS = 5000  # notifications/progress before the answer of a call that asks for it
BIG_TOKEN = 2048  # characters of the hostile principal's progress tokens (each note carries it)
FLOOD_DELAY = 2.0  # seconds between the start of the other threads and the connection floods
RELISTS_PER_SECOND = 6  # at most (one relist at a time, 250 ms apart: 4 a second)

# Client addresses (all loopback): the well-behaved clients alone on theirs, each kind of
# hostile traffic from one of its own, so that what is tested is how moniker shares its
# connection places between addresses (it cannot tell two clients of one address apart).
GOOD_FROM = "127.0.0.1"
ADDRESS_FROM = "127.0.0.2"  # the connection flood
CONTENT_FROM = "127.0.0.3"  # malformed, batches, smuggling, session flood, names, subscriptions, storm calls
HALF_OPEN_FROM = "127.0.0.4"
LISTEN_FROM = "127.0.0.5"
NEVER_READ_FROM = "127.0.0.6"

ADMIN = "admin-token-0123"
REVIEW = "review-token-4567"
STORM = "storm-token-89ab"  # a third principal: toolset `storm`, the storm server's tools only
STORM_TOOL = "echo"  # the storm server's one tool
FORBIDDEN = "trigger_consolidation"  # not in the `review` toolset
GOOD_TOOL = "get_memetic_status"
MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
ACCEPT = "application/json, text/event-stream"

pytestmark = pytest.mark.timeout(SOAK_SECONDS + 60)


# --------------------------------------------------------------------------------------------
# Bookkeeping
# --------------------------------------------------------------------------------------------


class Stats:
    """Counters and a few examples of each kind of event, shared by the threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def add(self, key: str, n: int = 1, example: str | None = None) -> None:
        with self.lock:
            self.counts[key] += n
            if example is not None:
                kept = self.examples.setdefault(key, [])
                if len(kept) < 3:
                    kept.append(example[:300])

    def summary(self) -> str:
        with self.lock:
            lines = [f"  {key}: {count}" for key, count in sorted(self.counts.items())]
            for key, kept in sorted(self.examples.items()):
                for example in kept:
                    lines.append(f"  e.g. {key}: {example}")
        return "\n".join(lines)


class Good:
    """What the well-behaved client saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0  # initialize and tools/call
        self.calls = 0  # tools/call only
        self.answered = 0
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.slow: list[str] = []  # answered, but after more than a second

    def done(self, what: str, started: float, ok: bool, detail: str) -> None:
        took = time.monotonic() - started
        with self.lock:
            self.requests += 1
            self.calls += what.startswith("tools/call")
            self.latencies.append(took)
            if ok and took <= CALL_BOUND:
                self.answered += 1
                if took > 1.0:
                    self.slow.append(f"{clock()} {what} answered after {took:.2f}s")
            else:
                self.failures.append(f"{clock()} {what} after {took:.2f}s: {detail[:300]}")

    def summary(self) -> str:
        with self.lock:
            lat = sorted(self.latencies) or [0.0]
            pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
            return (
                f"  requests {self.requests} (tools/call {self.calls}), answered {self.answered}, "
                f"failed {len(self.failures)}\n"
                f"  latency p50 {pick(0.5) * 1000:.0f} ms, p99 {pick(0.99) * 1000:.0f} ms, "
                f"max {lat[-1] * 1000:.0f} ms; over 1 s: {len(self.slow)}"
                + "".join(f"\n    {slow}" for slow in self.slow[:10])
            )


# --------------------------------------------------------------------------------------------
# HTTP: keep-alive requests (http.client) and raw sockets
# --------------------------------------------------------------------------------------------


def clock() -> str:
    """Wall time with milliseconds, to line up events of different threads in the report."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"


def message_of(body: bytes) -> Any:
    """The JSON-RPC answer of a body: JSON, or the last `data:` of an SSE stream."""
    text = body.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        if line.startswith("data:"):
            try:
                return json.loads(line[5:].strip())
            except ValueError:
                continue
    return None


class Http:
    """One keep-alive connection to moniker with one token; reconnects after an error."""

    def __init__(self, port: int, token: str, timeout: float = 15.0, source: str = GOOD_FROM) -> None:
        self.port = port
        self.token = token
        self.timeout = timeout
        self.source = source  # the client address its connections are bound to
        self.anew = False  # whether the last request went on a new connection
        self.conn: http.client.HTTPConnection | None = None
        self.lost = False  # a request in a session got 404: the session ended

    def what(self, method: str) -> str:
        """`method`, and on what connection the last request went."""
        return f"{method} ({'new' if self.anew else 'kept-alive'} connection)"

    def renew(self) -> bool:
        """Whether the session in use ended (the caller then opens a new one)."""
        lost, self.lost = self.lost, False
        return lost

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(
        self,
        method: str,
        body: bytes | None = None,
        *,
        session: str | None = None,
        headers: dict[str, str] | None = None,
        content_type: str | None = "application/json",
        path: str = "/mcp",
    ) -> tuple[int, dict[str, str], bytes]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout, source_address=(self.source, 0))
        self.anew = self.conn.sock is None
        sent = {"Authorization": f"Bearer {self.token}", "Accept": ACCEPT}
        if content_type is not None:
            sent["Content-Type"] = content_type
        if session is not None:
            sent["Mcp-Session-Id"] = session
        sent.update(headers or {})
        try:
            self.conn.request(method, path, body=body, headers=sent)
            response = self.conn.getresponse()
            data = response.read()
            if session is not None and response.status == 404:
                self.lost = True
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        except BaseException:
            self.close()
            raise

    def post(self, body: bytes, **kw: Any) -> tuple[int, dict[str, str], bytes]:
        return self.request("POST", body, **kw)

    def initialize(self, name: str) -> str | None:
        """A new 2025 session: its id (None when refused), notifications/initialized sent."""
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name, "version": "0"}},
        }
        status, headers, body = self.post(json.dumps(init).encode())
        anew = self.anew
        session = headers.get("mcp-session-id")
        if status != 200 or not session:
            return None
        self.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', session=session)
        self.anew = anew  # what the initialize went on
        return session


def raw_exchange(port: int, data: bytes, timeout: float = 10.0, shutdown_write: bool = False, source: str = CONTENT_FROM) -> bytes:
    """Sends `data` on a new connection (from `source`) and reads what comes back until EOF or
    the timeout."""
    out = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as sock:
            try:
                sock.sendall(data)
                if shutdown_write:
                    sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # refused before all was sent: what was answered is still read
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and len(out) < 1 << 20:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                out += chunk
    except OSError:
        pass
    return out


POLL_CLOSED = select.POLLIN | select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)
POLL_HUNG_UP = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)


def readable_or_closed(socks: list[socket.socket], closed_only: bool = False) -> list[socket.socket]:
    """The sockets with something to read or closed by moniker (`closed_only`: closed only,
    found without reading anything). poll, not select: this process holds more than 1,024
    descriptors, past what select() takes."""
    poller = select.poll()
    by_fd: dict[int, socket.socket] = {}
    for sock in socks:
        try:
            fd = sock.fileno()
        except OSError:
            continue
        if fd >= 0:
            by_fd[fd] = sock
            poller.register(fd, POLL_HUNG_UP if closed_only else POLL_CLOSED)
    try:
        events = poller.poll(0)
    except OSError:
        return []
    return [by_fd[fd] for fd, _ in events if fd in by_fd]


def pending_bytes(sock: socket.socket) -> int:
    """Bytes moniker sent that wait, unread, in the socket's receive buffer (FIONREAD)."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return -1


def status_of(raw: bytes) -> str:
    if raw.startswith(b"HTTP/1.1 "):
        return raw[9:12].decode("ascii", "replace")
    return "none" if not raw else "garbage"


def raw_post(token: str, body: bytes, *, session: str | None = None, extra: str = "", length: int | None = None) -> bytes:
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n"
    )
    if session:
        head += f"Mcp-Session-Id: {session}\r\n"
    return (head + extra + "\r\n").encode() + body


# --------------------------------------------------------------------------------------------
# moniker
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def count_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def healthz(port: int, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except OSError as exc:
        return 0, repr(exc)


@pytest.fixture
def soak_gateway(moniker_bin: Path, fixture_bin: Path, repo_root: Path, tmp_path: Path, write_config):
    """`moniker serve --http` with the contextgraph fixture and the storm server, each
    recording what it reads: (proc, port, record path, storm record path, stderr path)."""
    record = tmp_path / "record.jsonl"
    storm_record = tmp_path / "storm-record.jsonl"
    config = write_config(
        {
            "servers": {
                "cg": {
                    "command": str(fixture_bin),
                    "args": [str(repo_root / "fixtures" / "contextgraph.json"), "--record", str(record)],
                },
                # a hostile server: a storm of list_changed notes after every call, a flood of
                # progress before the answer of a call that asks for it, raw extra fields in
                # every result, a line of garbage before every response, a log line to stderr
                # per message and an MCP log message per call
                "storm": {
                    "command": str(fixture_bin),
                    "args": [
                        "--notes-each-call", str(STORM_NOTES),
                        "--progress", str(STORM_PROGRESS),
                        "--extra-fields",
                        "--garbage",
                        "--stderr-noise",
                        "--log-calls",
                        "--record", str(storm_record),
                    ],
                },
            },
            "http": {
                "max_connections": MAX_CONNECTIONS,
                "tokens": [ADMIN, {"token": REVIEW, "toolset": "review"}, {"token": STORM, "toolset": "storm"}],
            },
            "toolsets": {"review": {"tools": ["store_memory", "search_graph"]}, "storm": {"tools": [STORM_TOOL]}},
        }
    )
    port = free_port()
    stderr_path = tmp_path / "moniker-http.stderr"
    log = open(stderr_path, "w")
    proc = subprocess.Popen(
        [str(moniker_bin), "serve", "--http", f"127.0.0.1:{port}", "-c", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={"PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(tmp_path), "RUST_BACKTRACE": "1"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            status, _ = healthz(port, timeout=1)
            if status == 200:
                # the server is up once ADMIN's tools/list holds the contextgraph tools
                probe = Http(port, ADMIN, timeout=5)
                try:
                    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
                    _, _, answer = probe.post(
                        json.dumps(body).encode(), headers={"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
                    )
                    listed = message_of(answer)
                    tools = listed.get("result", {}).get("tools", []) if isinstance(listed, dict) else []
                    if len(tools) > 10 and any(tool.get("name") == STORM_TOOL for tool in tools):
                        break
                except OSError:
                    pass
                finally:
                    probe.close()
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError(f"moniker --http did not come up:\n{stderr_path.read_text()[-3000:]}")
            time.sleep(0.1)
        yield proc, port, record, storm_record, stderr_path
    finally:
        if proc.poll() is None:
            asked = time.monotonic()
            proc.terminate()
            try:
                proc.wait(timeout=5)
                print(f"moniker stopped {time.monotonic() - asked:.1f} s after SIGTERM")
            except subprocess.TimeoutExpired:
                print("moniker still running 5 s after SIGTERM: killed")
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # moniker and the fixture it started
        except OSError:
            pass
        proc.wait(timeout=10)
        log.close()


# --------------------------------------------------------------------------------------------
# The well-behaved client
# --------------------------------------------------------------------------------------------


def well_behaved(port: int, stop: threading.Event, good: Good, new_connections: bool = False) -> None:
    """Sessions one after the other, each opened before the one before it ends (DELETE), with
    CALLS_PER_SESSION calls in each; a refused initialize counts as a failure, and the calls
    go on in the session it has. From GOOD_FROM; with `new_connections`, each session's
    initialize on a new connection (what moniker must still accept while the floods hold every
    place), else one kept-alive connection as long as it lasts."""
    client = Http(port, ADMIN, timeout=CALL_BOUND, source=GOOD_FROM)
    session: str | None = None
    n = 0
    while not stop.is_set():
        if new_connections:
            client.close()
        started = time.monotonic()
        try:
            fresh = client.initialize("well-behaved")
            good.done(client.what("initialize"), started, fresh is not None, "no session id (refused)")
        except Exception as exc:  # noqa: BLE001 - a failure to count, whatever it is
            good.done(client.what("initialize"), started, False, repr(exc))
            fresh = None
        if fresh is not None:
            if session is not None:
                try:
                    client.request("DELETE", session=session, content_type=None)
                except Exception:  # noqa: BLE001 - ending the session is a courtesy
                    pass
            session = fresh
        if session is None:
            stop.wait(0.5)
            continue
        for _ in range(CALLS_PER_SESSION):
            if stop.is_set():
                break
            n += 1
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": GOOD_TOOL, "arguments": {"n": n}}}
            started = time.monotonic()
            try:
                status, _, body = client.post(json.dumps(call).encode(), session=session)
                answer = message_of(body)
                result = answer.get("result") if isinstance(answer, dict) else None
                ok = status == 200 and isinstance(result, dict) and not result.get("isError") and answer.get("id") == n
                good.done(client.what("tools/call"), started, ok, f"{status} {body[:200]!r}")
            except Exception as exc:  # noqa: BLE001
                good.done(client.what("tools/call"), started, False, repr(exc))
            stop.wait(0.05)
    client.close()


# --------------------------------------------------------------------------------------------
# The attacker
# --------------------------------------------------------------------------------------------


def smuggled(id_: int) -> str:
    return f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call","params":{{"name":"{FORBIDDEN}","arguments":{{}}}}}}'


def smuggling_carriers(base_id: int) -> list[tuple[bytes, bool]]:
    """(body, is it a 2026-07-28 stateless request) for every line end, a forbidden call as
    JSON whitespace-wrapped data in each field a client controls."""
    out = []
    for k, end in enumerate(["\n", "\r", "\r\n", "\n\r"]):
        i = base_id + 10 * k
        s = lambda j: f"{end}{smuggled(j)}{end}"  # noqa: E731
        out += [
            (f'{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x","x":{s(i)}}}}}}}', False),
            (f'{{"jsonrpc":"2.0","id":{i + 1},"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x"}},"_meta":{{"x":{s(i + 1)}}}}}}}', False),
            (f'{{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{{"x":{s(i + 2)}}}}}', False),
            (f'{{"jsonrpc":"2.0","id":{i + 3},"method":"logging/setLevel","params":{{"level":"info","x":{s(i + 3)}}}}}', False),
            (f'{{"jsonrpc":"2.0","id":{i + 4},"method":"resources/read","params":{{"uri":"fixture://contextgraph-fixture/readme","x":{s(i + 4)}}}}}', False),
            (f'[{end}{{"jsonrpc":"2.0","id":{i + 5},"method":"tools/call","params":{{"name":"search_graph","arguments":{{"query":"q","x":{s(i + 5)}}}}}}}{end}]', False),
            (f'{{"jsonrpc":"2.0","id":{i + 6},"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x","x":{s(i + 6)}}},"_meta":{json.dumps(MODERN_META)}}}}}', True),
            # the forbidden call as the raw tail of a string value: a line end inside a string
            # is invalid JSON and must be refused, never cut in two
            (f'{{"jsonrpc":"2.0","id":{i + 7},"method":"tools/call","params":{{"name":"store_memory","arguments":{{"content":"x{end}{smuggled(i + 7)}{end}"}}}}}}', False),
        ]
    return [(body.encode(), modern) for body, modern in out]


def attack_smuggling(port: int, stop: threading.Event, stats: Stats) -> None:
    client = Http(port, REVIEW, source=CONTENT_FROM)
    session = None
    base = 1000
    rounds = 0
    while not stop.is_set() and rounds < 2000:
        rounds += 1
        try:
            if session is None or client.renew():
                session = client.initialize("smuggler")
            for body, modern in smuggling_carriers(base):
                if stop.is_set():
                    break
                if modern:
                    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "store_memory"}
                    status, _, answer = client.post(body, headers=headers)
                else:
                    status, _, answer = client.post(body, session=session)
                stats.add(f"smuggling.http_{status}")
                if f'\\"tool\\":\\"{FORBIDDEN}'.encode() in answer or f'"tool":"{FORBIDDEN}'.encode() in answer:
                    stats.add("smuggling.FORBIDDEN_ANSWERED", example=answer[:300].decode("utf-8", "replace"))
            base += 100
            # asking for it outright: by its name, names near it, in a batch, with headers that
            # name another tool
            for name in (FORBIDDEN, FORBIDDEN.upper(), f"{FORBIDDEN} ", f"cg/{FORBIDDEN}", f"cg_{FORBIDDEN}", f"cg.{FORBIDDEN}", f"cg__{FORBIDDEN}"):
                call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": name, "arguments": {}}}
                attempts = [
                    (json.dumps(call).encode(), {}, session),
                    (json.dumps([{**call, "id": 6, "params": {"name": "store_memory", "arguments": {"content": "x"}}}, call]).encode(), {}, session),
                    (
                        json.dumps({**call, "params": {**call["params"], "_meta": MODERN_META}}).encode(),
                        {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name.strip()},
                        None,
                    ),
                    (
                        json.dumps({**call, "params": {**call["params"], "_meta": MODERN_META}}).encode(),
                        {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "store_memory"},
                        None,
                    ),
                ]
                for body, headers, where in attempts:
                    if stop.is_set():
                        break
                    status, _, answer = client.post(body, session=where, headers=headers)
                    replies = message_of(answer)
                    for reply in replies if isinstance(replies, list) else [replies]:
                        if isinstance(reply, dict) and reply.get("id") == 6:
                            continue  # the store_memory call of the batch
                        code = reply.get("error", {}).get("code") if isinstance(reply, dict) else None
                        stats.add(f"smuggling.outright.http_{status}.code_{code}")
                        if isinstance(reply, dict) and "result" in reply:
                            stats.add("smuggling.outright.RESULT", example=f"{name!r}: {answer[:250]!r}")
        except Exception as exc:  # noqa: BLE001
            stats.add("smuggling.error", example=repr(exc))
            session = None
        # HTTP-level smuggling: conflicting lengths, a second request hidden in a body
        inner = json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": FORBIDDEN, "arguments": {}}}
        ).encode()
        hidden = raw_post(REVIEW, inner, session=session)
        hidden_no_auth = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: "
            + ACCEPT.encode()
            + b"\r\nContent-Length: "
            + str(len(inner)).encode()
            + b"\r\n\r\n"
            + inner
        )
        for data in [
            # CL.TE: a chunked body that ends early, the rest a second request
            raw_post(REVIEW, b"0\r\n\r\n" + hidden, session=session, extra="Transfer-Encoding: chunked\r\n"),
            # two Content-Length headers
            raw_post(REVIEW, b"{}" + hidden_no_auth, session=session, extra="Content-Length: 2\r\n"),
            # Content-Length shorter than the body: the rest is read as a request of its own
            raw_post(REVIEW, b'{"jsonrpc":"2.0","method":"notifications/initialized"}' + hidden_no_auth, session=session, length=54),
            # a bare LF and a lone CR in the header
            b"POST /mcp HTTP/1.1\nHost: 127.0.0.1\rAuthorization: Bearer " + REVIEW.encode() + b"\r\n\r\n" + inner,
        ]:
            if stop.is_set():
                break
            stats.add(f"smuggling.http_level_{status_of(raw_exchange(port, data, timeout=5))}")
    client.close()


MALFORMED_BODIES = [
    b"{",
    b'{"jsonrpc":"2.0","id":1,"method":',
    b"not json at all",
    b"\xff\xfe\x00\x01garbage",
    b"[" * 100_000,
    b'{"a":' * 50_000,
    b"[]",
    b"[1,2,3]",
    b"null",
    b'"just a string"',
    b'{"jsonrpc":"2.0","id":{"an":"object"},"method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list","method":"tools/call"}',
    b'{"jsonrpc":"2.0","id":1e999999,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":"' + b"\\u0000" * 100_000 + b'"}',
    b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}',
    b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',
]
WRONG_TYPES = [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=utf-16", "application/jsonx", "*/*"]


def attack_malformed(port: int, stop: threading.Event, stats: Stats) -> None:
    client = Http(port, REVIEW, source=CONTENT_FROM)
    session = None
    rounds = 0
    while not stop.is_set() and rounds < 5000:
        rounds += 1
        tries: list[tuple[str, bytes, str | None, str | None]] = [
            (f"body{i}", body, where, "application/json")
            for i, body in enumerate(MALFORMED_BODIES)
            for where in ("session", None)
        ]
        tries += [(f"type:{t}", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', "session", t) for t in WRONG_TYPES]
        for label, body, where, content_type in tries:
            if stop.is_set():
                break
            try:
                if session is None or client.renew():
                    session = client.initialize("malformed")
                status, _, _ = client.post(body, session=session if where else None, content_type=content_type)
                stats.add(f"malformed.{'type_' if label.startswith('type:') else ''}http_{status}")
                if status == 200:
                    stats.add(f"malformed.answered_200.{label}")
            except Exception as exc:  # noqa: BLE001
                stats.add(f"malformed.error.{label}", example=repr(exc))
                session = None
        # truncated bodies: shorter than their Content-Length, the write side then closed
        for body in (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"store_memory"', b"[" * 1000):
            if stop.is_set():
                break
            stats.add(f"malformed.truncated_{status_of(raw_exchange(port, raw_post(REVIEW, body, session=session, length=len(body) + 5000), timeout=5, shutdown_write=True))}")
    client.close()


def attack_batches(port: int, stop: threading.Event, stats: Stats) -> None:
    pad = "p" * 520
    bodies = {
        "pings": json.dumps([{"jsonrpc": "2.0", "id": i, "method": "ping", "params": {"_meta": {"pad": pad}}} for i in range(5000)]).encode(),
        "tools_list": json.dumps([{"jsonrpc": "2.0", "id": i, "method": "tools/list"} for i in range(5000)]).encode(),
        "unknown_methods": json.dumps([{"jsonrpc": "2.0", "id": i, "method": f"no/such/method/{i}", "params": {}} for i in range(5000)]).encode(),
        "calls": json.dumps(
            [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "search_graph", "arguments": {"query": f"q{i}"}}} for i in range(500)]
        ).encode(),
        "over_limit": b"[" + b",".join([b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"' + b"x" * 1000 + b'"}}'] * 4200) + b"]",
    }
    stats.add("batches.bytes_pings", len(bodies["pings"]))
    client = Http(port, REVIEW, timeout=30, source=CONTENT_FROM)
    session = None
    rounds = 0
    while not stop.is_set() and rounds < 500:
        rounds += 1
        for kind, body in bodies.items():
            if stop.is_set():
                break
            try:
                if session is None or client.renew():
                    session = client.initialize("batcher")
                started = time.monotonic()
                if kind == "over_limit":
                    # refused (413) on its Content-Length, maybe before it is all sent: on a
                    # connection of its own, the status read even after a broken pipe
                    raw = raw_exchange(port, raw_post(REVIEW, body, session=session), timeout=10)
                    status, answer = status_of(raw), raw
                else:
                    status, _, answer = client.post(body, session=session)
                stats.add(f"batches.{kind}.http_{status}", example=None if status == 200 else answer[:200].decode("utf-8", "replace"))
                stats.add(f"batches.{kind}.answer_bytes", len(answer))
                stats.add(f"batches.{kind}.ms", int((time.monotonic() - started) * 1000))
            except Exception as exc:  # noqa: BLE001
                stats.add(f"batches.{kind}.error", example=repr(exc))
                session = None
    client.close()


def read_responses(sock: socket.socket, count: int, deadline: float) -> list[tuple[int, bytes]]:
    """Up to `count` pipelined responses (Content-Length bodies): (status, header bytes) each;
    stops at EOF, at a chunked response, or at the deadline."""
    buf = b""
    out: list[tuple[int, bytes]] = []
    while len(out) < count and time.monotonic() < deadline:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip() or 0)
                elif name.strip().lower() == b"transfer-encoding":
                    return out
            if len(buf) >= end + 4 + length:
                status = int(head[9:12]) if head.startswith(b"HTTP/1.1 ") else 0
                out.append((status, head))
                buf = buf[end + 4 + length :]
                continue
        try:
            chunk = sock.recv(1 << 16)
        except OSError:
            return out
        if not chunk:
            return out
        buf += chunk
    return out


def attack_session_flood(port: int, stop: threading.Event, stats: Stats, counter: list[int], lock: threading.Lock) -> None:
    """initialize of REVIEW, PIPELINE at a time on a kept-alive connection, until SESSION_FLOOD
    of them were sent (by both flood threads together) or the soak ends."""
    pipeline = 50
    init = json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}}}
    ).encode()
    one = raw_post(REVIEW, init).replace(b"Connection: close\r\n", b"")
    sock: socket.socket | None = None
    while not stop.is_set():
        with lock:
            n = min(pipeline, SESSION_FLOOD - counter[0])
            counter[0] += n
            if n <= 0 and len(counter) == 1:
                counter.append(time.monotonic())  # when the last of them was answered
        if n <= 0:
            break
        try:
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", port), timeout=15, source_address=(CONTENT_FROM, 0))
            sock.sendall(one * n)
            answers = read_responses(sock, n, time.monotonic() + 15)
            for status, head in answers:
                stats.add(f"sessions.http_{status}")
                if b"mcp-session-id:" in head.lower():
                    stats.add("sessions.opened")
            if len(answers) < n:
                stats.add("sessions.unanswered", n - len(answers))
                sock.close()
                sock = None
        except OSError as exc:
            stats.add("sessions.error", example=repr(exc))
            if sock is not None:
                sock.close()
            sock = None
    if sock is not None:
        sock.close()


def attack_half_open(port: int, stop: threading.Event, stats: Stats, held: list[socket.socket]) -> None:
    half = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    opened = 0
    while not stop.is_set() and opened < 20 * HALF_OPEN:
        # top up to HALF_OPEN sockets
        while len(held) < HALF_OPEN and not stop.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(HALF_OPEN_FROM, 0))
                sock.sendall(half)
                sock.setblocking(False)
                held.append(sock)
                opened += 1
                stats.add("half_open.opened")
            except OSError as exc:
                stats.add("half_open.connect_failed", example=repr(exc))
                break
        # which ones did moniker close (or answer)?
        for sock in readable_or_closed(held):
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            stats.add(f"half_open.closed_by_moniker_{status_of(data)}")
            held.remove(sock)
            sock.close()
        stop.wait(1.0)


def attack_unknown_names(port: int, stop: threading.Event, stats: Stats) -> None:
    rng = random.Random(7)
    client = Http(port, REVIEW, source=CONTENT_FROM)
    session = None
    n = 0
    while not stop.is_set() and n < 200_000:
        n += 1
        size = rng.choice([1, 8, 64, 512, 4096])
        name = "".join(rng.choices(string.ascii_letters + string.digits + "_-./", k=size))
        if n % 5 == 0:
            name = "".join(rng.choices("éü漢字🙂\u200b", k=min(size, 1000)))
        call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": name, "arguments": {}}}
        try:
            if n % 3 == 0 and name.isascii():
                call["params"]["_meta"] = MODERN_META
                headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
                status, _, body = client.post(json.dumps(call).encode(), headers=headers)
            else:
                if session is None or client.renew():
                    session = client.initialize("names")
                status, _, body = client.post(json.dumps(call).encode(), session=session)
            answer = message_of(body)
            code = answer.get("error", {}).get("code") if isinstance(answer, dict) else None
            stats.add(f"unknown_names.http_{status}.code_{code}")
            if isinstance(answer, dict) and "result" in answer:
                stats.add("unknown_names.RESULT", example=body[:300].decode("utf-8", "replace"))
        except Exception as exc:  # noqa: BLE001
            stats.add("unknown_names.error", example=repr(exc))
            session = None
    client.close()


def attack_subscriptions(port: int, stop: threading.Event, stats: Stats, token: str, renew_every: int, end_old: bool) -> None:
    """resources/subscribe of 200 URIs a POST (198 random, the fixture's two), a new session
    every `renew_every` POSTs (the one before it ended with DELETE when `end_old`)."""
    rng = random.Random(11)
    who = "review" if token == REVIEW else "admin"
    client = Http(port, token, timeout=30, source=CONTENT_FROM)
    session = None
    real = ["fixture://contextgraph-fixture/readme", "fixture://contextgraph-fixture/data"]
    rounds = 0
    while not stop.is_set() and rounds < 5000:
        rounds += 1
        uris = [f"file:///{''.join(rng.choices(string.ascii_lowercase, k=rng.randint(8, 200)))}" for _ in range(198)] + real
        batch = [{"jsonrpc": "2.0", "id": i, "method": "resources/subscribe", "params": {"uri": uri}} for i, uri in enumerate(uris)]
        try:
            if session is None or client.renew() or rounds % renew_every == 0:
                if session is not None and end_old:
                    started = time.monotonic()
                    status, _, _ = client.request("DELETE", session=session, content_type=None)
                    took = time.monotonic() - started
                    stats.add(f"subscribe_{who}.delete_http_{status}", example=f"ended {clock()} after {took:.2f}s")
                    stats.add(f"subscribe_{who}.delete_ms", int(took * 1000))
                session = client.initialize("subscriber")
            status, _, body = client.post(json.dumps(batch).encode(), session=session)
            stats.add(f"subscribe_{who}.http_{status}")
            answers = message_of(body)
            if isinstance(answers, list):
                stats.add(f"subscribe_{who}.accepted", sum(1 for a in answers if isinstance(a, dict) and "result" in a))
                stats.add(f"subscribe_{who}.refused", sum(1 for a in answers if isinstance(a, dict) and "error" in a))
        except Exception as exc:  # noqa: BLE001
            stats.add(f"subscribe_{who}.error", example=repr(exc))
            session = None
        stop.wait(0.05)
    client.close()


def attack_listens(port: int, stop: threading.Event, stats: Stats, held: list[socket.socket]) -> None:
    rng = random.Random(13)
    n = 0
    while not stop.is_set() and n < LISTENS:
        n += 1
        notifications: dict[str, Any] = {"toolsListChanged": True}
        if n % 2 == 0:
            notifications["resourceSubscriptions"] = [f"file:///{rng.random()}" for _ in range(100)] + ["fixture://contextgraph-fixture/readme"]
        body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "subscriptions/listen", "params": {"_meta": MODERN_META, "notifications": notifications}}).encode()
        data = raw_post(REVIEW, body, extra=f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: subscriptions/listen\r\n").replace(
            b"Connection: close\r\n", b""
        )
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(LISTEN_FROM, 0))
            sock.sendall(data)
            first = sock.recv(65536)
            if b"acknowledged" in first or (first.startswith(b"HTTP/1.1 200") and b"acknowledged" in (first + sock.recv(65536))):
                stats.add("listen.acknowledged")
            else:
                stats.add(f"listen.first_{status_of(first)}", example=first[:200].decode("utf-8", "replace"))
            sock.setblocking(False)
            held.append(sock)
        except OSError as exc:
            stats.add("listen.error", example=repr(exc))
        stop.wait(0.05)


def attack_address(port: int, stop: threading.Event, stats: Stats, count: int, seed: int, held: list[tuple[socket.socket, float]]) -> None:
    """The connection flood of a second address: `count` sockets from ADDRESS_FROM, each sending
    half a request header or nothing, every one moniker closes (its header timeout, or its
    place taken by another address) opened again at once; at most 20 x `count` opened."""
    rng = random.Random(seed)
    half = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
    opened = 0
    while not stop.is_set() and opened < 20 * count:
        while len(held) < count and not stop.is_set() and opened < 20 * count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.settimeout(1.0)
                sock.bind((ADDRESS_FROM, 0))
                sock.connect(("127.0.0.1", port))
                if rng.random() < 0.5:
                    sock.sendall(half)
                sock.setblocking(False)
            except OSError as exc:
                sock.close()
                stats.add(f"address.connect_failed.{type(exc).__name__}", example=repr(exc))
                break  # the kernel's backlog is full: try again after the wait below
            held.append((sock, time.monotonic()))
            opened += 1
            stats.add("address.opened")
        gone = set(readable_or_closed([sock for sock, _ in held]))
        for entry in [entry for entry in held if entry[0] in gone]:
            sock, since = entry
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            lived = time.monotonic() - since
            stats.add(f"address.closed_by_moniker_{status_of(data)}.{'before_10s' if lived < 9.5 else 'after_10s'}")
            stats.add("address.lived_ms", int(lived * 1000))
            held.remove(entry)
            sock.close()
        stop.wait(0.2)


def never_read_request(port: int, n: int, session: str | None) -> bytes:
    """A tools/call of the storm server's tool with a progress token of BIG_TOKEN characters,
    asking for an event stream only: in a 2025 session, or (no session) stateless 2026-07-28."""
    token = f"never-read-{n}-" + "t" * BIG_TOKEN
    params: dict[str, Any] = {"name": STORM_TOOL, "arguments": {"n": n}, "_meta": {"progressToken": token}}
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {STORM}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
    if session is not None:
        head += f"Mcp-Session-Id: {session}\r\n"
    else:
        params["_meta"].update(MODERN_META)
        head += f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: {STORM_TOOL}\r\n"
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}).encode()
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def attack_never_read(port: int, stop: threading.Event, stats: Stats, held: list[socket.socket]) -> None:
    """NEVER_READ POSTs at once whose event streams (STORM_PROGRESS notes of BIG_TOKEN bytes
    each, then the answer) are never read: the sockets stay open, nothing is read from them.
    Half in a 2025 session, half stateless. One that moniker closes is sent again (at most
    10 x NEVER_READ in all)."""
    session: str | None = None
    sent = 0
    rounds = 0
    while not stop.is_set() and sent < 10 * NEVER_READ and rounds < 1000:
        rounds += 1
        if session is None:
            opener = Http(port, STORM, timeout=10, source=NEVER_READ_FROM)
            try:
                session = opener.initialize("never-reads")
            except Exception as exc:  # noqa: BLE001
                stats.add("never_read.initialize_error", example=repr(exc))
            opener.close()
            if session is None:
                stop.wait(1.0)
                continue
        while len(held) < NEVER_READ and not stop.is_set() and sent < 10 * NEVER_READ:
            sent += 1
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(NEVER_READ_FROM, 0))
            except OSError as exc:
                stats.add("never_read.connect_failed", example=repr(exc))
                break
            try:
                sock.sendall(never_read_request(port, sent, session if sent % 2 else None))
                stats.add("never_read.sent")
                held.append(sock)
            except OSError as exc:
                stats.add("never_read.send_failed", example=repr(exc))
                sock.close()
        for sock in readable_or_closed(held, closed_only=True):
            stats.add("never_read.closed_by_moniker", example=f"{pending_bytes(sock)} bytes unread")
            held.remove(sock)
            sock.close()
        stop.wait(1.0)


def attack_storm_server(port: int, stop: threading.Event, stats: Stats) -> None:
    """Calls of the storm server's tool, one after the other, so that its storms of
    list_changed notes keep coming. Every fifth call opens a new session of STORM's (the one
    before it is left as it is, never read: no GET stream, no DELETE) and asks for progress
    answered as JSON: its STORM_PROGRESS notes of BIG_TOKEN bytes go to the session's replay
    buffer, so the principal's sessions fill theirs."""
    client = Http(port, STORM, timeout=30, source=CONTENT_FROM)
    session: str | None = None
    n = 0
    while not stop.is_set() and n < 5000:
        n += 1
        with_progress = n % 5 == 0
        try:
            if session is None or client.renew() or with_progress:
                session = client.initialize("storm-caller")
                stats.add("storm.sessions_opened")
            params: dict[str, Any] = {"name": STORM_TOOL, "arguments": {"n": n}}
            headers: dict[str, str] = {}
            if with_progress:
                params["_meta"] = {"progressToken": f"replay-{n}-" + "r" * BIG_TOKEN}
                headers["Accept"] = "application/json"
            started = time.monotonic()
            status, _, body = client.post(
                json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}).encode(), session=session, headers=headers
            )
            answer = message_of(body)
            ok = status == 200 and isinstance(answer, dict) and isinstance(answer.get("result"), dict)
            kind = "call_with_progress" if with_progress else "call"
            stats.add(f"storm.{kind}.{'result' if ok else 'http_' + str(status)}", example=None if ok else body[:200].decode("utf-8", "replace"))
            stats.add(f"storm.{kind}.ms", int((time.monotonic() - started) * 1000))
        except Exception as exc:  # noqa: BLE001
            stats.add("storm.error", example=repr(exc))
            session = None
        stop.wait(0.2)
    client.close()


class Relists:
    """The tools/list requests moniker sent to the storm server so far (read from its record
    as it grows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.total = 0

    def count(self) -> int:
        try:
            with open(self.path, "rb") as record:
                record.seek(self.offset)
                data = record.read()
        except OSError:
            return self.total
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if b"tools/list" in line:
                try:
                    self.total += json.loads(line).get("method") == "tools/list"
                except (ValueError, AttributeError):
                    pass
        return self.total


def sample_rss(pid: int, stop: threading.Event, samples: list[tuple[float, int, int, int]], started: float, relists: Relists) -> None:
    """Each second: (time, RSS KiB, open descriptors, tools/list sent to the storm server so far)."""
    while not stop.is_set():
        rss = rss_kib(pid)
        if rss is None:
            break
        samples.append((time.monotonic() - started, rss, count_fds(pid), relists.count()))
        stop.wait(1.0)


# --------------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------------


def test_soak_hostile_traffic_while_a_client_keeps_calling(soak_gateway) -> None:
    proc, port, record_path, storm_record_path, stderr_path = soak_gateway
    stats = Stats()
    good = Good()  # the well-behaved client on one kept-alive connection
    good_fresh = Good()  # the one that opens each session on a new connection
    goods = {"kept-alive": good, "new connection a session": good_fresh}
    held: list[socket.socket] = []
    listens: list[socket.socket] = []
    never_read: list[socket.socket] = []
    address_held: list[list[tuple[socket.socket, float]]] = [[] for _ in range(ADDRESS_THREADS)]
    samples: list[tuple[float, int, int, int]] = []
    relists = Relists(storm_record_path)
    relists_before = relists.count()  # the storm server's first listing
    flood_counter = [0]
    flood_lock = threading.Lock()
    started = time.monotonic()
    baseline = rss_kib(proc.pid) or 0

    sampler_stop = threading.Event()
    stop = threading.Event()
    sampler = threading.Thread(target=sample_rss, args=(proc.pid, sampler_stop, samples, started, relists), daemon=True)
    workers = [
        threading.Thread(target=well_behaved, args=(port, stop, good), name="well_behaved", daemon=True),
        threading.Thread(target=well_behaved, args=(port, stop, good_fresh, True), name="well_behaved_fresh", daemon=True),
        threading.Thread(target=attack_malformed, args=(port, stop, stats), name="malformed", daemon=True),
        threading.Thread(target=attack_batches, args=(port, stop, stats), name="batches", daemon=True),
        threading.Thread(target=attack_smuggling, args=(port, stop, stats), name="smuggling", daemon=True),
        threading.Thread(target=attack_session_flood, args=(port, stop, stats, flood_counter, flood_lock), name="flood1", daemon=True),
        threading.Thread(target=attack_session_flood, args=(port, stop, stats, flood_counter, flood_lock), name="flood2", daemon=True),
        threading.Thread(target=attack_unknown_names, args=(port, stop, stats), name="unknown_names", daemon=True),
        threading.Thread(target=attack_subscriptions, args=(port, stop, stats, REVIEW, 20, False), name="subscriptions", daemon=True),
        threading.Thread(target=attack_subscriptions, args=(port, stop, stats, ADMIN, 150, True), name="subscriptions_admin", daemon=True),
        threading.Thread(target=attack_listens, args=(port, stop, stats, listens), name="listens", daemon=True),
        threading.Thread(target=attack_never_read, args=(port, stop, stats, never_read), name="never_read", daemon=True),
        threading.Thread(target=attack_storm_server, args=(port, stop, stats), name="storm_server", daemon=True),
    ]
    # the connection floods come FLOOD_DELAY after the others: the clients are connected (and
    # the never-read streams open) when they come
    floods = [
        threading.Thread(target=attack_half_open, args=(port, stop, stats, held), name="half_open", daemon=True),
    ] + [
        threading.Thread(target=attack_address, args=(port, stop, stats, ADDRESS_SOCKETS // ADDRESS_THREADS, 100 + i, address_held[i]), name=f"address{i}", daemon=True)
        for i in range(ADDRESS_THREADS)
    ]
    sampler.start()
    for worker in workers:
        worker.start()
    stop.wait(FLOOD_DELAY)
    for flood in floods:
        flood.start()
    workers += floods
    try:
        deadline = started + SOAK_SECONDS
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    finally:
        stopped = time.monotonic()
        stop.set()
        join_deadline = time.monotonic() + 20
        for worker in workers:
            worker.join(timeout=max(0.1, join_deadline - time.monotonic()))
        still = [w.name for w in workers if w.is_alive()]
        unread = [pending_bytes(sock) for sock in never_read]
        address_at_end = sum(len(each) for each in address_held)
        for sock in held + listens + never_read + [sock for each in address_held for sock, _ in each]:
            try:
                sock.close()
            except OSError:
                pass
    soak_took = time.monotonic() - started

    # After the traffic: moniker alive and healthy, a new well-behaved session still calls.
    alive = proc.poll() is None
    health_status, health_body = healthz(port, timeout=5)
    after_ok = False
    after_detail = ""
    try:
        client = Http(port, ADMIN, timeout=CALL_BOUND, source=GOOD_FROM)
        session = client.initialize("after")
        if session:
            status, _, body = client.post(
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": GOOD_TOOL, "arguments": {}}}).encode(),
                session=session,
            )
            after_ok = status == 200 and "result" in (message_of(body) or {})
            after_detail = f"{status} {body[:200]!r}"
        else:
            after_detail = "initialize refused"
        client.close()
    except Exception as exc:  # noqa: BLE001
        after_detail = repr(exc)
    after_took = time.monotonic() - stopped
    time.sleep(0.5)  # what moniker wrote last reaches the record
    sampler_stop.set()
    sampler.join(timeout=2)

    record = record_path.read_bytes() if record_path.exists() else b""
    lines = record.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    not_objects: list[bytes] = []
    forbidden: list[bytes] = []
    reached: Counter[str] = Counter()  # method (tools/call: its tool) -> lines
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            not_objects.append(line)
            continue
        if not isinstance(message, dict):
            not_objects.append(line)
            continue
        params = message.get("params")
        method = str(message.get("method", "(answer)"))
        if method == "tools/call" and isinstance(params, dict):
            method = f"tools/call {str(params.get('name'))[:40]}"
        reached[method] += 1
        if message.get("method") == "tools/call" and isinstance(params, dict) and params.get("name") == FORBIDDEN:
            forbidden.append(line)

    # What reached the storm server: its calls (those with a progress token), its listings.
    storm_reached: Counter[str] = Counter()
    storm_bytes = storm_record_path.read_bytes() if storm_record_path.exists() else b""
    for line in storm_bytes.split(b"\n"):
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            params = message.get("params")
            asked = isinstance(params, dict) and isinstance(params.get("_meta"), dict) and "progressToken" in params["_meta"]
            storm_reached[message["method"] + (" with progress" if asked else "")] += 1
    # relists a second: between two samples, and over the soak
    rates = [(b[3] - a[3]) / max(0.5, b[0] - a[0]) for a, b in zip(samples, samples[1:])]
    relist_max = max(rates, default=0.0)
    relists_soak = (samples[-1][3] - relists_before) if samples else 0
    relist_mean = relists_soak / max(1.0, samples[-1][0]) if samples else 0.0

    stderr_text = stderr_path.read_text(errors="replace")
    stderr_lines = stderr_text.splitlines()
    levels = Counter(word for line in stderr_lines for word in ("ERROR", "WARN", "panicked") if word in line)
    garbage_warned = sum("not JSON-RPC" in line for line in stderr_lines)
    rss_max = max((kib for _, kib, _, _ in samples), default=0)
    fds_max = max((fds for _, _, fds, _ in samples), default=0)
    trace = ", ".join(f"{t:.0f}s:{kib // 1024}" for t, kib, _, _ in samples[:: max(1, len(samples) // 20)])
    report = (
        f"soak of {SOAK_SECONDS:g} s (took {soak_took:.1f} s; stopping the threads and the checks after: "
        f"{after_took:.1f} s; threads still running: {still or 'none'})\n"
        + "".join(f"well-behaved client ({name}):\n{each.summary()}\n" for name, each in goods.items())
        + f"  after the soak: {'ok' if after_ok else 'FAILED'} {after_detail}\n"
        f"session flood: {flood_counter[0]} initialize sent, "
        f"{'all answered ' + format(flood_counter[1] - started, '.1f') + ' s into the soak' if len(flood_counter) > 1 else 'not all answered'}\n"
        f"moniker RSS: baseline {baseline / 1024:.1f} MiB, max {rss_max / 1024:.1f} MiB (bound {RSS_BOUND_MIB} MiB), "
        f"end {(samples[-1][1] if samples else 0) / 1024:.1f} MiB; open fds max {fds_max}\n"
        f"  RSS MiB over time: {trace}\n"
        f"record: {len(lines)} lines, {len(record)} bytes: {dict(reached.most_common(8))}\n"
        f"storm server: reached by {dict(storm_reached.most_common(8))}; relists {relists_soak} during the soak, "
        f"{relist_mean:.1f}/s on average, at most {relist_max:.1f}/s (bound {RELISTS_PER_SECOND}/s)\n"
        f"never-read streams open at the end: {len(unread)}, bytes waiting unread in each: {unread}\n"
        f"connection flood from {ADDRESS_FROM}: {address_at_end} sockets open at the end\n"
        f"moniker stderr: {len(stderr_lines)} lines, {dict(levels)}; of them saying a server wrote something not JSON-RPC: {garbage_warned}\n"
        f"attack:\n{stats.summary()}"
    )
    print(report)
    (record_path.parent / "soak-report.txt").write_text(report)

    failures = []
    for name, each in goods.items():
        if each.failures or each.answered != each.requests:
            failures.append(
                f"well-behaved requests ({name}) not answered within {CALL_BOUND:g} s: {len(each.failures)} of {each.requests}, first ones:\n    "
                + "\n    ".join(each.failures[:10])
            )
        if each.calls < MIN_GOOD_CALLS:
            failures.append(f"the well-behaved client ({name}) made only {each.calls} tools/call (at least {MIN_GOOD_CALLS} expected)")
    if not after_ok:
        failures.append(f"after the soak, a new well-behaved session could not call: {after_detail}")
    if rss_max >= RSS_BOUND_MIB * 1024:
        failures.append(f"moniker's RSS reached {rss_max / 1024:.1f} MiB (bound {RSS_BOUND_MIB} MiB)")
    CR = b"\r"
    if CR in record:
        failures.append(f"a raw CR reached the server ({record.count(CR)} of them)")
    if not_objects:
        failures.append(f"{len(not_objects)} line(s) that reached the server are not a JSON object, e.g. {not_objects[0][:300]!r}")
    if forbidden:
        failures.append(f"{len(forbidden)} call(s) of {FORBIDDEN} reached the server, e.g. {forbidden[0][:300]!r}")
    if reached["tools/call store_memory"] == 0:
        failures.append("no store_memory call reached the server: the smuggling carriers never got through, the record proves nothing")
    if storm_reached["tools/call"] < 10:
        failures.append(f"only {storm_reached['tools/call']} call(s) reached the storm server: its storms never came")
    if storm_reached["tools/call with progress"] < NEVER_READ:
        failures.append(f"only {storm_reached['tools/call with progress']} call(s) with a progress token reached the storm server: the never-read streams were not there")
    if relist_max > RELISTS_PER_SECOND:
        failures.append(f"moniker listed the storm server {relist_max:.1f} times in a second (at most {RELISTS_PER_SECOND} expected: one relist at a time, 250 ms apart)")
    if not alive:
        failures.append(f"moniker exited ({proc.returncode}) during the soak")
    if health_status != 200:
        failures.append(f"/healthz did not answer 200 after the soak: {health_status} {health_body[:200]}")
    if failures:
        pytest.fail(
            "\n".join(f"- {f}" for f in failures) + f"\n\n{report}\n--- moniker stderr, last lines ---\n" + "\n".join(stderr_lines[-15:]),
            pytrace=False,
        )
