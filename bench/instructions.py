#!/usr/bin/env python3
"""What moniker executes a call, counted by valgrind's callgrind: instructions (and calls to
malloc) a `tools/call`, in all and by function, over stdio and over HTTP (2025 and 2026-07-28).
Unlike latency or time, the count is the same run after run (to within a few instructions a
call), whatever the VM does: a change of 1% shows as 1%.

Each path runs once unmeasured (so that both measured runs start alike, from what moniker kept
of the server's listing), then twice under callgrind, with `moniker-load` making 200 and then
200 + MORE sequential calls (1,000 tools behind one echo server); the difference divided by
MORE is what one call costs, start-up and warm-up aside.

    python3 bench/instructions.py [--bin target/release] [--more 1000] [--top 25] [PATH...]
    PATH: stdio, http, http-2026 (all three by default)

Needs valgrind (callgrind_annotate) and a release build of moniker, moniker-fixture and
moniker-load. By hand: nothing in the tests runs it (a run takes a minute or two a path).
"""

from __future__ import annotations

import argparse
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

FIRST = 200  # calls of the first run (the second makes FIRST + MORE)
COST = re.compile(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)")
CALLER = re.compile(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+<\s+(.*)\((\d[\d,]*)x\)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(args, calls: int, rest: list[str]) -> None:
    command = [str(args.bin / "moniker-load"), "--tool", "tool_00001", "--arguments", '{"query":"bench"}',
               "--calls", str(calls), "--warmup", "0", "--pipelined", "1", "--inflight", "1", "--lists", "1",
               "--no-memory", *rest]
    if subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900).returncode != 0:
        raise SystemExit(f"moniker-load failed: {' '.join(command)}")


def record(args, path: str, calls: int, out: Path | None, config: Path) -> None:
    """One run of `path` under callgrind, its profile written to `out` (without callgrind when
    `out` is `None`)."""
    grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] if out else []
    moniker = str(args.bin / "moniker")
    if path == "stdio":
        load(args, calls, ["--", *grind, moniker, "serve", "--standalone", "-c", str(config)])
        return
    port = free_port()
    server = subprocess.Popen([*grind, moniker, "serve", "--http", f"127.0.0.1:{port}", "-c", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).read()
                break
            except OSError:
                time.sleep(0.2)
        load(args, calls, ["--url", f"http://127.0.0.1:{port}/mcp", *(["--modern"] if path == "http-2026" else [])])
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)


def costs(profile: Path) -> Counter:
    """Instructions by function (their own, not their callees'), and `PROGRAM TOTALS`."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", str(profile)],
                          capture_output=True, text=True, check=True).stdout
    found: Counter = Counter()
    for line in text.splitlines():
        if m := COST.match(line):
            found[re.sub(r"::h[0-9a-f]{16}", "", m.group(2)).split(" [")[0]] += int(m.group(1).replace(",", ""))
    return found


def mallocs(profile: Path) -> int:
    """How many times malloc was called."""
    text = subprocess.run(["callgrind_annotate", "--tree=caller", "--threshold=100", str(profile)],
                          capture_output=True, text=True, check=True).stdout
    total, block = 0, []
    for line in text.splitlines():
        if not line.strip():
            block = []
            continue
        block.append(line)
        if "*" in line and "malloc.c:malloc " in line:
            total += sum(int(m.group(3).replace(",", "")) for b in block[:-1] if (m := CALLER.match(b)))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", type=Path, default=Path("target/release"))
    parser.add_argument("--more", type=int, default=1000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("paths", nargs="*", default=["stdio", "http", "http-2026"])
    args = parser.parse_args()
    args.bin = args.bin.resolve()
    work = Path(tempfile.mkdtemp())
    config = work / "moniker.yaml"
    fixture = args.bin / "moniker-fixture"
    config.write_text(f'servers:\n  s1: {{ command: {fixture}, args: [--echo, --tools-count, "1000"], prefix: false }}\n')
    for path in args.paths:
        # Once first, unmeasured: what moniker keeps of a server's listing from a run before
        # makes the next start another (a start from nothing would count in the first run only).
        record(args, path, 1, None, config)
        runs = []
        for calls in (FIRST, FIRST + args.more):
            out = work / f"{path}.{calls}"
            record(args, path, calls, out, config)
            runs.append((costs(out), mallocs(out)))
        (before, m_before), (after, m_after) = runs
        each = {name: (after[name] - before[name]) / args.more for name in after | before}
        print(f"== {path}: {each['PROGRAM TOTALS']:,.0f} instructions a call, "
              f"{(m_after - m_before) / args.more:.1f} mallocs a call ({args.more} calls)")
        ranked = sorted((n for n in each if n != "PROGRAM TOTALS"), key=lambda n: -each[n])
        for name in ranked[: args.top]:
            print(f"  {each[name]:8,.0f}  {name[:140]}")


if __name__ == "__main__":
    sys.exit(main())
