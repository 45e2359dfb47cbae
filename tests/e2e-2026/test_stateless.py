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


def test_a_call_left_waiting_for_input_is_audited_and_blocks_no_one(tmp_path: Path) -> None:
    """A 2026-07-28 client that never answers a server's request for input leaves its call
    parked. When the call's time is over it ends (a time-out) and has its audit line all the
    same; and, over, it no longer counts as a call in progress at its server, so the next
    client's call there still gets its own server's request (it was refused as ambiguous)."""
    import time

    audit = tmp_path / "audit.jsonl"
    config = tmp_path / "moniker.yaml"
    config.write_text(
        f"""servers:
  fx:
    command: "{binary('moniker-fixture')}"
    args: [--sample-tool]
gateway:
  call_timeout: 1s
audit: "{audit}"
"""
    )
    envelope = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}
    call = {"name": "fixture_sample", "arguments": {}, "_meta": envelope}
    with serving_http(config, tmp_path / "serve.log") as (url, _, _):
        status, first = post(url, "tools/call", call, {"Mcp-Name": "fixture_sample"})
        assert status == 200 and first["result"]["resultType"] == "input_required", first
        time.sleep(1.5)  # past the call timeout
        status, second = post(url, "tools/call", call, {"Mcp-Name": "fixture_sample"})
        assert status == 200 and second["result"]["resultType"] == "input_required", second
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(audit.read_text().splitlines() if audit.exists() else []) < 2:
            time.sleep(0.1)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["name"], line["outcome"], line.get("code")) for line in lines] == [
        ("fixture_sample", "timeout", -32042)
    ] * 2, lines


def test_a_stateless_client_s_search_is_taught_by_its_next_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Search learns from calls on the stateless path too: each 2026-07-28 request is a session
    of its own, so what a search asked is the principal's (its token's) until its next call."""
    token = "learning-token-0123456789abcdef"
    # What the gateway learns is this test's alone (the gateway inherits the environment).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config = tmp_path / "moniker.yaml"
    config.write_text(
        f"""servers:
  cg:
    command: "{binary('moniker-fixture')}"
    args: ["{ROOT / 'fixtures' / 'contextgraph.json'}", --echo]
discovery: search
http:
  tokens: [{token}]
"""
    )
    request = "remember a thought for later"

    def call(url: str, name: str, arguments: dict) -> dict:
        headers = {"Authorization": f"Bearer {token}", "Mcp-Name": name}
        status, body = post(url, "tools/call", {"name": name, "arguments": arguments, "_meta": ENVELOPE}, headers)
        assert status == 200 and "result" in body, body
        return body["result"]

    def found(url: str) -> list[str]:
        text = call(url, "search_tools", {"query": request})["content"][0]["text"]
        return [line[2:].split("(")[0] for line in text.splitlines() if line.startswith("- ")]

    with serving_http(config, tmp_path / "serve.log") as (url, _, _):
        before = found(url)
        assert "store_memory" in before and before[0] != "store_memory", before
        stored = call(url, "call_tool", {"name": "store_memory", "arguments": {"content": "a thought"}})
        assert not stored.get("isError"), stored
        assert found(url)[0] == "store_memory"
