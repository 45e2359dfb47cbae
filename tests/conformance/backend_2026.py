"""The 2026-07-28 half of moniker's conformance backend: the tools and the prompt that the
official suite's 2026-07-28 server scenarios call (`--requirements 2026-07-28`) and that only a
server of that era can serve, written by this project on the official Python SDK (`mcp` 2.3.0,
MCPServer), run over stdio BEHIND moniker with `protocol: 2026-07-28` beside fixture_server.py
(which serves the scenarios every era shares).

Each tool does what its scenario's "Server Implementation Requirements" say:
- test_input_required_result_{elicitation,sampling,list_roots,request_state,multiple_inputs,
  multi_round,tampered_state,capabilities}, and the prompt test_input_required_result_prompt:
  multi-round-trip requests (SEP-2322), answered with an `InputRequiredResult` whose keys and
  requests are the scenario's, then resumed from the client's `inputResponses`; a
  `requestState` is signed (HMAC-SHA256 with a key of this process), so a tampered one is
  refused with -32602;
- test_missing_capability (needs the client's `sampling`: -32021 with `requiredCapabilities`),
  test_streaming_elicitation (an input-required result, never a request of the server's own),
  test_logging_tool (logs only at the level the request's `_meta` asks), test_trigger_tool_change
  and test_trigger_prompt_change (the lists change, and listeners are told).

    python backend_2026.py             # stdio; stderr carries only warnings
    python backend_2026.py http PORT   # Streamable HTTP at http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import InputRequiredResult

MISSING_CAPABILITY = -32021
INVALID_PARAMS = -32602
KEY = os.urandom(32)

mcp = MCPServer("moniker-conformance-2026", version="1.0.0", log_level="WARNING")


# ---- requestState: signed, so that a tampered one is seen ----------------------------------


def seal(state: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
    mac = hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def unseal(token: str | None) -> dict[str, Any] | None:
    """The state of a sealed token; `None` without one; -32602 when it was tampered with."""
    if token is None:
        return None
    body, _, mac = token.rpartition(".")
    good = hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()
    if not body or not hmac.compare_digest(mac, good):
        raise MCPError(code=INVALID_PARAMS, message="requestState failed its integrity check")
    return json.loads(base64.urlsafe_b64decode(body.encode()))


def elicit(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field],
            },
        },
    }


def sample(text: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        },
    }


ROOTS = {"method": "roots/list", "params": {}}


def responses(ctx: Context) -> dict[str, Any]:
    """The client's answers, as plain JSON, by key."""
    given = ctx.input_responses or {}
    return {k: (v.model_dump(mode="json", by_alias=True) if hasattr(v, "model_dump") else v) for k, v in given.items()}


def asked(requests: dict[str, Any], state: dict[str, Any] | None = None) -> InputRequiredResult:
    return InputRequiredResult.model_validate(
        {"resultType": "input_required", "inputRequests": requests, **({"requestState": seal(state)} if state else {})}
    )


def content_of(answer: dict[str, Any]) -> dict[str, Any]:
    return answer.get("content") or {}


# ---- multi-round-trip requests (SEP-2322) --------------------------------------------------


@mcp.tool(structured_output=False)
def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks the user's name (elicitation), then greets them."""
    answers = responses(ctx)
    if "user_name" not in answers:
        return asked({"user_name": elicit("What is your name?", "name")})
    return f"Hello, {content_of(answers['user_name']).get('name', 'stranger')}!"


@mcp.tool(structured_output=False)
def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model a question (sampling), then answers with its reply."""
    answers = responses(ctx)
    if "capital_question" not in answers:
        return asked({"capital_question": sample("What is the capital of France?", 100)})
    reply = answers["capital_question"].get("content") or {}
    return f"The model said: {reply.get('text', '') if isinstance(reply, dict) else reply}"


@mcp.tool(structured_output=False)
def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's roots, then names them."""
    answers = responses(ctx)
    if "client_roots" not in answers:
        return asked({"client_roots": ROOTS})
    roots = answers["client_roots"].get("roots") or []
    return "Roots: " + ", ".join(r.get("uri", "") for r in roots)


@mcp.tool(structured_output=False)
def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Asks for a confirmation with a requestState; checks the state when it comes back."""
    state = unseal(ctx.request_state)
    answers = responses(ctx)
    if state is None or "confirm" not in answers:
        return asked({"confirm": elicit("Please confirm", "ok", "boolean")}, {"round": 1, "tool": "request_state"})
    if state.get("tool") != "request_state":
        raise MCPError(code=INVALID_PARAMS, message="requestState is not this tool's")
    return "state-ok: confirmed"


@mcp.tool(structured_output=False)
def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name, a greeting and the roots at once."""
    state = unseal(ctx.request_state)
    answers = responses(ctx)
    wanted = {
        "user_name": elicit("What is your name?", "name"),
        "greeting": sample("Generate a greeting", 50),
        "client_roots": ROOTS,
    }
    if state is None or not set(wanted) <= set(answers):
        return asked(wanted, {"tool": "multiple_inputs"})
    return f"all {len(wanted)} inputs received"


@mcp.tool(structured_output=False)
def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Two rounds of questions, the state evolving between them."""
    state = unseal(ctx.request_state)
    answers = responses(ctx)
    if state is None or ("step1" not in answers and state.get("round") == 1):
        return asked({"step1": elicit("Step 1: What is your name?", "name")}, {"round": 1})
    if state.get("round") == 1:
        name = content_of(answers["step1"]).get("name", "")
        return asked({"step2": elicit("Step 2: What is your favorite color?", "color")}, {"round": 2, "name": name})
    if "step2" not in answers:
        raise MCPError(code=INVALID_PARAMS, message="step2 was not answered")
    color = content_of(answers["step2"]).get("color", "")
    return f"{state.get('name', '')} likes {color}"


@mcp.tool(structured_output=False)
def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """A signed requestState: a tampered one is refused with -32602."""
    state = unseal(ctx.request_state)
    if state is None:
        return asked({"confirm": elicit("Please confirm", "ok", "boolean")}, {"tool": "tampered_state"})
    return "state verified"


@mcp.tool(structured_output=False)
def test_input_required_result_capabilities(ctx: Context) -> str | InputRequiredResult:
    """Asks only for what the client declared it answers."""
    capabilities = ctx.client_capabilities
    can = {
        "elicitation": bool(capabilities and capabilities.elicitation is not None),
        "sampling": bool(capabilities and capabilities.sampling is not None),
        "roots": bool(capabilities and capabilities.roots is not None),
    }
    answers = responses(ctx)
    wanted: dict[str, Any] = {}
    if can["elicitation"]:
        wanted["user_name"] = elicit("What is your name?", "name")
    if can["sampling"]:
        wanted["greeting"] = sample("Generate a greeting", 50)
    if can["roots"]:
        wanted["client_roots"] = ROOTS
    if wanted and not set(wanted) <= set(answers):
        return asked(wanted)
    return "answered: " + ", ".join(sorted(wanted)) if wanted else "nothing to ask"


async def _prompt_with_input(ctx: Context) -> Any:
    answers = responses(ctx)
    if "user_context" not in answers:
        return asked({"user_context": elicit("What context should the prompt use?", "context")})
    context = content_of(answers["user_context"]).get("context", "")
    return [UserMessage(f"Use this context: {context}")]


mcp.add_prompt(
    Prompt.from_function(
        _prompt_with_input,
        name="test_input_required_result_prompt",
        description="A prompt that asks for its context first (input-required on prompts/get).",
    )
)


# ---- the diagnostic tools of server-stateless ----------------------------------------------


@mcp.tool(structured_output=False)
def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability: -32021 naming it when it was not declared."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_CAPABILITY,
            message="this tool needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "sampling is declared"


@mcp.tool(structured_output=False)
def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks through an input-required result, never through a request of the server's own."""
    answers = responses(ctx)
    if "user_name" not in answers:
        return asked({"user_name": elicit("What is your name?", "name")})
    return "thanks"


@mcp.tool(structured_output=False)
async def test_logging_tool(ctx: Context) -> str:
    """Logs three messages (sent only when the request's _meta asks for a log level)."""
    for n in range(3):
        await ctx.info(f"log message {n}")
    return "logged"


@mcp.tool(structured_output=False)
async def test_trigger_tool_change(ctx: Context) -> str:
    """Adds a tool, and tells the listeners that the tool list changed."""

    def test_added_tool() -> str:
        """A tool that exists once test_trigger_tool_change was called."""
        return "added"

    mcp.add_tool(test_added_tool, structured_output=False)
    await ctx.notify_tools_changed()
    return "tool list changed"


@mcp.tool(structured_output=False)
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Adds a prompt, and tells the listeners that the prompt list changed."""

    def test_added_prompt() -> str:
        return "an added prompt"

    mcp.add_prompt(
        Prompt.from_function(
            test_added_prompt,
            name="test_added_prompt",
            description="A prompt that exists once test_trigger_prompt_change was called.",
        )
    )
    await ctx.notify_prompts_changed()
    return "prompt list changed"


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "http":
        # `backend_2026.py http PORT`: Streamable HTTP at http://127.0.0.1:PORT/mcp.
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), streamable_http_path="/mcp")
    else:
        mcp.run("stdio")
