"""Exercise modern_server.py (a 2026-07-28-only server) by hand; a plain script, not a pytest test.

    /work/main/.venv-2026/bin/python tests/e2e-2026/check_modern_server.py

1. Over stdio and over Streamable HTTP, the SDK client pinned to 2026-07-28
   (`Client(..., mode="2026-07-28")`: no initialize, no server/discover probe, per-request `_meta`)
   lists the tools, calls each one (modern_ask through the client's elicitation callback, i.e.
   the InputRequiredResult round trip), reads modern://hello and gets modern_prompt.
2. With raw HTTP (urllib): what the server answers to a legacy `initialize`, to `server/discover`,
   to tools/call POSTs with right, missing and wrong routing / Mcp-Param-* headers, and the
   modern_ask MRTR exchange on the wire. Exits non-zero when an expectation fails.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import encode_header_value

HERE = Path(__file__).resolve().parent
SERVER = HERE / "modern_server.py"
VERSION = "2026-07-28"
FAILURES: list[str] = []


def expect(condition: bool, what: str) -> None:
    print(f"    [{'ok' if condition else 'FAIL'}] {what}")
    if not condition:
        FAILURES.append(what)


def text_of(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def answer_elicitation(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    print(f"    elicitation asked: {params.message!r}")
    return types.ElicitResult(action="accept", content={"answer": "forty-two"})


async def exercise(client: Client, transport: str) -> None:
    print(f"  protocol_version={client.protocol_version} server_info={client.server_info}")
    listed = await client.list_tools()
    for tool in listed.tools:
        print(f"  tool {tool.name}: inputSchema={json.dumps(tool.input_schema)}")
    expect(
        {t.name for t in listed.tools} == {"modern_echo", "modern_add", "modern_region", "modern_ask"}, "four tools"
    )

    echo = await client.call_tool("modern_echo", {"text": "hi"})
    print(f"  modern_echo -> {text_of(echo)!r}")
    expect(text_of(echo) == "modern:hi", "modern_echo")

    add = await client.call_tool("modern_add", {"a": 2, "b": 40})
    print(f"  modern_add -> {text_of(add)!r}")
    expect(text_of(add) == "42", "modern_add")

    for region in ("eu-west", "zürich"):
        out = await client.call_tool("modern_region", {"region": region, "item": "disk"})
        seen = json.loads(text_of(out))
        print(f"  modern_region(region={region!r}) -> {seen}")
        if transport == "http":
            expect(seen["header"] == region, f"Mcp-Param-Region seen by the server = {region!r} (raw {seen['header_raw']!r})")
        else:
            expect(seen["header"] is None, "no Mcp-Param-Region over stdio")

    ask = await client.call_tool("modern_ask", {"question": "What is the answer?"})
    print(f"  modern_ask -> {text_of(ask)!r}")
    expect(text_of(ask) == "answer:forty-two", "modern_ask (elicitation through an input-required result)")

    resource = await client.read_resource("modern://hello")
    body = resource.contents[0].text  # type: ignore[union-attr]
    print(f"  resources/read modern://hello -> {body!r}")
    expect(body == "hello from modern", "resource modern://hello")

    prompts = await client.list_prompts()
    print(f"  prompts: {[p.name for p in prompts.prompts]}")
    prompt = await client.get_prompt("modern_prompt", {"topic": "moniker"})
    rendered = prompt.messages[0].content.text  # type: ignore[union-attr]
    print(f"  prompts/get modern_prompt -> {rendered!r}")
    expect("moniker" in rendered, "prompt modern_prompt")


def first_mcp_error(error: BaseException) -> MCPError | None:
    """The MCPError inside (possibly nested) exception groups, as the SDK's task groups raise it."""
    if isinstance(error, MCPError):
        return error
    for inner in getattr(error, "exceptions", ()):
        if (found := first_mcp_error(inner)) is not None:
            return found
    return None


async def expect_refused(client: Client, what: str) -> None:
    try:
        async with client:
            expect(False, what)
    except BaseException as raised:  # noqa: BLE001 - an ExceptionGroup around the MCPError
        error = first_mcp_error(raised)
        if error is None:
            raise
        print(f"    MCPError {error.error.code}: {error.error.message} data={error.error.data}")
        expect(error.error.code == -32022, f"{what} with -32022")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, port
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise SystemExit("modern_server.py http did not start")
            time.sleep(0.05)


def envelope(**params: Any) -> dict[str, Any]:
    return {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "check_modern_server", "version": "0"},
        },
    }


def post(url: str, body: dict[str, Any], headers: dict[str, str], method: str = "POST") -> tuple[int, str]:
    data = json.dumps(body).encode() if method == "POST" else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json, text/event-stream")
    for name, value in headers.items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def show(title: str, headers: dict[str, str], status: int, body: str) -> None:
    print(f"  -- {title}")
    if headers:
        print(f"     headers: {headers}")
    print(f"     -> HTTP {status} {body}")


def routing(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = encode_header_value(name)
    return headers


def raw_http(url: str) -> None:
    print("\n== raw HTTP (urllib)")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "0"}},
    }
    status, body = post(url, init, {})
    show("legacy initialize (no MCP-Protocol-Version header)", {}, status, body)
    expect('"code":-32022' in body and "2026-07-28" in body, "initialize refused with -32022 naming 2026-07-28")
    status, body = post(url, init, {"MCP-Protocol-Version": "2025-11-25"})
    show("legacy initialize with MCP-Protocol-Version: 2025-11-25", {"MCP-Protocol-Version": "2025-11-25"}, status, body)
    status, body = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, {"MCP-Protocol-Version": "2025-11-25"})
    show("legacy-style tools/list (2025 header, no envelope, no initialize)", {"MCP-Protocol-Version": "2025-11-25"}, status, body)
    expect('"code":-32022' in body, "handshake-era tools/list refused too")
    h = routing("initialize")
    status, body = post(url, {**init, "params": envelope(**init["params"])}, h)
    show("initialize stamped as 2026-07-28 (header + envelope)", h, status, body)

    h = routing("server/discover")
    status, body = post(url, {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": envelope()}, h)
    show("server/discover", h, status, body)
    expect(status == 200 and '"supportedVersions":["2026-07-28"]' in body, "server/discover answers 2026-07-28")
    status, body = post(url, {"jsonrpc": "2.0", "id": 4, "method": "server/discover", "params": envelope()}, {})
    show("server/discover without the MCP-Protocol-Version header (routed to the legacy transport)", {}, status, body)

    call = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": envelope(name="modern_region", arguments={"region": "eu-west", "item": "disk"}),
    }
    good = {**routing("tools/call", "modern_region"), "Mcp-Param-Region": "eu-west"}
    print(f"\n  a correct 2026-07-28 tools/call POST for modern_region needs: {good}")
    print("  (plus Content-Type: application/json and Accept: application/json, text/event-stream)")
    cases: list[tuple[str, dict[str, str], dict[str, Any], int]] = [
        ("tools/call, all headers right", good, call, 200),
        ("Mcp-Param-Region missing", routing("tools/call", "modern_region"), call, 400),
        ("Mcp-Param-Region differs from the body", {**good, "Mcp-Param-Region": "us-east"}, call, 400),
        ("Mcp-Param-Region header, region argument absent",
         good, {**call, "params": envelope(name="modern_region", arguments={"item": "disk"})}, 400),
        ("Mcp-Param-Region lower-case name (header names are case-insensitive)",
         {**routing("tools/call", "modern_region"), "mcp-param-region": "eu-west"}, call, 200),
        ("Mcp-Name missing", {k: v for k, v in good.items() if k != "Mcp-Name"}, call, 400),
        ("Mcp-Name differs", {**good, "Mcp-Name": "modern_echo"}, call, 400),
        ("Mcp-Method missing", {k: v for k, v in good.items() if k != "Mcp-Method"}, call, 400),
        ("MCP-Protocol-Version header differs from _meta", {**good, "MCP-Protocol-Version": "2099-01-01"}, call, 400),
        ("non-ASCII value, sent base64-wrapped",
         {**good, "Mcp-Param-Region": encode_header_value("zürich")},
         {**call, "params": envelope(name="modern_region", arguments={"region": "zürich", "item": "disk"})}, 200),
        ("an unannotated tool with a stray Mcp-Param-Region",
         {**routing("tools/call", "modern_echo"), "Mcp-Param-Region": "eu-west"},
         {**call, "params": envelope(name="modern_echo", arguments={"text": "x"})}, 200),
    ]
    for title, headers, body_json, want in cases:
        status, body = post(url, body_json, headers)
        show(title, headers, status, body)
        expect(status == want, f"{title}: HTTP {want}")

    # tools/list and resources/read / prompts/get: which headers they need.
    for method, params, name in (
        ("tools/list", envelope(), None),
        ("resources/read", envelope(uri="modern://hello"), "modern://hello"),
        ("prompts/get", envelope(name="modern_prompt", arguments={"topic": "x"}), "modern_prompt"),
    ):
        h = routing(method, name)
        status, body = post(url, {"jsonrpc": "2.0", "id": 6, "method": method, "params": params}, h)
        show(f"{method} with {sorted(h)}", h, status, body[:160] + ("..." if len(body) > 160 else ""))
        expect(status == 200, f"{method} answered")
        if name is not None:
            h2 = routing(method)
            status, body = post(url, {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, h2)
            show(f"{method} without Mcp-Name", h2, status, body)
    status, body = post(url, {"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {}}, routing("tools/list"))
    show("tools/list with headers but without the _meta envelope", routing("tools/list"), status, body)
    status, body = post(url, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, routing("notifications/cancelled"))
    show("a notification POST", routing("notifications/cancelled"), status, body)
    status, body = post(url, {}, {"MCP-Protocol-Version": VERSION}, method="GET")
    show("GET /mcp at 2026-07-28", {"MCP-Protocol-Version": VERSION}, status, body)

    # modern_ask on the wire: InputRequiredResult, then the retry with inputResponses + requestState.
    h = routing("tools/call", "modern_ask")
    ask = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": envelope(name="modern_ask", arguments={"question": "Why?"})}
    status, body = post(url, ask, h)
    show("modern_ask, round 1", h, status, body)
    first = json.loads(body)["result"]
    expect(first.get("resultType") == "input_required", "round 1 is an input_required result")
    key = next(iter(first["inputRequests"]))
    retry_params = envelope(
        name="modern_ask",
        arguments={"question": "Why?"},
        inputResponses={key: {"action": "accept", "content": {"answer": "because"}}},
        requestState=first.get("requestState"),
    )
    status, body = post(url, {**ask, "id": 10, "params": retry_params}, h)
    show("modern_ask, round 2 (inputResponses + requestState)", h, status, body)
    expect('answer:because' in body, "round 2 completes with the answer")
    no_cap = {**ask, "id": 11, "params": envelope(name="modern_ask", arguments={"question": "Why?"})}
    no_cap["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {}
    status, body = post(url, no_cap, h)
    show("modern_ask from a client without the elicitation capability", h, status, body)


async def run_clients(http_url: str) -> None:
    print("== stdio, Client(mode='2026-07-28')")
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), "stdio"])
    async with Client(params, mode=VERSION, elicitation_callback=answer_elicitation) as client:
        await exercise(client, "stdio")

    print("\n== stdio, Client(mode='legacy') must be refused")
    await expect_refused(Client(params, mode="legacy"), "legacy client refused over stdio")

    print(f"\n== Streamable HTTP {http_url}, Client(mode='2026-07-28')")
    async with Client(http_url, mode=VERSION, elicitation_callback=answer_elicitation) as client:
        await exercise(client, "http")

    print("\n== HTTP, Client(mode='2026-07-28') calling modern_region WITHOUT listing first")
    async with Client(http_url, mode=VERSION) as client:
        out = await client.call_tool("modern_region", {"region": "ap-south", "item": "cpu"})
        print(f"  -> {text_of(out)}  (first POST had no Mcp-Param-Region: HEADER_MISMATCH, client re-listed and resent)")
        expect(json.loads(text_of(out))["header"] == "ap-south", "client recovers from HEADER_MISMATCH by re-listing")

    print("\n== HTTP, Client(mode='auto') (probes server/discover)")
    async with Client(http_url, mode="auto") as client:
        print(f"  negotiated {client.protocol_version}")
        expect(client.protocol_version == VERSION, "auto client lands on 2026-07-28")

    print("\n== HTTP, Client(mode='legacy') must be refused")
    await expect_refused(Client(http_url, mode="legacy"), "legacy client refused over HTTP")


def main() -> None:
    process, port = start_http()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        anyio.run(run_clients, url)
        raw_http(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    print(f"\n{len(FAILURES)} failure(s)" + (": " + "; ".join(FAILURES) if FAILURES else ""))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
