"""moniker's conformance backend of the 2025 era, alone: every tool, prompt and resource that the
official suite's 2026-07-28 server scenarios call (`--requirements 2026-07-28`), served by ONE
server that speaks only what a 2025 server speaks, written by this project on the official
Python SDK (`mcp` 2.3.0, MCPServer), run over stdio BEHIND moniker WITHOUT `protocol:`, so that
moniker negotiates a 2025 version with it (`initialize`) and translates for the 2026-07-28
clients in front of it. Run by `CONFORMANCE_BACKEND=legacy tests/conformance/run.sh 2026-07-28`.

Where backend_2026.py answers with an `InputRequiredResult`, this server does what a 2025 server
does: in the middle of the call it sends the client a request of its own through its session
(`elicitation/create`, `sampling/createMessage`, `roots/list`), waits for the answer, and uses it
in its result. moniker turns each such request into an `input_required` result for the
2026-07-28 client, under moniker's own key and `requestState`, and sends the client's
`inputResponses` back to this server as the answers; the server never knows.

- test_input_required_result_{elicitation,sampling,list_roots}: one request (the scenario's
  message and schema, or question, or roots/list), then a result that uses the answer;
- test_input_required_result_request_state and _tampered_state: an elicitation ("Please
  confirm", `ok: boolean`), then "state-ok"; a 2025 server has no `requestState`: the state the
  client echoes (and may tamper with) is moniker's, and moniker checks it;
- test_input_required_result_multiple_inputs: elicitation, sampling and roots/list sent at once
  (concurrently, before any is answered), then a result naming the three answers;
- test_input_required_result_multi_round: two elicitations in a row (name, then colour): two
  rounds of `input_required` for the client, then "<name> likes <colour>";
- test_input_required_result_capabilities: asks, one request at a time, for each input its
  session's client declared, sampling first. A 2025 server sees the capabilities of its own
  session only (moniker's, which declares all three), never those of the client behind; moniker
  refuses for the client what it did not declare (-32021, and the call is given up), so the
  first round, sampling alone, is what a client that declared only sampling sees;
- the prompt test_input_required_result_prompt: an elicitation in the middle of prompts/get;
- test_missing_capability: asks the client's model (sampling/createMessage); a client that did
  not declare `sampling` gets -32021 from moniker, which refuses the request for it;
- test_streaming_elicitation: an elicitation request of its own (moniker makes it an
  input-required result: no request on the client's response stream);
- test_logging_tool: three log messages (a 2025 server sends them all; moniker passes them only
  to a request whose `_meta` asks for a log level);
- test_trigger_tool_change / test_trigger_prompt_change: add a tool / prompt of a new name each
  time and send notifications/tools|prompts/list_changed (moniker relists, and tells the
  listeners of its own `subscriptions/listen` streams);
- the fixtures of fixture_server.py that the 2026-07-28 scenarios call, with the same contents:
  test_simple_text, test_image_content, test_audio_content, test_embedded_resource,
  test_multiple_content_types, test_error_handling, test_tool_with_progress,
  json_schema_2020_12_tool (its JSON Schema 2020-12 inputSchema verbatim); the resources
  test://static-text, test://static-binary, test://template/{id}/data, test://watched-resource;
  the prompts test_simple_prompt, test_prompt_with_arguments, test_prompt_with_embedded_resource,
  test_prompt_with_image; completion for test_prompt_with_arguments and the template.

Left out, as only a server of the 2026-07-28 era can do them: a `requestState` of the server's
own (signed, echoed by the client: here the state is moniker's) and the tasks extension (the
unscored tasks-* scenarios: greet, slow_compute, failing_job, confirm_delete, ...); also tools
with `x-mcp-header` parameters (the unscored http-custom-header-server-validation).

The SDK's deprecation warnings for sampling, roots and logging (deprecated as of 2026-07-28) are
silenced: using them is this server's point. A request of its own that the client side refuses
(an error answer: moniker's "cannot tell which of its clients this request is for", or a
capability the client lacks) is said on stderr, which moniker logs (`moniker::server`, at info),
then fails the call.

    python backend_2025.py             # stdio; stderr carries only warnings
    python backend_2025.py http PORT   # Streamable HTTP at http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import struct
import sys
import warnings
import wave
import zlib
from collections.abc import Awaitable
from typing import Any, TypeVar

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, UserMessage
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

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

mcp = MCPServer(
    "moniker-conformance-2025",
    version="1.0.0",
    instructions="Implements the MCP conformance suite's 2026-07-28 server fixtures, the 2025 way.",
    log_level="WARNING",
)


# ---- the server's own requests to the client (the 2025 way) --------------------------------

T = TypeVar("T")


async def ask(method: str, request: Awaitable[T]) -> T:
    """A request of the server's own; a refusal is said on stderr, then fails the call."""
    try:
        return await request
    except MCPError as e:
        print(f"backend_2025: {method} refused ({e.code}): {e}", file=sys.stderr, flush=True)
        raise


def schema(field: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


async def elicit(ctx: Context, message: str, field: str, kind: str = "string") -> Any:
    """elicitation/create, the scenario's message and schema verbatim; the accepted value of
    `field` (None when the user declined or cancelled)."""
    result = await ask(
        "elicitation/create",
        ctx.session.elicit_form(message, schema(field, kind), related_request_id=ctx.request_id),
    )
    if result.action != "accept":
        return None
    return (result.content or {}).get(field)


async def sample(ctx: Context, text: str, max_tokens: int) -> str:
    """sampling/createMessage with one user message; the model's text."""
    result = await ask(
        "sampling/createMessage",
        ctx.session.create_message(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
            max_tokens=max_tokens,
            related_request_id=ctx.request_id,
        ),
    )
    content = result.content
    if isinstance(content, types.TextContent):
        return content.text
    return json.dumps(content.model_dump(mode="json", by_alias=True) if hasattr(content, "model_dump") else content)


async def roots(ctx: Context) -> list[str]:
    """roots/list; the roots' URIs."""
    result = await ask("roots/list", ctx.session.list_roots())
    return [str(r.uri) for r in result.roots]


# ---- what backend_2026.py answers with an input-required result, asked here ----------------


@mcp.tool(structured_output=False)
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name (elicitation), then greets them."""
    name = await elicit(ctx, "What is your name?", "name")
    return f"Hello, {name or 'stranger'}!"


@mcp.tool(structured_output=False)
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question (sampling), then answers with its reply."""
    return f"The model said: {await sample(ctx, 'What is the capital of France?', 100)}"


@mcp.tool(structured_output=False)
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks the client's roots, then names them."""
    return "Roots: " + ", ".join(await roots(ctx))


@mcp.tool(structured_output=False)
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the requestState the client echoes is moniker's."""
    ok = await elicit(ctx, "Please confirm", "ok", "boolean")
    return f"state-ok: confirmed={json.dumps(ok)}"


@mcp.tool(structured_output=False)
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; a tampered requestState is moniker's to refuse."""
    ok = await elicit(ctx, "Please confirm", "ok", "boolean")
    return f"state verified: confirmed={json.dumps(ok)}"


@mcp.tool(structured_output=False)
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for a name, a greeting and the roots at once (three requests before any answer)."""
    name, greeting, uris = await asyncio.gather(
        elicit(ctx, "What is your name?", "name"),
        sample(ctx, "Generate a greeting", 50),
        roots(ctx),
    )
    return f"all 3 inputs received: name={name}, greeting={greeting}, roots={', '.join(uris)}"


@mcp.tool(structured_output=False)
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two questions in a row: a name, then a favourite colour."""
    name = await elicit(ctx, "Step 1: What is your name?", "name")
    color = await elicit(ctx, "Step 2: What is your favorite color?", "color")
    return f"{name} likes {color}"


@mcp.tool(structured_output=False)
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks, one at a time, for what its session's client declared: sampling, elicitation, roots."""
    session = ctx.session
    answered = []
    if session.check_client_capability(types.ClientCapabilities(sampling=types.SamplingCapability())):
        await sample(ctx, "Generate a greeting", 50)
        answered.append("greeting")
    if session.check_client_capability(types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        await elicit(ctx, "What is your name?", "name")
        answered.append("user_name")
    if session.check_client_capability(types.ClientCapabilities(roots=types.RootsCapability())):
        await roots(ctx)
        answered.append("client_roots")
    return "answered: " + ", ".join(answered) if answered else "nothing to ask"


@mcp.prompt(name="test_input_required_result_prompt")
async def test_input_required_result_prompt(ctx: Context) -> list[Message]:
    """A prompt that asks for its context first (elicitation during prompts/get)."""
    context = await elicit(ctx, "What context should the prompt use?", "context")
    return [UserMessage(f"Use this context: {context}")]


# ---- the diagnostic tools of server-stateless ----------------------------------------------


@mcp.tool(structured_output=False)
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling: asks its model (moniker refuses for a client without it)."""
    return f"sampling is declared; the model said: {await sample(ctx, 'Say anything', 10)}"


@mcp.tool(structured_output=False)
async def test_streaming_elicitation(ctx: Context) -> str:
    """Asks the user's name with an elicitation request of its own."""
    name = await elicit(ctx, "What is your name?", "name")
    return f"thanks, {name}"


@mcp.tool(structured_output=False)
async def test_logging_tool(ctx: Context) -> str:
    """Logs three messages (a 2025 server sends them all; moniker filters)."""
    for n in range(3):
        await ctx.session.send_log_message(
            level="info", data=f"log message {n}", logger="legacy", related_request_id=ctx.request_id
        )
    return "logged"


_added = itertools.count(1)


@mcp.tool(structured_output=False)
async def test_trigger_tool_change(ctx: Context) -> str:
    """Adds a tool of a new name, and says that the tool list changed."""
    name = f"test_added_tool_{next(_added)}"

    def added() -> str:
        return "added"

    mcp.add_tool(added, name=name, description="A tool that test_trigger_tool_change added.", structured_output=False)
    await ctx.session.send_tool_list_changed()
    return f"tool list changed: {name}"


@mcp.tool(structured_output=False)
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Adds a prompt of a new name, and says that the prompt list changed."""
    name = f"test_added_prompt_{next(_added)}"

    def added() -> str:
        return "an added prompt"

    mcp.add_prompt(
        Prompt.from_function(added, name=name, description="A prompt that test_trigger_prompt_change added.")
    )
    await ctx.session.send_prompt_list_changed()
    return f"prompt list changed: {name}"


# ---- the fixtures every era shares (as fixture_server.py serves them) ----------------------


@mcp.tool(structured_output=False)
def test_simple_text() -> str:
    """Returns one text content block."""
    return "This is a simple text response for testing."


@mcp.tool(structured_output=False)
def test_image_content() -> list[types.ImageContent]:
    """Returns a 1x1 red PNG as image content."""
    return [types.ImageContent(type="image", data=PNG_B64, mime_type="image/png")]


@mcp.tool(structured_output=False)
def test_audio_content() -> list[types.AudioContent]:
    """Returns 10 ms of silence as WAV audio content."""
    return [types.AudioContent(type="audio", data=WAV_B64, mime_type="audio/wav")]


@mcp.tool(structured_output=False)
def test_embedded_resource() -> list[types.EmbeddedResource]:
    """Returns an embedded text resource."""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
            ),
        )
    ]


@mcp.tool(structured_output=False)
def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
    """Returns text, image and embedded resource content together."""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG_B64, mime_type="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            ),
        ),
    ]


@mcp.tool()
def test_error_handling() -> types.CallToolResult:
    """Always fails: a result with isError true."""
    return types.CallToolResult(
        is_error=True,
        content=[types.TextContent(type="text", text="This tool intentionally returns an error for testing")],
    )


@mcp.tool(structured_output=False)
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0/100, 50/100 and 100/100 (50 ms apart) when given a progress token."""
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(progress=step, total=100, message=f"step {step} of 100")
    return "Progress reported"


@mcp.tool(structured_output=False)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,  # noqa: N803 (the suite's name)
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features"""
    return f"Received name={json.dumps(name)}, address={json.dumps(address)}"


# The signature above validates the call; the listing shows the newer suite's schema, keyword
# for keyword, as fixture_server.py lists it.
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
    "test://watched-resource", name="watched-resource", description="A resource clients may watch", mime_type="text/plain"
)
def watched_resource() -> str:
    return "Watched resource content"


@mcp.prompt()
def test_simple_prompt() -> list[Message]:
    """A simple prompt without arguments"""
    return [UserMessage("This is a simple prompt for testing.")]


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
    """A prompt with two required arguments, arg1 and arg2"""
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803 (the suite's name)
    """A prompt that embeds the resource at resourceUri"""
    return [
        UserMessage(
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
                ),
            )
        ),
        UserMessage("Please process the embedded resource above."),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[Message]:
    """A prompt with image content"""
    return [
        UserMessage(types.ImageContent(type="image", data=PNG_B64, mime_type="image/png")),
        UserMessage("Please analyze the image above."),
    ]


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
    return types.Completion(values=values, total=len(values), has_more=False)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "http":
        # `backend_2025.py http PORT`: Streamable HTTP at http://127.0.0.1:PORT/mcp.
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), streamable_http_path="/mcp")
    else:
        mcp.run("stdio")
