"""The 2026-07-28 era's rules over HTTP, as the official conformance suite checks them
(`server-stateless`, `caching`), sent as raw JSON-RPC: a request without its envelope is
refused with -32602 and HTTP 400; the methods 2026-07-28 removed are not found (-32601, HTTP
404) for a request of that era while a 2025 session keeps them; a resource read carries its
cache hints."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support import ROOT, binary, serving_http

VERSION = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


def post(url: str, method: str, params: dict, headers: dict | None = None) -> tuple[int, dict]:
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()
    request = urllib.request.Request(
        url,
        data=body,
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            # The 2026-07-28 routing headers: the method, and the name or URI it names.
            "Mcp-Method": method,
            **({"Mcp-Name": params["uri"]} if method.startswith("resources/") and "uri" in params else {}),
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.fixture
def url(tmp_path: Path):
    config = tmp_path / "moniker.yaml"
    config.write_text(
        f"""servers:
  cg:
    command: "{binary('moniker-fixture')}"
    args: ["{ROOT / 'fixtures' / 'contextgraph.json'}", --echo]
"""
    )
    with serving_http(config, tmp_path / "serve.log") as (url, _, _):
        yield url


def test_a_request_without_its_envelope_is_refused(url: str) -> None:
    for params in ({}, {"_meta": {"io.modelcontextprotocol/clientInfo": {"name": "x", "version": "0"}}}):
        status, body = post(url, "server/discover", params)
        assert (status, body["error"]["code"], body["id"]) == (400, -32602, 7), body
    status, body = post(url, "server/discover", {"_meta": ENVELOPE})
    assert status == 200 and VERSION in body["result"]["supportedVersions"], body


def test_the_removed_methods_are_not_found_in_the_new_era(url: str) -> None:
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"]:
        status, body = post(url, method, {"_meta": ENVELOPE, "uri": "x://y", "level": "info"})
        assert (status, body["error"]["code"]) == (404, -32601), (method, body)
    # A 2025 session keeps them.
    status, body = post(
        url,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}},
        {"MCP-Protocol-Version": "2025-11-25"},
    )
    assert status == 200 and body["result"]["protocolVersion"] == "2025-11-25", body


def test_a_resource_read_says_how_long_it_may_be_cached(url: str) -> None:
    status, listed = post(url, "resources/list", {"_meta": ENVELOPE})
    assert status == 200, listed
    resources = listed["result"]["resources"]
    if not resources:
        pytest.skip("the inventory has no resource")
    status, read = post(url, "resources/read", {"_meta": ENVELOPE, "uri": resources[0]["uri"]})
    assert status == 200, read
    result = read["result"]
    assert result["resultType"] == "complete" and result["ttlMs"] >= 0, result
    assert result["cacheScope"] in ("public", "private"), result
