#!/usr/bin/env python3
"""What `moniker serve` holds in search mode: its resident memory after its index is built and
it has answered searches, its peak, and a search's round trip, over the findability benchmark's
real inventories served by moniker-fixture (whole servers, in name order, until N tools).

    cargo build --release -p moniker-mcp -p moniker-fixture
    python3 bench/search-memory.py [--tools 527] [--model DIR] [--cached]

--model DIR: search's model run whole (crates/surface/model/fetch.sh DIR); else the table.
--cached: measure a second start, its index read from the cache the first one wrote (else the
first, which builds it). The cache is a directory of the run's own either way.
Linux only (it reads /proc). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / "target" / "release"
QUERIES = [
    "report a bug in the login page",
    "show the files in this folder",
    "translate this text to french",
    "what is the weather in paris",
    "list my kubernetes pods",
]


def config(tools: int, model: str | None, out: Path) -> int:
    """Writes a config with whole servers of the benchmark's inventories until `tools` tools
    (the renames `moniker check --fix` proposes added); returns how many tools it has."""
    folders = [ROOT / "bench" / "findability" / d for d in ("inventories", "inventories-heldout", "inventories-pypi")]
    files = [f for d in folders if d.is_dir() for f in sorted(d.glob("*.json"))]
    lines, count, names = ["servers:"], 0, set()
    for path in files:
        if count >= tools:
            break
        name = path.stem
        if name in names:
            continue
        names.add(name)
        lines.append(f"  {name}:\n    command: {BIN / 'moniker-fixture'}\n    args: [{json.dumps(str(path))}]")
        count += len(json.loads(path.read_text())["tools"])
    lines.append("discovery:\n  mode: search" + (f"\n  model: {json.dumps(model)}" if model else ""))
    out.write_text("\n".join(lines) + "\n")
    subprocess.run([BIN / "moniker", "check", "-c", out, "--fix"], capture_output=True, check=False)
    done = subprocess.run([BIN / "moniker", "check", "-c", out], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the config does not pass `moniker check`:\n{done.stdout}{done.stderr}")
    return count


def status(pid: int) -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {key: int(fields[key].split()[0]) for key in ("VmRSS", "VmHWM")}


def searches(path: Path, env: dict[str, str]) -> tuple[float, list[float], dict[str, int]]:
    """`moniker serve -c PATH` over stdio, asked 20 searches: how long until the first was
    answered (s), each one's round trip (ms), and its memory after them."""
    started = time.monotonic()
    serve = subprocess.Popen(
        [BIN / "moniker", "serve", "-c", path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert serve.stdin and serve.stdout

    def ask(message: dict) -> dict:
        serve.stdin.write((json.dumps(message) + "\n").encode())
        serve.stdin.flush()
        while "id" in message:
            answer = json.loads(serve.stdout.readline())
            if answer.get("id") == message["id"]:
                return answer
        return {}

    ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "search-memory", "version": "0"}}})
    ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times, first = [], 0.0
    for i, query in enumerate(QUERIES * 4):
        begun = time.monotonic()
        answer = ask({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "search_tools", "arguments": {"query": query}}})
        times.append((time.monotonic() - begun) * 1000)
        if "result" not in answer:
            sys.exit(f"search_tools failed: {answer}")
        first = first or time.monotonic() - started
    memory = status(serve.pid)
    serve.stdin.close()
    serve.wait(timeout=30)
    return first, times, memory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=527)
    parser.add_argument("--model")
    parser.add_argument("--cached", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "moniker.yaml"
        tools = config(args.tools, args.model, path)
        env = {**os.environ, "MONIKER_STANDALONE": "1", "XDG_CACHE_HOME": str(Path(work) / "cache")}
        env.pop("MONIKER_MODEL", None)
        if args.cached:
            searches(path, env)
        first, times, memory = searches(path, env)
    times.sort()
    print(json.dumps({
        "tools": tools,
        "semantic": "model" if args.model else "table",
        "index": "cached" if args.cached else "built",
        "first_search_after_s": round(first, 2),
        "search_p50_ms": round(times[len(times) // 2], 2),
        "rss_mb": round(memory["VmRSS"] / 1024, 1),
        "peak_mb": round(memory["VmHWM"] / 1024, 1),
    }))


if __name__ == "__main__":
    main()
