"""Two `moniker serve --http` replicas behind HAProxy (from Debian's packages), sharing their
run-time toolsets through Redis, for 2026-07-28 clients (stateless: any replica answers any
request) and 2025 clients (their sessions stick to one replica, by `Mcp-Session-Id`).

- a modern client's requests alternate between the replicas and all succeed;
- a toolset built through replica A is used through replica B (and through the balancer,
  at `/mcp/<toolset>`);
- with one replica killed mid-run, the client's next requests succeed through the other;
- a legacy client's session works through the balancer (stickiness on `Mcp-Session-Id`).

Redis and HAProxy are started here on 127.0.0.1 and stopped at the end; `scripts/test`
installs them (`apt-get install redis-server haproxy`). The test is skipped, saying why,
only where they are not installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

from support import ROOT, binary, free_port, serving_http, started

REDIS = shutil.which("redis-server")
HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)

pytestmark = pytest.mark.skipif(
    not (REDIS and HAPROXY), reason="redis-server and haproxy are not installed (scripts/test installs them)"
)


HAPROXY_CONFIG = """global
    maxconn 256
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 2
    option redispatch
    retry-on conn-failure empty-response
frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    # 2025 sessions stick to the replica that created them (the id it answered initialize
    # with); 2026-07-28 requests carry no session id and go round robin.
    stick-table type string len 64 size 10k expire 30m
    stick on req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
    server a 127.0.0.1:{a}
    server b 127.0.0.1:{b}
"""


def replica_config(tmp_path: Path, redis_port: int) -> Path:
    path = tmp_path / "replica.yaml"
    path.write_text(
        f"""servers:
  cg:
    command: "{binary('moniker-fixture')}"
    args: ["{ROOT / 'fixtures' / 'contextgraph.json'}", --echo]
toolsets:
  manage: true
  store: redis://127.0.0.1:{redis_port}/0
"""
    )
    return path


def calls_in(log: Path) -> int:
    return log.read_text().count("tool call requested=")


def test_replicas_share_toolsets_and_survive_one_going_away(tmp_path: Path) -> None:
    redis_port = free_port()
    with started(
        [REDIS, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        redis_port,
        "redis-server",
        tmp_path / "redis.log",
    ):
        config = replica_config(tmp_path, redis_port)
        with serving_http(config, tmp_path / "a.log", "debug") as (
            a_url,
            a_log,
            a_process,
        ), serving_http(config, tmp_path / "b.log", "debug") as (b_url, b_log, _):
            a_port = int(a_url.split(":")[2].split("/")[0])
            b_port = int(b_url.split(":")[2].split("/")[0])
            lb_port = free_port()
            haproxy_config = tmp_path / "haproxy.cfg"
            haproxy_config.write_text(HAPROXY_CONFIG.format(port=lb_port, a=a_port, b=b_port))
            with started(
                [HAPROXY, "-db", "-f", str(haproxy_config)], lb_port, "haproxy", tmp_path / "haproxy.log"
            ):
                lb = f"http://127.0.0.1:{lb_port}/mcp"

                async def run() -> None:
                    with anyio.fail_after(60):
                        # Modern requests alternate between the replicas, and all succeed.
                        async with Client(lb, mode="2026-07-28") as client:
                            for i in range(6):
                                result = await client.call_tool("store_memory", {"content": f"m{i}"})
                                assert not result.is_error, result
                        assert calls_in(a_log) > 0 and calls_in(b_log) > 0, (calls_in(a_log), calls_in(b_log))

                        # A toolset built through A is used through B, and through the balancer.
                        async with Client(a_url, mode="2026-07-28") as client:
                            built = await client.call_tool(
                                "build-toolset", {"name": "memories", "tools": ["store_memory"]}
                            )
                            assert not built.is_error, built
                            path = built.structured_content["url_path"]
                            assert path == "/mcp/memories", built.structured_content
                        base = lambda url: url.removesuffix("/mcp")  # noqa: E731
                        for url in (f"{base(b_url)}{path}", f"{base(lb)}{path}"):
                            async with Client(url, mode="2026-07-28") as client:
                                tools = {t.name for t in (await client.list_tools()).tools}
                                assert tools == {"store_memory"}, (url, tools)

                        # A 2025 session sticks to its replica through the balancer.
                        async with Client(lb, mode="legacy") as client:
                            for i in range(4):
                                result = await client.call_tool("store_memory", {"content": f"s{i}"})
                                assert not result.is_error, result

                anyio.run(run)

                # One replica goes away mid-run: the next requests go to the other.
                a_process.kill()
                a_process.wait(timeout=10)

                async def after() -> None:
                    with anyio.fail_after(60):
                        async with Client(lb, mode="2026-07-28") as client:
                            for i in range(4):
                                result = await client.call_tool("store_memory", {"content": f"after{i}"})
                                assert not result.is_error, result

                anyio.run(after)
