"""The server under test for the MCP conformance suite, run over stdio BEHIND moniker.

It implements, with the official Python SDK's FastMCP, the fixture names that the suite's server
scenarios call (`test_*` tools and prompts, `test://` resources, `json_schema_2020_12_tool`), with
the contents the scenarios describe. moniker keeps these names (one server, no prefix), so the
suite, talking Streamable HTTP to moniker, reaches them unchanged.

Where FastMCP's decorators stop short, the same SDK's lower layer is used (and said so):
- resources/subscribe, resources/unsubscribe and logging/setLevel handlers are registered on the
  low-level server (`mcp._mcp_server`), as FastMCP has no decorator for them;
- the `resources.subscribe` capability is switched on in the initialization options (FastMCP's
  low-level server always advertises `subscribe: false`), so the server is run with them here
  rather than with `mcp.run()`;
- `json_schema_2020_12_tool` gets its JSON Schema 2020-12 inputSchema verbatim ($schema, $defs,
  additionalProperties, $anchor, allOf/anyOf, if/then/else), which a function signature cannot
  express;
- elicitation requests are sent with `session.elicit_form` and a literal requested schema, so the
  enum variants of SEP-1330 and the defaults of SEP-1034 are sent exactly as the suite expects.

Run by tests/conformance/run.sh through moniker; by hand: `.venv/bin/python fixture_server.py`
(stdio; stderr carries only warnings), or `fixture_server.py http PORT` (Streamable HTTP at
http://127.0.0.1:PORT/mcp).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import struct
import wave
import zlib
from typing import Any

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts.base import Message, UserMessage
from mcp.server.stdio import stdio_server

# ---- test media, made here (no binary files in the repo) -----------------------------------


def _png_1x1_red() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte 0, then one red pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 80)  # 10 ms of silence
    return buf.getvalue()


PNG = _png_1x1_red()
PNG_B64 = base64.b64encode(PNG).decode()
WAV_B64 = base64.b64encode(_wav_silence()).decode()

mcp = FastMCP(
    name="moniker-conformance-fixture",
    instructions="Implements the MCP conformance suite's server fixtures.",
    log_level="WARNING",
)

# ---- logging: logging/setLevel filters what the tools send ---------------------------------

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
_min_level = "debug"


@mcp._mcp_server.set_logging_level()
async def set_logging_level(level: types.LoggingLevel) -> None:
    global _min_level
    _min_level = level


async def log(ctx: Context, level: types.LoggingLevel, message: str) -> None:
    """A notifications/message for the request in `ctx`, if the level set lets it through."""
    if LEVELS.index(level) < LEVELS.index(_min_level):
        return
    await ctx.session.send_log_message(
        level=level, data=message, logger="fixture", related_request_id=ctx.request_id
    )


# ---- tools -------------------------------------------------------------------------------------


@mcp.tool()
def test_simple_text() -> str:
    """Returns one text content block."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list[types.ImageContent]:
    """Returns a 1x1 red PNG as image content."""
    return [types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")]


@mcp.tool()
def test_audio_content() -> list[types.AudioContent]:
    """Returns 10 ms of silence as WAV audio content."""
    return [types.AudioContent(type="audio", data=WAV_B64, mimeType="audio/wav")]


@mcp.tool()
def test_embedded_resource() -> list[types.EmbeddedResource]:
    """Returns an embedded text resource."""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://embedded-resource",
                mimeType="text/plain",
                text="This is an embedded resource content.",
            ),
        )
    ]


@mcp.tool()
def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
    """Returns text, image and embedded resource content together."""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG_B64, mimeType="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://mixed-content-resource",
                mimeType="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            ),
        ),
    ]


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log notifications, 50 ms apart, while it runs."""
    await log(ctx, "info", "Tool execution started")
    await asyncio.sleep(0.05)
    await log(ctx, "info", "Tool processing data")
    await asyncio.sleep(0.05)
    await log(ctx, "info", "Tool execution completed")
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0/100, 50/100 and 100/100 (50 ms apart) when given a progress token."""
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(progress=step, total=100, message=f"step {step} of 100")
    meta = ctx.request_context.meta
    token = meta.progressToken if meta else None
    return f"Progress reported (progressToken={json.dumps(token)})"


@mcp.tool()
def test_error_handling() -> types.CallToolResult:
    """Always fails: a result with isError true."""
    return types.CallToolResult(
        isError=True,
        content=[types.TextContent(type="text", text="This tool intentionally returns an error for testing")],
    )


def _client_can(ctx: Context, capability: types.ClientCapabilities) -> bool:
    return ctx.session.check_client_capability(capability)


class Unsupported(Exception):
    """Raised in a tool: FastMCP answers with a result whose isError is true."""


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's LLM (sampling/createMessage) and returns its answer."""
    if not _client_can(ctx, types.ClientCapabilities(sampling=types.SamplingCapability())):
        raise Unsupported("The client does not support sampling")
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else json.dumps(content.model_dump(mode="json"))
    return f"LLM response: {text}"


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> types.ElicitResult | None:
    if not _client_can(ctx, types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        return None
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


def _outcome(result: types.ElicitResult) -> str:
    return f"action={result.action}, content={json.dumps(result.content or {})}"


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user (elicitation/create) for a username and an email address."""
    result = await _elicit(
        ctx,
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    if result is None:
        raise Unsupported("The client does not support elicitation")
    return f"User response: {_outcome(result)}"


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicitation whose schema has a default for every primitive type (SEP-1034)."""
    result = await _elicit(
        ctx,
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
            "required": [],
        },
    )
    if result is None:
        raise Unsupported("The client does not support elicitation")
    return f"Elicitation completed: {_outcome(result)}"


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicitation with the five enum schema variants of SEP-1330."""
    result = await _elicit(
        ctx,
        "Please select options from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Untitled single-select",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Titled single-select",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Legacy titled enum (deprecated enumNames)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Untitled multi-select",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Titled multi-select",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
            "required": [],
        },
    )
    if result is None:
        raise Unsupported("The client does not support elicitation")
    return f"Elicitation completed: {_outcome(result)}"


@mcp.tool()
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,  # noqa: N803 (the suite's name)
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features"""
    return f"Received name={json.dumps(name)}, address={json.dumps(address)}"


# The signature above validates the call; the listing shows this schema, keyword for keyword:
# SEP-1613's $schema, $defs and additionalProperties, and SEP-2106's $anchor, allOf/anyOf and
# if/then/else (the newer suite's schema; the older one checks the first three only).
mcp._tool_manager.get_tool("json_schema_2020_12_tool").parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """SEP-1699 polling: logs, pauses, logs again. Closing the client's SSE stream mid-call is the
    HTTP front's business (moniker's), not a stdio server's."""
    await log(ctx, "info", "Before disconnect")
    await asyncio.sleep(0.2)
    await log(ctx, "info", "After reconnect")
    return "Reconnection test completed"


# ---- resources -------------------------------------------------------------------------------

_subscriptions: set[str] = set()


@mcp.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource(
    "test://static-binary", name="static-binary", description="A static binary resource (PNG)", mime_type="image/png"
)
def static_binary() -> bytes:
    return PNG


@mcp.resource(
    "test://template/{id}/data",
    name="template-data",
    description="A resource template: {id} is substituted",
    mime_type="application/json",
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.resource(
    "test://watched-resource",
    name="watched-resource",
    description="A resource clients may subscribe to",
    mime_type="text/plain",
)
def watched_resource() -> str:
    return "Watched resource content"


@mcp._mcp_server.subscribe_resource()
async def subscribe(uri: Any) -> None:
    _subscriptions.add(str(uri))


@mcp._mcp_server.unsubscribe_resource()
async def unsubscribe(uri: Any) -> None:
    _subscriptions.discard(str(uri))


# ---- prompts ---------------------------------------------------------------------------------


@mcp.prompt()
def test_simple_prompt() -> list[Message]:
    """A simple prompt without arguments"""
    return [UserMessage("This is a simple prompt for testing.")]


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
    """A prompt with two required arguments, arg1 and arg2"""
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    """A prompt that embeds the resource at resourceUri"""
    return [
        UserMessage(
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=resourceUri, mimeType="text/plain", text="Embedded resource content for testing."
                ),
            )
        ),
        UserMessage("Please process the embedded resource above."),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[Message]:
    """A prompt with image content"""
    return [
        UserMessage(types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")),
        UserMessage("Please analyze the image above."),
    ]


# ---- completions -----------------------------------------------------------------------------

COMPLETIONS = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test-value-1", "testing"],
    ("test_prompt_with_arguments", "arg2"): ["world", "test-value-2"],
    ("test://template/{id}/data", "id"): ["1", "12", "123", "1234"],
}


@mcp.completion()
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion:
    key = ref.name if isinstance(ref, types.PromptReference) else ref.uri
    values = [v for v in COMPLETIONS.get((key, argument.name), []) if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), hasMore=False)


# ---- run over stdio, or over Streamable HTTP --------------------------------------------------

_plain_options = mcp._mcp_server.create_initialization_options


def _options(*args: Any, **kwargs: Any) -> Any:
    """The initialization options with `resources.subscribe` on (FastMCP always says false)."""
    options = _plain_options(*args, **kwargs)
    if options.capabilities.resources is not None:
        options.capabilities.resources.subscribe = True
    return options


mcp._mcp_server.create_initialization_options = _options  # type: ignore[method-assign]


async def main() -> None:
    server = mcp._mcp_server
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "http":
        # `fixture_server.py http PORT`: Streamable HTTP at http://127.0.0.1:PORT/mcp.
        mcp.settings.host = "127.0.0.1"
        mcp.settings.port = int(sys.argv[2])
        mcp.run("streamable-http")
    else:
        asyncio.run(main())
