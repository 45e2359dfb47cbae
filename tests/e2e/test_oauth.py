"""moniker as an OAuth 2.1 client, against a real authorization server (oidc-provider) and an MCP
server that needs its tokens, both from tests/e2e/oauth/server.mjs (see the comments at its
top for the flow and the server's rules). The "browser" is tests/e2e/oauth/follow.py, which
follows the authorization server's redirects to moniker's loopback callback.

Each test starts its own server.mjs and stops it. Tokens live under $XDG_DATA_HOME (and HOME)
in the test's tmp_path, never in the user's home.
"""

from __future__ import annotations

import base64
import json
import re
import stat
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from oauth_harness import (
    FOLLOW,
    HAVE_OIDC_PROVIDER,
    SKIP_REASON,
    Moniker,
    OAuthServers,
    SessionOpener,
    sdk_oauth,
    start_oauth_servers,
    text_of,
)

NO_BROWSER_TIMEOUT = 25  # seconds for a command that must give up when the browser fails
ACCESS_TTL = 3  # seconds: server.mjs's access tokens expire this fast, so refreshes happen

pytestmark = pytest.mark.skipif(not HAVE_OIDC_PROVIDER, reason=SKIP_REASON)


# --------------------------------------------------------------------------------------------
# The OAuth servers
# --------------------------------------------------------------------------------------------


@pytest.fixture
def oauth_ttl() -> int:
    """Lifetime of server.mjs's access tokens (a test overrides it with parametrize)."""
    return ACCESS_TTL


@pytest.fixture
def oauth_servers(tmp_path: Path, oauth_ttl: int) -> Iterator[OAuthServers]:
    """server.mjs running (access tokens live `oauth_ttl` seconds); stopped after the test."""
    with start_oauth_servers(tmp_path, oauth_ttl) as servers:
        yield servers


# --------------------------------------------------------------------------------------------
# moniker (oauth_harness.Moniker) against server.mjs
# --------------------------------------------------------------------------------------------


@pytest.fixture
def moniker_oauth(moniker_bin: Path, tmp_path: Path, oauth_servers: OAuthServers, mcp_session: SessionOpener) -> Moniker:
    return Moniker(moniker_bin, tmp_path, oauth_servers, mcp_session)


@pytest.fixture
def remote_config(write_config, oauth_servers: OAuthServers) -> Path:
    return write_config({"servers": {"remote": {"url": oauth_servers.mcp}}})


@pytest.fixture
def no_browser(tmp_path: Path) -> str:
    """A $BROWSER that cannot open anything."""
    script = tmp_path / "no-browser.sh"
    script.write_text('#!/bin/sh\necho "no-browser.sh: cannot open $1" >&2\nexit 1\n')
    script.chmod(0o755)
    return str(script)


async def call_whoami(session: Any, moniker: Moniker, what: str, sub: str = "alice") -> str:
    result = await session.call_tool("whoami", {})
    text = text_of(result)
    assert not result.isError and f"sub={sub}" in text, (
        f"{what}: whoami through `moniker serve` answered {text!r} (isError={result.isError})"
        f"\n--- server.mjs log ---\n{moniker.servers.log()}"
    )
    return text


def login(moniker: Moniker, config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    done = moniker.run("-c", str(config), *extra, "login", "remote", browser=str(FOLLOW))
    assert done.returncode == 0, "`moniker login remote` failed\n" + moniker.describe(done)
    reached = moniker.follow_log.read_text() if moniker.follow_log.exists() else ""
    assert "code=" in reached, (
        "follow.py ($BROWSER) never reached moniker's /callback with a code\n" + moniker.describe(done)
    )
    return done


# --------------------------------------------------------------------------------------------
# The harness alone: the official Python SDK's OAuth client against server.mjs, no moniker
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
async def test_harness_with_the_sdk_oauth_client(oauth_servers: OAuthServers, tmp_path: Path) -> None:
    """server.mjs and follow.py work with a reference client (mcp's OAuthClientProvider: PRM
    discovery, DCR, PKCE, resource, refresh): a failure of the moniker tests above that this one
    does not share is on moniker's side."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with sdk_oauth(oauth_servers.mcp, oauth_servers, client_name="sdk-harness-check") as sdk:
        async with httpx.AsyncClient(auth=sdk.auth, timeout=15) as client:
            for round_ in range(2):
                async with streamable_http_client(oauth_servers.mcp, http_client=client) as (read, write, _):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        names = [tool.name for tool in (await session.list_tools()).tools]
                        assert {"whoami", "echo"} <= set(names), names
                        text = text_of(await session.call_tool("whoami", {}))
                        assert "sub=alice" in text and "mcp:tools" in text, text
                if round_ == 0:
                    await anyio.sleep(ACCESS_TTL + 1)  # the second round needs a refresh
    assert len(sdk.reached) == 1, (
        f"expected one browser login (then a refresh), saw {len(sdk.reached)}\n{oauth_servers.log()}"
    )
    assert "grant.success refresh_token" in oauth_servers.log(), oauth_servers.log()


# --------------------------------------------------------------------------------------------
# moniker against server.mjs
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_login_call_refresh_logout(moniker_oauth: Moniker, remote_config: Path, no_browser: str) -> None:
    m = moniker_oauth
    login(m, remote_config)

    files = m.auth_files()
    assert files, f"`moniker login` stored nothing under {m.auth_dir} (all files: {sorted(m.data.rglob('*'))})"
    for path in files:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == 0o600, f"{path} has mode {mode:04o}, not 0600"

    async with m.serve(remote_config) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert "whoami" in names, f"whoami not listed by `moniker serve` after login: {names}"
        await call_whoami(session, m, "right after login")
        await anyio.sleep(ACCESS_TTL + 1)
        await call_whoami(session, m, f"after the access token expired ({ACCESS_TTL} s): refresh")
        await anyio.sleep(ACCESS_TTL + 1)
        # server.mjs rotates refresh tokens: the one from the first refresh must be the one used
        await call_whoami(session, m, "after the second expiry: refresh with the rotated refresh token")

    done = m.run("-c", str(remote_config), "logout", "remote")
    assert done.returncode == 0, "`moniker logout remote` failed\n" + m.describe(done)
    left = [p for p in files if p.exists()]
    assert not left, f"`moniker logout remote` left the token files {left}"

    done = m.run("-c", str(remote_config), "call", "whoami", "{}", browser=no_browser, timeout=NO_BROWSER_TIMEOUT)
    assert done.returncode != 0, "`moniker call whoami` succeeded after logout with no browser\n" + m.describe(done)

    async with m.serve(remote_config, name="serve-after-logout") as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
    stderr = m.record_stderr("serve-after-logout")
    assert "whoami" not in names, f"`moniker serve` lists whoami after logout: {names}"
    assert "moniker login remote" in stderr, f"`moniker serve` did not say to run `moniker login remote`:\n{stderr[-3000:]}"


def client_credentials_config(write_config, servers: OAuthServers, name: str = "moniker.yaml") -> Path:
    auth = {"grant": "client_credentials", "client_id": servers.client_id, "client_secret": servers.client_secret}
    return write_config({"servers": {"remote": {"url": servers.mcp, "auth": auth}}}, name=name)


async def test_client_credentials(moniker_oauth: Moniker, write_config, oauth_servers: OAuthServers) -> None:
    m = moniker_oauth
    config = client_credentials_config(write_config, oauth_servers)
    done = m.run("-c", str(config), "call", "whoami", "{}")  # BROWSER unset, stdin closed
    assert done.returncode == 0, "`moniker call whoami` with client_credentials failed\n" + m.describe(done)
    assert f"sub={oauth_servers.client_id}" in done.stdout, m.describe(done)
    assert "mcp:tools" in done.stdout, m.describe(done)

    # `moniker serve` gets (and renews) client-credentials tokens by itself.
    async with m.serve(config, name="serve-cc") as session:
        await call_whoami(session, m, "serve, client_credentials", sub=oauth_servers.client_id)
        await anyio.sleep(ACCESS_TTL + 1)
        await call_whoami(session, m, "serve, client_credentials, after expiry", sub=oauth_servers.client_id)


@pytest.mark.parametrize("oauth_ttl", [120], ids=["ttl120"])
async def test_refresh_on_401(moniker_oauth: Moniker, remote_config: Path, oauth_servers: OAuthServers) -> None:
    """Tokens far from expiry that the server refuses anyway (401 invalid_token): moniker
    refreshes on the challenge and retries, in `serve` and in `call`."""
    m = moniker_oauth
    login(m, remote_config)
    async with m.serve(remote_config) as session:
        await call_whoami(session, m, "before the revocation")
        before = oauth_servers.log().count("grant.success refresh_token")
        oauth_servers.revoke_seen()
        await call_whoami(session, m, "after the server revoked the access token (401 invalid_token)")
    assert oauth_servers.log().count("grant.success refresh_token") > before, (
        "no refresh after the 401\n" + oauth_servers.log()
    )
    oauth_servers.revoke_seen()
    done = m.run("-c", str(remote_config), "call", "whoami", "{}")
    assert done.returncode == 0 and "sub=alice" in done.stdout, (
        "`moniker call whoami` after a 401 invalid_token on a stored token\n" + m.describe(done)
    )


def test_call_without_a_login_says_to_log_in(moniker_oauth: Moniker, remote_config: Path) -> None:
    """A one-shot command never opens a browser by itself: with no stored token, `moniker call`
    fails with exit 77 (EX_NOPERM) and says which command to run, without waiting."""
    m = moniker_oauth
    done = m.run("-c", str(remote_config), "call", "whoami", "{}", browser=str(FOLLOW))
    assert done.returncode == 77, m.describe(done)
    assert "moniker login remote" in done.stderr, m.describe(done)
    assert "scope `mcp:tools`" in done.stderr, m.describe(done)
    assert not any(f.read_text().count("access_token") for f in m.auth_files()), (
        "`moniker call` stored a token without a login\n" + m.describe(done)
    )


def test_doctor_says_a_login_is_needed(moniker_oauth: Moniker, remote_config: Path) -> None:
    """`moniker doctor` against a real authorization server with no stored token: the server
    is reported as waiting for a login, with the command to run, and doctor exits 1; no
    browser opens and no token is stored."""
    m = moniker_oauth
    done = m.run("-c", str(remote_config), "doctor", browser=str(FOLLOW))
    assert done.returncode == 1, m.describe(done)
    assert "LOGIN" in done.stdout and "remote" in done.stdout, m.describe(done)
    assert "fix: moniker login remote" in done.stdout, m.describe(done)
    assert not any(f.read_text().count("access_token") for f in m.auth_files()), (
        "`moniker doctor` stored a token without a login\n" + m.describe(done)
    )


_URLISH = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)
_NOT_SECRET_KEYS = re.compile(r"(^|_)(client_id|scopes?|url|uri|endpoint|issuer|resource|type|method|server|name)s?$", re.I)


def _strings(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def stored_secrets(files: list[Path]) -> dict[str, str]:
    """label -> value of everything secret-looking in moniker's token files: strings longer than
    8 characters, except URLs, scopes, client ids, names and dates."""
    found: dict[str, str] = {}
    for path in files:
        text = path.read_text(errors="replace")
        try:
            strings = list(_strings(json.loads(text)))
        except json.JSONDecodeError:  # not JSON: every long token-like run of characters
            strings = [(f"run {i}", run) for i, run in enumerate(re.findall(r"[A-Za-z0-9._~+/=-]{16,}", text))]
        for where, value in strings:
            key = where.rsplit(".", 1)[-1]
            if (
                len(value) <= 8
                or _URLISH.match(value)
                or " " in value
                or _NOT_SECRET_KEYS.search(key)
                or re.fullmatch(r"[\d:.TZ+-]+", value)
            ):
                continue
            found[f"{path.name} {where}"] = value
            if value.count(".") == 2 and value.startswith("eyJ"):  # a JWT: its signature alone too
                found[f"{path.name} {where} (JWT signature)"] = value.rsplit(".", 1)[1]
    return found


@pytest.mark.timeout(120)
async def test_no_secret_in_logs(moniker_oauth: Moniker, remote_config: Path, write_config, oauth_servers: OAuthServers) -> None:
    m = moniker_oauth
    login(m, remote_config, "--log", "trace")
    files = m.auth_files()
    assert files, f"`moniker login` stored nothing under {m.auth_dir}"
    secrets = stored_secrets(files)
    assert any(v.startswith("eyJ") for v in secrets.values()), (
        f"no access token (JWT) found in the token files {files}: {sorted(secrets)}"
    )

    async with m.serve(remote_config, log="trace", name="serve-trace") as session:
        await call_whoami(session, m, "serve --log trace")
        await anyio.sleep(ACCESS_TTL + 1)
        await call_whoami(session, m, "serve --log trace, after a refresh")
    m.record_stderr("serve-trace")
    secrets.update(stored_secrets(m.auth_files()))  # the refreshed tokens too

    await anyio.sleep(ACCESS_TTL + 1)  # the CLI refreshes as well
    done = m.run("-c", str(remote_config), "--log", "trace", "call", "whoami", "{}")
    assert done.returncode == 0, "`moniker call whoami` (stored tokens) failed\n" + m.describe(done)
    secrets.update(stored_secrets(m.auth_files()))

    cc_config = client_credentials_config(write_config, oauth_servers, name="cc.yaml")
    done = m.run("-c", str(cc_config), "--log", "trace", "call", "whoami", "{}")
    assert done.returncode == 0, "`moniker call whoami` (client_credentials) failed\n" + m.describe(done)
    secrets["client_credentials client_secret"] = oauth_servers.client_secret
    basic = base64.b64encode(f"{oauth_servers.client_id}:{oauth_servers.client_secret}".encode()).decode()
    secrets["client_credentials Basic credentials"] = basic

    for url in m.follow_log.read_text().split():
        for code in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("code", []):
            secrets[f"authorization code from {url.split('?')[0]}"] = code
    assert any(label.startswith("authorization code") for label in secrets), "no authorization code was seen"

    assert any("trace" in text.lower() or "debug" in text.lower() for _, text in m.outputs if text), (
        "--log trace produced no trace/debug lines anywhere: is the flag honoured?"
    )
    leaks = [
        f"{label} appears in {what}"
        for label, value in secrets.items()
        for what, text in m.outputs
        if value in text
    ]
    assert not leaks, "secrets in moniker's output:\n" + "\n".join(leaks)


class Recorder:
    """An HTTP server on loopback that answers as an authorization server would (its metadata
    names its own token endpoint) and records every request that reaches it."""

    def __init__(self) -> None:
        import http.server
        import threading

        seen: list[str] = []
        self.seen = seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode(errors="replace") if length else ""
                seen.append(f"{self.command} {self.path}\n{self.headers}\n{body}")
                origin = f"http://127.0.0.1:{self.server.server_address[1]}"
                document = {
                    "issuer": origin,
                    "resource": origin,
                    "authorization_servers": [origin],
                    "token_endpoint": f"{origin}/token",
                    "authorization_endpoint": f"{origin}/authorize",
                    "code_challenge_methods_supported": ["S256"],
                    "access_token": "stolen",
                    "token_type": "Bearer",
                }
                data = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_discovery_never_takes_the_client_secret_elsewhere(
    moniker_oauth: Moniker, write_config, oauth_servers: OAuthServers
) -> None:
    """Hold the boundary, finding 10: with `grant: client_credentials`, every 401 runs
    discovery again. A server (hostile, or intercepted) that names metadata at another origin
    is not followed there; one that names another authorization server than the one moniker
    got its tokens from is refused. The other place never sees a request, let alone the
    client secret."""
    m = moniker_oauth
    config = client_credentials_config(write_config, oauth_servers)
    done = m.run("-c", str(config), "call", "whoami", "{}")
    assert done.returncode == 0, m.describe(done)
    evil = Recorder()
    try:
        # The challenge names metadata elsewhere: moniker reads the server's own instead, and
        # goes on with the authorization server it knows.
        oauth_servers.turn_hostile(resource_metadata=f"{evil.url}/.well-known/oauth-protected-resource")
        oauth_servers.revoke_seen()
        done = m.run("-c", str(config), "call", "whoami", "{}")
        assert done.returncode == 0, m.describe(done)
        assert evil.seen == [], evil.seen
        # The server's metadata names another authorization server: refused.
        oauth_servers.turn_hostile(authorization_server=evil.url)
        oauth_servers.revoke_seen()
        done = m.run("-c", str(config), "call", "whoami", "{}")
        assert done.returncode != 0, m.describe(done)
        assert "moniker trusts for it" in done.stderr + done.stdout, m.describe(done)
        assert evil.seen == [], evil.seen
        assert oauth_servers.client_secret not in "".join(evil.seen)
    finally:
        evil.close()
