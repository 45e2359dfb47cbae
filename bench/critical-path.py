#!/usr/bin/env python3
"""moniker's own time on a call's critical path, read from the kernel's clock: for each message a
gateway passes on, the time from the system call that woke it with the message (the last wait
that returned, on any of its threads, before the `read`; else the `read` itself) to the `write`
that passes it on, taken from the
syscall tracepoints (`perf record -e raw_syscalls:*`) of the gateway's process alone. Unlike a
call's latency, it leaves out the wake-ups (of the gateway, the server and the client), whose
cost on a VM varies by tens of µs from one minute to the next, and keeps only what runs between
them: what a change to the gateway's own path moves.

Measures, at 1,000 tools behind one echo server, with `moniker-load` one call at a time:
    relay-stdio   moniker-relay over stdio (the floor: the message passed on unread)
    stdio         moniker serve --standalone
    relay-http    moniker-relay over HTTP/1.1
    http          moniker serve --http, MCP 2025
    http-2026     moniker serve --http, MCP 2026-07-28
and prints, for each, the median and 90th percentile of the two hops: *request* (client to
server) and *answer* (server to client), in µs, over CALLS calls.

    python3 bench/critical-path.py [--bin target/release] [--calls 5000] [--rounds 3] [ONLY...]

Needs `perf` and the right to trace (root, or perf_event_paranoid -1); a release build of
moniker, moniker-fixture, moniker-load and moniker-relay. By hand: nothing in the tests runs it.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

READS = {0, 19, 45, 47}  # read, readv, recvfrom, recvmsg
WRITES = {1, 20, 44, 46}  # write, writev, sendto, sendmsg
WAITS = {7, 232, 281, 441}  # poll, epoll_wait, epoll_pwait, epoll_pwait2
# The syscall tracepoints, recorded (then `-- COMMAND` or `-p PID`).
RECORD = ["perf", "record", "-q", "-e", "raw_syscalls:sys_enter", "-e", "raw_syscalls:sys_exit"]
LINE = re.compile(r"^\s*(\d+)/(\d+)\s+([\d.]+):\s+raw_syscalls:sys_(enter|exit):\s+NR (\d+)(?: \(([0-9a-f]+), [0-9a-f]+, ([0-9a-f]+))?(?: = (-?\d+))?")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Fds:
    """The gateway's descriptors that matter: where it reads its server's answers and writes it
    requests (its ends of the server's stdout and stdin), and those whose reads and writes are
    not messages passed on (eventfds, the server's stderr, its own stderr)."""

    answers: int
    server_in: int
    ignored: set[int]


def fds_of(pid: int) -> Fds:
    """`pid`'s [`Fds`], from /proc, matched by pipe with its server child's. Waits for the
    server to start."""
    for _ in range(500):
        try:
            children = []
            for task in Path(f"/proc/{pid}/task").iterdir():
                children += (task / "children").read_text().split()
            theirs = [{n: os.readlink(f"/proc/{child}/fd/{n}") for n in (0, 1, 2)} for child in children]
            ours = {int(fd.name): os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
            answers = [fd for fd, link in ours.items() if any(link == child[1] for child in theirs)]
            server_in = [fd for fd, link in ours.items() if any(link == child[0] for child in theirs)]
            if answers and server_in:
                ignored = {2} | {
                    fd for fd, link in ours.items() if "eventfd" in link or any(link == child[2] for child in theirs)
                }
                return Fds(answers[0], server_in[0], ignored)
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"no descriptor of {pid} is a pipe to a child's stdin and stdout")


def hops(trace: str, pid: int, fds: Fds) -> dict[str, list[float]]:
    """The request and answer hops of `pid`'s threads, in µs, from `perf script` output.

    A hop starts when the gateway is woken with a message: the exit of the last wait that
    returned (on any of its threads) before the first `read` of it, else that `read`'s exit.
    A request is read on the client's descriptor (the one most read, of those that are neither
    the server's nor ignored) and ends at the entry of the next `write` to the server's stdin;
    an answer is read on the server's stdout and ends at the next `write` to anything but the
    server and the ignored descriptors (the client).
    """
    events = []
    for line in trace.splitlines():
        m = LINE.match(line)
        if m and int(m.group(1)) == pid:
            fd = int(m.group(6), 16) if m.group(6) else -1
            ret = int(m.group(8)) if m.group(8) else 0
            events.append((int(m.group(2)), float(m.group(3)), m.group(4), int(m.group(5)), fd, ret))
    entered: dict[int, tuple[int, int]] = {}  # tid -> (nr, fd) of its syscall in progress
    reads: Counter[int] = Counter()
    for tid, _, kind, nr, fd, ret in events:
        if kind == "enter":
            entered[tid] = (nr, fd)
        elif (call := entered.pop(tid, None)) and call[0] in READS and ret > 0:
            reads[call[1]] += 1
    client = next((fd for fd, _ in reads.most_common() if fd != fds.answers and fd not in fds.ignored), None)
    out: dict[str, list[float]] = defaultdict(list)
    woke: float | None = None  # the last wait that returned since the last hop ended
    hop: tuple[float, str] | None = None  # (start, "request" or "answer") of the hop under way
    entered.clear()
    for tid, t, kind, nr, fd, ret in events:
        if kind == "enter":
            entered[tid] = (nr, fd)
            ends = hop and nr in WRITES and (
                fd == fds.server_in if hop[1] == "request" else fd != fds.server_in and fd not in fds.ignored
            )
            if ends:
                out[hop[1]].append((t - hop[0]) * 1e6)
                hop, woke = None, None
            continue
        nr_in, fd_in = entered.pop(tid, (nr, -1))
        if nr in WAITS and ret > 0 and hop is None:
            woke = t
        elif nr_in in READS and ret > 0 and hop is None and fd_in in (client, fds.answers):
            # A message read in parts (its line, then the newline) starts at the first part.
            hop = (woke if woke is not None else t, "answer" if fd_in == fds.answers else "request")
    return out


def trace_stdio(args, command: list[str]) -> tuple[str, int, Fds]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        pidfile = Path(tmp) / "pid"
        # The gateway runs under `sh`, which writes its pid and then becomes it.
        wrapped = ["sh", "-c", f'echo $$ > {pidfile}; exec "$@"', "sh", *command]
        perf = [*RECORD, "-o", str(data), "--", *wrapped]
        running = load(args, ["--", *perf], wait=False)
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        fds = fds_of(pid)
        if running.wait() != 0:
            raise SystemExit(f"moniker-load failed on {command}")
        return script(data), pid, fds


def trace_http(args, command: list[str], modern: bool) -> tuple[str, int, Fds]:
    port = free_port()
    server = subprocess.Popen([c.replace("@PORT@", str(port)) for c in command], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "perf.data"
            perf = subprocess.Popen(
                [*RECORD, "-o", str(data), "-p", str(server.pid)],
                stderr=subprocess.DEVNULL,
            )
            time.sleep(0.5)
            fds = fds_of(server.pid)
            load(args, ["--url", f"http://127.0.0.1:{port}/mcp", *(["--modern"] if modern else [])])
            perf.send_signal(signal.SIGINT)
            perf.wait()
            return script(data), server.pid, fds
    finally:
        server.kill()
        server.wait()


def load(args, rest: list[str], wait: bool = True) -> subprocess.Popen:
    running = subprocess.Popen(
        [str(args.bin / "moniker-load"), "--tool", "tool_00001", "--arguments", '{"query":"bench"}', "--calls", str(args.calls),
         "--warmup", "200", "--pipelined", "1", "--inflight", "1", "--lists", "1", "--no-memory", *rest],
        stdout=subprocess.DEVNULL,
    )
    if wait and running.wait() != 0:
        raise SystemExit("moniker-load failed")
    return running


def script(data: Path) -> str:
    return subprocess.run(
        ["perf", "script", "--ns", "-i", str(data), "-F", "pid,tid,time,event,trace"], check=True, capture_output=True, text=True
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", type=Path, default=Path("target/release"))
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("only", nargs="*")
    args = parser.parse_args()
    args.bin = args.bin.resolve()
    server = [str(args.bin / "moniker-fixture"), "--echo", "--tools-count", "1000"]
    config = Path(tempfile.mkdtemp()) / "moniker.yaml"
    config.write_text(f'servers:\n  s1: {{ command: {server[0]}, args: [--echo, --tools-count, "1000"] }}\n')
    moniker = str(args.bin / "moniker")
    systems = {
        "relay-stdio": lambda: trace_stdio(args, [str(args.bin / "moniker-relay"), "--", *server]),
        "stdio": lambda: trace_stdio(args, [moniker, "serve", "--standalone", "-c", str(config)]),
        "relay-http": lambda: trace_http(args, [str(args.bin / "moniker-relay"), "--http", "127.0.0.1:@PORT@", "--", *server], False),
        "http": lambda: trace_http(args, [moniker, "serve", "--http", "127.0.0.1:@PORT@", "-c", str(config)], False),
        "http-2026": lambda: trace_http(args, [moniker, "serve", "--http", "127.0.0.1:@PORT@", "-c", str(config)], True),
    }
    chosen = args.only or list(systems)
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name in chosen:
            trace, pid, fds = systems[name]()
            for hop, values in hops(trace, pid, fds).items():
                if len(values) >= args.calls / 2:
                    found[name][hop].append(statistics.median(values))
                    found[name][hop + " p90"].append(statistics.quantiles(values, n=10)[-1])
    print(f"Critical path a call, µs ({args.calls} calls, {args.rounds} rounds, 1,000 tools; load {load_before:.2f} before, {os.getloadavg()[0]:.2f} after):")
    print("the median over the rounds of each round's median (and 90th percentile), lowest-highest round in brackets.\n")
    print("| system | request | request p90 | answer | answer p90 | both (medians) |")
    print("|---|---|---|---|---|---|")
    for name in chosen:
        f = found[name]

        def cell(key: str) -> str:
            v = f.get(key)
            return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" if v else "-"

        both = statistics.median(f["request"]) + statistics.median(f["answer"]) if f.get("request") and f.get("answer") else None
        print(f"| {name} | {cell('request')} | {cell('request p90')} | {cell('answer')} | {cell('answer p90')} | {both:.1f} |" if both else f"| {name} | - | - | - | - | - |")


if __name__ == "__main__":
    sys.exit(main())
