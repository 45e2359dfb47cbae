"""Each person acts as themselves upstream: `servers.<id>.auth.exchange` (RFC 8693 token
exchange). moniker serves over HTTP with `http.auth` (tests/e2e/oauth/server.mjs's oidc-provider,
which gains the token-exchange grant through its own extension point); behind it is server.mjs's
own MCP resource server (TypeScript SDK, JWTs checked against the provider's keys, audience its
/mcp URL), whose `whoami` says the `sub` (and `act`) of the token each request came with and
whose log names the `sub` of every request it let in.

moniker lists the server as itself (client credentials), and calls it as each caller: alice's
and bob's own tokens, exchanged, with moniker named as the actor. A caller with no token to
exchange (a static token, the CLI) is refused and never sent as moniker; concurrent calls of two
people never cross; a revoked person stops within the exchange cache's bound.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import McpError
from scenarios import bearer_session

from oauth_harness import HAVE_OIDC_PROVIDER, SCOPE, SKIP_REASON, LocalCa, OAuthServers, start_oauth_servers, text_of
from test_resource_server import STATIC_TOKEN, Gateway, auth_section, gw  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not HAVE_OIDC_PROVIDER, reason=SKIP_REASON)

TS_CLIENT = Path(__file__).parent / "ts_http_client.mjs"


@pytest.fixture
def idp(tmp_path: Path, gw: Gateway) -> Iterator[OAuthServers]:
    """server.mjs: the identity provider of moniker's callers, and the server behind moniker
    (over HTTPS, its certificate of a CA of the test's own)."""
    with start_oauth_servers(tmp_path, 300, resources=[gw.url()], tls=LocalCa(tmp_path / "tls")) as servers:
        yield servers


def start(gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config, **exchange: Any) -> Path:
    """moniker serve --http with server.mjs's MCP server as `up`, exchanging each caller's
    token (`exchange`: the auth.exchange settings; its issuer is http.auth's)."""
    config = write_config(
        {
            "servers": {
                "up": {
                    "url": idp.mcp,
                    "tls": {"ca_file": str(idp.ca)},
                    "auth": {
                        "client_id": idp.client_id,
                        "client_secret": idp.client_secret,
                        "grant": "client_credentials",
                        "scope": SCOPE,
                        "exchange": {"actor": True, **exchange},
                    },
                }
            },
            "http": {"auth": auth_section(gw, idp, toolsets=None, default_toolset=None), "tokens": [STATIC_TOKEN]},
            "audit": str(gw.audit_path),
        },
        name="exchange.yaml",
    )
    gw.start(moniker_bin, config)
    return config


async def whoami(url: str, token: str) -> tuple[bool, str]:
    """Whether the call failed (moniker's refusal is a JSON-RPC error), and its text."""
    async with bearer_session(url, token) as session:
        try:
            result = await session.call_tool("whoami", {})
        except McpError as refused:
            return True, refused.error.message
    return bool(result.isError), text_of(result)


def requests_by(idp: OAuthServers) -> list[str]:
    """The `sub` (and `act`) of every request the server behind moniker let in, in order."""
    return re.findall(r"RS request by (sub=\S+(?: act=\S+)?)", idp.log_all())


@pytest.mark.timeout(120)
async def test_each_person_reaches_the_server_as_themselves(
    gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """alice's and bob's calls reach the server with their own tokens (its log shows both
    subjects, each with moniker as the actor); moniker's own listing goes as moniker. An
    exchanged token is used again within the cache; the audit log names the person and the
    identity used upstream."""
    config = start(gw, idp, moniker_bin, write_config, cache="5m")
    checked = subprocess.run(
        [str(moniker_bin), "check", "-c", str(config)], capture_output=True, text=True, timeout=60, env=gw.env()
    )
    assert (
        f"server `up` is called as each caller: their access token exchanged at `{idp.issuer}` for `{idp.mcp}`, "
        "moniker named as the actor, each kept at most 300 s" in checked.stdout
    ), checked.stdout + checked.stderr
    alice = idp.interactive(gw.url(), account="alice")["access_token"]
    bob = idp.interactive(gw.url(), account="bob")["access_token"]

    for token, who in ((alice, "alice"), (bob, "bob"), (alice, "alice")):
        failed, text = await whoami(gw.url(), token)
        assert not failed and f"sub={who} " in text and f"act={idp.client_id}" in text, f"{text}\n{gw.describe()}"

    seen = requests_by(idp)
    assert f"sub=alice act={idp.client_id}" in seen and f"sub=bob act={idp.client_id}" in seen, seen
    assert f"sub={idp.client_id}" in seen, f"moniker's own listing did not go as moniker: {seen}"
    exchanged = idp.exchanges()["subjects"]
    assert exchanged == {"alice": 1, "bob": 1}, f"each person's token is exchanged once within the cache: {exchanged}"

    calls = [line for line in gw.audit() if line.get("name") == "whoami"]
    assert [(c["principal"], c.get("upstream")) for c in calls] == [("alice", "alice"), ("bob", "bob"), ("alice", "alice")], calls


@pytest.mark.timeout(120)
async def test_a_call_with_no_token_to_exchange_is_refused_never_sent_as_moniker(
    gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config, tmp_path: Path
) -> None:
    """A static token's caller and `moniker call` (no caller's token) are refused with a clear
    error; the server never gets the call, under moniker's own credential or any other."""
    config = start(gw, idp, moniker_bin, write_config)
    failed, text = await whoami(gw.url(), STATIC_TOKEN)
    assert failed and "called as each caller" in text and "came with none" in text, text
    assert "sub=" not in text, f"the call reached the server: {text}"
    audited = [line for line in gw.audit() if line.get("name") == "whoami"]
    assert audited and audited[-1]["outcome"] == "error" and "upstream" not in audited[-1], audited

    env = {**gw.env(), "XDG_STATE_HOME": str(tmp_path / "cli-state")}
    done = subprocess.run(
        [str(moniker_bin), "call", "-c", str(config), "whoami", "{}"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "came with none" in said and "sub=" not in said, said
    assert idp.exchanges()["count"] == 0
    assert not [s for s in requests_by(idp) if "act=" in s or s.startswith(("sub=alice", "sub=bob"))]


@pytest.mark.timeout(180)
async def test_two_people_calling_at_once_never_get_each_others_token(
    gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """An attacker's test, run whole and concurrently: alice's session (the Python SDK) and
    bob's (the TypeScript SDK) each send 30 calls at once, interleaved, through one gateway and
    one upstream connection; every answer names its own caller, never the other."""
    start(gw, idp, moniker_bin, write_config, cache="5m")
    tokens = {who: idp.interactive(gw.url(), account=who)["access_token"] for who in ("alice", "bob")}

    async def python_sdk(who: str) -> list[str]:
        async with bearer_session(gw.url(), tokens[who]) as session:
            results = await asyncio.gather(*(session.call_tool("whoami", {}) for _ in range(30)))
        return [text_of(r) for r in results]

    async def typescript_sdk(who: str) -> list[str]:
        done = await asyncio.to_thread(
            subprocess.run,
            ["node", str(TS_CLIENT), gw.url(), tokens[who], "whoami", "30"],
            capture_output=True, text=True, timeout=60, cwd=TS_CLIENT.parent,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["texts"]

    # alice through the Python SDK, bob through the TypeScript SDK, at the same time.
    answers = dict(zip(("alice", "bob"), await asyncio.gather(python_sdk("alice"), typescript_sdk("bob"))))
    for who, texts in answers.items():
        wrong = [t for t in texts if f"sub={who} " not in t]
        assert not wrong, f"{who}'s calls answered as another: {wrong[:3]}\n{gw.describe()}"


@pytest.mark.timeout(120)
async def test_a_revoked_person_stops_within_the_cache_bound(
    gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """cache: 2s. Once the identity provider stops exchanging alice's token, her calls work at
    most until her exchanged token's time in the cache is up, then fail closed naming the
    provider's refusal; bob's still work."""
    start(gw, idp, moniker_bin, write_config, cache="2s")
    alice = idp.interactive(gw.url(), account="alice")["access_token"]
    bob = idp.interactive(gw.url(), account="bob")["access_token"]
    failed, text = await whoami(gw.url(), alice)
    assert not failed and "sub=alice " in text, text
    idp.revoke_account("alice")
    revoked_at = time.monotonic()
    time.sleep(2.5)
    failed, text = await whoami(gw.url(), alice)
    assert failed and "could not be exchanged" in text and "invalid_grant" in text, (
        f"{time.monotonic() - revoked_at:.1f} s after the revocation: {text}\n{gw.describe()}"
    )
    failed, text = await whoami(gw.url(), bob)
    assert not failed and "sub=bob " in text, text


def test_the_config_says_where_an_exchange_cannot_be(moniker_bin: Path, write_config, tmp_path: Path) -> None:
    """moniker check refuses an exchange with no identity provider to exchange at, and one
    beside a fixed Authorization header, each at its place in the file."""
    for servers, said in (
        ({"up": {"url": "https://mcp.example/mcp", "auth": {"client_id": "m", "client_secret": "s", "exchange": {}}}}, "needs the identity provider"),
        (
            {
                "up": {
                    "url": "https://mcp.example/mcp",
                    "headers": {"Authorization": "Bearer fixed"},
                    "auth": {"client_id": "m", "client_secret": "s", "issuer": "https://idp.example", "exchange": {}},
                }
            },
            "each caller's here",
        ),
        ({"up": {"url": "https://mcp.example/mcp", "auth": {"issuer": "https://idp.example", "exchange": {}}}}, "needs `client_id`"),
    ):
        config = write_config({"servers": servers}, name="bad-exchange.yaml")
        done = subprocess.run(
            [str(moniker_bin), "check", "-c", str(config)], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
        assert done.returncode != 0 and said in done.stdout + done.stderr, (json.dumps(servers), done.stdout, done.stderr)
