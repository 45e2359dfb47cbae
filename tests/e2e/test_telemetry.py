"""OpenTelemetry traces through moniker, end to end.

A real OTLP/HTTP receiver (this file's, decoding with the official `opentelemetry-proto`
types) stands where traces go; the official Python SDK calls a tool through moniker with a
W3C `traceparent` in `_meta`; the server behind moniker (the fixture with `--record`) keeps
what it received. moniker's span of the call is parented on the client's; its span of the
request to the server is the call's child; and the `traceparent` the server received names that
span. With telemetry off, nothing is sent and the client's `traceparent` reaches the server as
it came."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"


class Receiver:
    """An OTLP/HTTP (protobuf) traces endpoint on 127.0.0.1: every span it was sent, with the
    `service.name` of its resource."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, trace_pb2.Span]] = []
        self.posts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.posts += 1
                for resource_spans in request.resource_spans:
                    service = next(
                        (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"),
                        "",
                    )
                    for scope in resource_spans.scope_spans:
                        receiver.spans.extend((service, span) for span in scope.spans)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait(self, count: int, within: float = 15.0) -> list[tuple[str, trace_pb2.Span]]:
        deadline = time.monotonic() + within
        while len(self.spans) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.spans)


def attributes(span: trace_pb2.Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        out[a.key] = getattr(a.value, kind) if kind else None
    return out


def received_traceparents(record: Path) -> list[str | None]:
    """The `_meta.traceparent` of every tools/call the fixture received."""
    out = []
    for line in record.read_text().splitlines():
        message = json.loads(line)
        if message.get("method") == "tools/call":
            out.append((message["params"].get("_meta") or {}).get("traceparent"))
    return out


def config(write_config, fixture_bin: Path, record: Path, **rest: Any) -> Path:
    return write_config({"servers": {"fx": {"command": str(fixture_bin), "args": ["--record", str(record)]}}, **rest})


async def test_a_call_is_traced_from_the_client_through_moniker_to_the_server(
    moniker, write_config, fixture_bin: Path, tmp_path: Path
) -> None:
    receiver = Receiver()
    try:
        record = tmp_path / "record.jsonl"
        path = config(
            write_config,
            fixture_bin,
            record,
            telemetry={"endpoint": receiver.url, "service_name": "moniker-e2e"},
        )
        async with moniker(path) as session:
            result = await session.call_tool("echo", {"text": "hi"}, meta={"traceparent": TRACEPARENT})
            assert not result.isError, result
        # moniker exited with its session: its last spans were flushed on the way out.
        spans = [s for _, s in receiver.wait(2) if s.trace_id.hex() == TRACE_ID]
        services = {service for service, _ in receiver.spans}
    finally:
        receiver.close()
    assert services == {"moniker-e2e"}, services

    handled = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
    sent = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_CLIENT]
    assert len(handled) == 1 and len(sent) == 1, spans
    call, forward = handled[0], sent[0]

    assert call.parent_span_id.hex() == CLIENT_SPAN, call
    assert call.name == "tools/call echo", call.name
    seen = attributes(call)
    for key, value in {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "moniker.server": "fx",
        "moniker.origin": "echo",
        "moniker.tool": "echo",
        "moniker.via": "name",
        "moniker.outcome": "ok",
        "moniker.principal": "stdio",
    }.items():
        assert seen.get(key) == value, (key, seen)
    assert "mcp.protocol.version" in seen, seen
    assert "error.type" not in seen, seen

    assert forward.parent_span_id == call.span_id, forward
    assert forward.name == "tools/call echo", forward.name
    assert attributes(forward).get("moniker.server") == "fx", attributes(forward)
    assert forward.start_time_unix_nano >= call.start_time_unix_nano
    assert forward.end_time_unix_nano <= call.end_time_unix_nano

    # The server got moniker's span as its parent, in the same trace.
    assert received_traceparents(record) == [f"00-{TRACE_ID}-{forward.span_id.hex()}-01"]


async def test_an_error_is_on_the_span(moniker, write_config, fixture_bin: Path, tmp_path: Path) -> None:
    receiver = Receiver()
    try:
        path = config(write_config, fixture_bin, tmp_path / "record.jsonl", telemetry=receiver.url)
        async with moniker(path) as session:
            try:
                await session.call_tool("no_such_tool", {}, meta={"traceparent": TRACEPARENT})
            except Exception:
                pass
        spans = [s for _, s in receiver.wait(1) if s.trace_id.hex() == TRACE_ID]
    finally:
        receiver.close()
    assert len(spans) == 1, spans  # refused: nothing was sent to a server
    seen = attributes(spans[0])
    assert seen.get("error.type") == "-32004" and seen.get("moniker.outcome") == "unknown", seen
    assert spans[0].status.code == trace_pb2.Status.STATUS_CODE_ERROR, spans[0].status


async def test_the_standard_variables_turn_traces_on_and_off(
    moniker, write_config, fixture_bin: Path, tmp_path: Path
) -> None:
    receiver = Receiver()
    try:
        on = tmp_path / "on.jsonl"
        async with moniker(
            config(write_config, fixture_bin, on),
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "from-env"},
        ) as session:
            await session.call_tool("echo", {}, meta={"traceparent": TRACEPARENT})
        assert len(receiver.wait(2)) == 2
        assert {service for service, _ in receiver.spans} == {"from-env"}

        # Off: OTEL_SDK_DISABLED wins over an endpoint; nothing is sent, and the client's
        # trace context reaches the server as it came.
        receiver.spans.clear()
        receiver.posts = 0
        off = tmp_path / "off.jsonl"
        async with moniker(
            config(write_config, fixture_bin, off, telemetry=receiver.url),
            env={"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
        ) as session:
            await session.call_tool("echo", {}, meta={"traceparent": TRACEPARENT})
        time.sleep(1)
        assert receiver.posts == 0 and receiver.spans == [], receiver.spans
        assert received_traceparents(off) == [TRACEPARENT]
    finally:
        receiver.close()
