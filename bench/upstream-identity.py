#!/usr/bin/env python3
"""What acting as each caller upstream costs (`auth.exchange`): a call's round trip through
`moniker serve --http` to tests/e2e/oauth/server.mjs's MCP server, with the caller's token
exchanged (RFC 8693, the exchanged token from moniker's cache) against the same server behind a
static `Authorization` header; and moniker's memory per person, from the resident size after
N people with tokens of their own have each called once.

    cargo build --release -p moniker-mcp
    npm ci --prefix tests/e2e
    .venv/bin/python bench/upstream-identity.py [--calls 500] [--people 1000]

One run, alternating the two gateways in rounds; prints one JSON object (p50/p99 in ms and
their ratio, bytes per person). Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from oauth_harness import SCOPE, start_oauth_servers  # noqa: E402
from test_resource_server import free_port  # noqa: E402

MONIKER = ROOT / "target" / "release" / "moniker"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def serve(port: int, config: dict, home: Path) -> subprocess.Popen:
    path = home / f"moniker-{port}.json"
    path.write_text(json.dumps(config))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_DATA_HOME": str(home), "XDG_STATE_HOME": str(home)}
    proc = subprocess.Popen(
        [str(MONIKER), "serve", "--http", f"127.0.0.1:{port}", "-c", str(path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(home / f"moniker-{port}.log", "w"), env=env,
    )
    for _ in range(200):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).text.startswith("ok"):
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"moniker on {port} did not start")


def session(client: httpx.Client, url: str, token: str) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    headers = {**HEADERS, "authorization": f"Bearer {token}"}
    opened = client.post(url, json=init, headers=headers)
    opened.raise_for_status()
    headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def call(client: httpx.Client, url: str, headers: dict[str, str], n: int) -> float:
    body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
    start = time.perf_counter()
    answer = client.post(url, json=body, headers=headers)
    took = time.perf_counter() - start
    assert answer.status_code == 200 and "sub=" in answer.text, answer.text
    return took


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--people", type=int, default=1000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="moniker-upstream-"))
    ports = {"exchange": free_port(), "static": free_port()}
    urls = {k: f"http://127.0.0.1:{p}/mcp" for k, p in ports.items()}
    load = os.getloadavg()[0]
    with start_oauth_servers(home, 3600, resources=list(urls.values())) as idp:
        http_auth = lambda k: {"auth": {"resource": urls[k], "issuer": idp.issuer, "scopes": [SCOPE]}}  # noqa: E731
        exchange = {"servers": {"up": {"url": idp.mcp, "auth": {
            "client_id": idp.client_id, "client_secret": idp.client_secret, "grant": "client_credentials",
            "scope": SCOPE, "exchange": {"cache": "1h"}}}}, "http": http_auth("exchange")}
        fixed = idp.client_credentials(idp.mcp)
        static = {"servers": {"up": {"url": idp.mcp, "headers": {"Authorization": f"Bearer {fixed}"}}},
                  "http": http_auth("static")}
        procs = {"exchange": serve(ports["exchange"], exchange, home), "static": serve(ports["static"], static, home)}
        try:
            times: dict[str, list[float]] = {"exchange": [], "static": []}
            with httpx.Client(timeout=30) as client:
                heads = {k: session(client, urls[k], idp.mint({"sub": "alice", "aud": urls[k]})) for k in urls}
                for k in urls:  # warm: the exchange made once, connections open
                    for n in range(20):
                        call(client, urls[k], heads[k], n)
                for round_ in range(10):
                    for k in ("exchange", "static") if round_ % 2 == 0 else ("static", "exchange"):
                        times[k] += [call(client, urls[k], heads[k], n) for n in range(args.calls // 10)]
                before = rss(procs["exchange"].pid)
                for n in range(args.people):
                    token = idp.mint({"sub": f"person-{n}", "aud": urls["exchange"]})
                    headers = {**HEADERS, "authorization": f"Bearer {token}"}
                    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "arguments": {}},
                            "_meta": {}}
                    one = session(client, urls["exchange"], token)
                    call(client, urls["exchange"], one, n)
                    client.delete(urls["exchange"], headers=one)
                    del headers, body
                after = rss(procs["exchange"].pid)
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait(timeout=10)

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    out = {
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "calls_each": len(times["static"]),
        "static_p50_ms": round(pct(times["static"], 0.5), 3),
        "exchange_p50_ms": round(pct(times["exchange"], 0.5), 3),
        "static_p99_ms": round(pct(times["static"], 0.99), 3),
        "exchange_p99_ms": round(pct(times["exchange"], 0.99), 3),
        "p50_ratio": round(statistics.median(times["exchange"]) / statistics.median(times["static"]), 3),
        "people": args.people,
        "rss_growth_bytes": after - before,
        "bytes_per_person": round((after - before) / args.people),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
