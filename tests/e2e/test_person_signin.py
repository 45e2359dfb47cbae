"""A sign-in per person for a remote server with its own OAuth (`auth.per_person`). Two
tests/e2e/oauth/server.mjs run: one is the identity provider of moniker's callers (`http.auth`),
the other stands for a hosted MCP server with an authorization server of its own (its MCP server
checks its own tokens: audience its /mcp, `whoami` says their `sub`). moniker is registered at
the remote one once (Dynamic Client Registration by the test, as an admin would), lists the
server with that client's credentials, and calls it as each person: a person who has not signed
in gets a link; tests/e2e/oauth/follow.py, a browser that follows redirects with cookies, signs
them in at the remote authorization server; their retried call goes as them.
"""

from __future__ import annotations

import asyncio
import re
import time
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import McpError
from scenarios import bearer_session

from oauth_harness import FOLLOW, HAVE_OIDC_PROVIDER, SCOPE, SKIP_REASON, LocalCa, OAuthServers, start_oauth_servers, text_of
from test_console import Watched, browser  # noqa: F401 (a fixture)
from test_resource_server import Gateway, auth_section, gw  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not HAVE_OIDC_PROVIDER, reason=SKIP_REASON)

KEY = secrets.token_hex(32)
LINK = re.compile(r"(http://127\.0\.0\.1:\d+/connect/up\?ticket=[A-Za-z0-9_-]+)")


@pytest.fixture
def idp(tmp_path: Path, gw: Gateway) -> Iterator[OAuthServers]:
    """The identity provider of moniker's callers."""
    with start_oauth_servers(tmp_path, 300, resources=[gw.url()]) as servers:
        yield servers


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[OAuthServers]:
    """The hosted server: its own authorization server and MCP server (over HTTPS, its
    certificate of a CA of the test's own)."""
    tls = LocalCa(tmp_path / "remote-tls")
    with start_oauth_servers(tmp_path, 300, name="remote-oauth-server", tls=tls) as servers:
        yield servers


def register(remote: OAuthServers, gw: Gateway) -> dict[str, str]:
    """moniker's client at the remote authorization server: both grants, moniker's callback."""
    answer = httpx.post(
        remote.metadata()["registration_endpoint"],
        json={
            "client_name": "moniker (registered by its admin)",
            "redirect_uris": [f"{gw.origin}/connect/up/callback"],
            "grant_types": ["authorization_code", "refresh_token", "client_credentials"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_basic",
            "application_type": "native",
        },
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def start(
    gw: Gateway,
    idp: OAuthServers,
    remote: OAuthServers,
    moniker_bin: Path,
    write_config,
    key: str | None = KEY,
    **http: Any,
) -> None:
    client = register(remote, gw) if not hasattr(gw, "client") else gw.client  # type: ignore[attr-defined]
    gw.client = client  # type: ignore[attr-defined]
    config = write_config(
        {
            "servers": {
                "up": {
                    "url": remote.mcp,
                    "tls": {"ca_file": str(remote.ca)},
                    "auth": {
                        "per_person": True,
                        "grant": "client_credentials",
                        "client_id": client["client_id"],
                        "client_secret": client["client_secret"],
                        "scope": SCOPE,
                    },
                }
            },
            "http": {"auth": auth_section(gw, idp, toolsets=None, default_toolset=None), **http},
            "audit": str(gw.audit_path),
        },
        name="per-person.yaml",
    )
    base_env = Gateway.env(gw)
    gw.env = lambda: {**base_env, **({"MONIKER_SECRET_KEY": key} if key else {})}  # type: ignore[method-assign]
    gw.stop()
    gw.start(moniker_bin, config)


async def call(gw: Gateway, token: str) -> tuple[bool, str]:
    async with bearer_session(gw.url(), token) as session:
        try:
            result = await session.call_tool("whoami", {})
        except McpError as refused:
            return True, refused.error.message
    return bool(result.isError), text_of(result)


def sign_in(idp: OAuthServers, remote: OAuthServers, account: str, link: str) -> subprocess.CompletedProcess[str]:
    """A browser (follow.py) of `account`'s opens `link`: signed in as `account` at moniker's
    identity provider, then at the remote server's authorization server."""
    idp.login_as(account)
    remote.login_as(account)
    return subprocess.run([str(FOLLOW), link], capture_output=True, text=True, timeout=60)


async def signed_in(gw: Gateway, idp: OAuthServers, remote: OAuthServers, token: str, account: str) -> None:
    failed, text = await call(gw, token)
    found = LINK.search(text)
    assert failed and found, f"no sign-in link: {text}\n{gw.describe()}"
    done = sign_in(idp, remote, account, found.group(1))
    assert done.returncode == 0, done.stderr + "\n" + gw.describe()
    failed, text = await call(gw, token)
    assert not failed and f"sub={account} " in text, f"{text}\n{done.stderr}\n{gw.describe()}"


@pytest.mark.timeout(180)
async def test_each_person_signs_in_and_calls_as_themselves(
    gw: Gateway, idp: OAuthServers, remote: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """alice and bob each get a link, sign in in the browser, and their retried calls reach the
    server as each of them (its log shows both); 60 calls of the two at once never cross; the
    audit log names the person and who they were upstream; signing out brings the link back."""
    start(gw, idp, remote, moniker_bin, write_config)
    tokens = {who: idp.interactive(gw.url(), account=who)["access_token"] for who in ("alice", "bob")}
    for who in ("alice", "bob"):
        await signed_in(gw, idp, remote, tokens[who], who)
    logged = remote.log_all()
    assert "RS request by sub=alice" in logged and "RS request by sub=bob" in logged

    async def person(who: str) -> list[str]:
        async with bearer_session(gw.url(), tokens[who]) as session:
            results = await asyncio.gather(*(session.call_tool("whoami", {}) for _ in range(30)))
        return [text_of(r) for r in results]

    answers = dict(zip(("alice", "bob"), await asyncio.gather(person("alice"), person("bob"))))
    for who, texts in answers.items():
        assert all(f"sub={who} " in t for t in texts), f"{who}'s calls went as another: {texts[:3]}"
    audited = [(line["principal"], line.get("upstream")) for line in gw.audit() if line.get("name") == "whoami"]
    assert ("alice", "alice") in audited and ("bob", "bob") in audited, audited

    out = httpx.delete(f"{gw.origin}/connect/up", headers={"authorization": f"Bearer {tokens['alice']}"}, timeout=10)
    assert out.status_code == 204, out.text
    failed, text = await call(gw, tokens["alice"])
    assert failed and LINK.search(text), text
    failed, text = await call(gw, tokens["bob"])
    assert not failed and "sub=bob " in text, text


@pytest.mark.timeout(180)
async def test_sign_ins_are_sealed_at_rest_and_kept_across_restarts(
    gw: Gateway, idp: OAuthServers, remote: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """With MONIKER_SECRET_KEY, alice's sign-in is a file no one reads without the key (no
    token in it), moniker restarted with the key calls as her without a new sign-in, and with
    another key it asks her to sign in again."""
    start(gw, idp, remote, moniker_bin, write_config)
    alice = idp.interactive(gw.url(), account="alice")["access_token"]
    await signed_in(gw, idp, remote, alice, "alice")
    files = list((gw.tmp_path / "gateway-home").rglob("*.sealed"))
    assert len(files) == 1, files
    sealed = files[0].read_bytes()
    assert b"eyJ" not in sealed and b"access_token" not in sealed and b"alice" not in sealed
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"

    start(gw, idp, remote, moniker_bin, write_config)
    failed, text = await call(gw, alice)
    assert not failed and "sub=alice " in text, text

    # An admin: who is signed in, and alice signed out (the running gateway sees it at once).
    def people(*args: str) -> str:
        done = subprocess.run(
            [str(moniker_bin), "people", "up", "-c", str(gw.config), *args],
            capture_output=True, text=True, timeout=30, env=gw.env(),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "alice: signed in to `up`; its token expires in" in people()
    assert "`alice` is signed out of `up`" in people("--forget", "alice")
    failed, text = await call(gw, alice)
    assert failed and LINK.search(text), text
    await signed_in(gw, idp, remote, alice, "alice")

    start(gw, idp, remote, moniker_bin, write_config, key=secrets.token_hex(32))
    failed, text = await call(gw, alice)
    assert failed and LINK.search(text), text


@pytest.mark.timeout(180)
async def test_a_link_signs_in_only_its_own_person_in_the_browser_that_began(
    gw: Gateway, idp: OAuthServers, remote: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """An attacker's test. bob's link opened in alice's browser (a link sent on, or read from a
    transcript): she proves to be alice at the identity provider and is refused, and the link
    stays bob's. bob's sign-in begun in his browser whose authorization URL is then finished in
    another (login CSRF: someone else's account under bob's name) is refused too. A link works
    once."""
    start(gw, idp, remote, moniker_bin, write_config)
    bob = idp.interactive(gw.url(), account="bob")["access_token"]
    failed, text = await call(gw, bob)
    link = LINK.search(text).group(1)
    done = sign_in(idp, remote, "alice", link)
    assert "/connect/up/callback -> 400" in done.stderr, done.stderr
    failed, text = await call(gw, bob)
    assert failed and LINK.search(text), f"bob is connected as someone else: {text}"
    # The link is still bob's: alice's attempt did not use it up.
    done = sign_in(idp, remote, "bob", link)
    assert "/connect/up/callback -> 200" in done.stderr, done.stderr
    failed, text = await call(gw, bob)
    assert not failed and "sub=bob " in text, text
    again = httpx.get(link, follow_redirects=False, timeout=10)
    assert again.status_code == 400 and "used already" in again.text, again.text

    # bob signs out, and his browser begins again, stopped where it would go to the remote
    # authorization server; alice's browser finishes that URL.
    out = httpx.delete(f"{gw.origin}/connect/up", headers={"authorization": f"Bearer {bob}"}, timeout=10)
    assert out.status_code == 204, out.text
    failed, text = await call(gw, bob)
    link = LINK.search(text).group(1)
    idp.login_as("bob")
    with httpx.Client(follow_redirects=False, timeout=10) as browser:
        url = link
        for _ in range(20):
            answer = browser.get(url)
            assert answer.status_code in (302, 303, 307), f"{url}: {answer.status_code} {answer.text}"
            url = str(httpx.URL(url).join(answer.headers["location"]))
            if url.startswith(remote.issuer):
                break
        else:
            pytest.fail("never sent to the remote authorization server")
    remote.login_as("alice")
    done = subprocess.run([str(FOLLOW), url], capture_output=True, text=True, timeout=60)
    assert "/connect/up/callback -> 400" in done.stderr, done.stderr
    failed, text = await call(gw, bob)
    assert failed and LINK.search(text), f"bob is connected as someone else: {text}"


ADMIN = "people-console-admin-5e2"


def run(coroutine: Any) -> Any:
    """An SDK coroutine run to its end on a thread of its own (Playwright's sync API holds this
    thread's event loop)."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.mark.timeout(180)
def test_an_admin_sees_who_is_signed_in_and_signs_one_out_in_the_console(
    gw: Gateway, idp: OAuthServers, remote: OAuthServers, moniker_bin: Path, write_config, browser: Any
) -> None:
    """Chromium: alice opens her link and signs in there (moniker's identity provider, then the
    remote server's own); the console's servers page lists alice and bob signed in to `up`; an
    admin signs alice out there, and her next call asks her to sign in again, bob's does not."""
    start(gw, idp, remote, moniker_bin, write_config, console=True, tokens=[{"token": ADMIN, "name": "admin"}])
    tokens = {who: idp.interactive(gw.url(), account=who)["access_token"] for who in ("alice", "bob")}
    # alice signs in in Chromium: her link, moniker's identity provider, the remote server's
    # authorization server, back to moniker.
    failed, text = run(call(gw, tokens["alice"]))
    link = LINK.search(text)
    assert failed and link, text
    idp.login_as("alice")
    remote.login_as("alice")
    signing = Watched(browser)
    signing.page.goto(link.group(1))
    signing.page.wait_for_url("**/connect/up/callback?**")
    assert signing.page.inner_text("h1") == "Signed in", signing.page.content()
    failed, text = run(call(gw, tokens["alice"]))
    assert not failed and "sub=alice " in text, text
    run(signed_in(gw, idp, remote, tokens["bob"], "bob"))
    admin = Watched(browser)
    admin.login(gw.origin, ADMIN)
    admin.page.goto(f"{gw.origin}/console/servers")
    text = admin.page.inner_text("main")
    assert "People called as themselves" in text and "alice" in text and "bob" in text, text
    admin.page.click("tr:has(td:text-is('alice')) button")
    admin.page.wait_for_url(f"{gw.origin}/console/servers")
    rows = admin.page.inner_text("main")
    assert "bob" in rows and "alice" not in rows.split("People called as themselves")[1], rows
    assert admin.errors == [] and admin.dialogs == [], (admin.errors, admin.dialogs)
    failed, text = run(call(gw, tokens["alice"]))
    assert failed and LINK.search(text), text
    failed, text = run(call(gw, tokens["bob"]))
    assert not failed and "sub=bob " in text, text


@pytest.mark.timeout(180)
async def test_a_client_that_takes_url_elicitation_is_sent_to_the_link(
    gw: Gateway, idp: OAuthServers, remote: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """The Python SDK with an elicitation handler declares URL-mode elicitation: the call of a
    person who has not signed in is answered with MCP 2025-11-25's URLElicitationRequiredError
    (-32042, the link in `data.elicitations`), which the SDK reads as one; following that URL
    signs her in, and the retried call goes as her."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import UrlElicitationRequiredError

    async def never(*_: Any) -> Any:
        raise AssertionError("moniker asked in-band")

    start(gw, idp, remote, moniker_bin, write_config)
    alice = idp.interactive(gw.url(), account="alice")["access_token"]
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {alice}"}, timeout=15) as client:
        async with streamable_http_client(gw.url(), http_client=client) as (read, write, _):
            async with ClientSession(read, write, elicitation_callback=never) as session:
                await session.initialize()
                with pytest.raises(McpError) as raised:
                    await session.call_tool("whoami", {})
                error = UrlElicitationRequiredError.from_error(raised.value.error)
                [asked] = error.elicitations
                assert asked.mode == "url" and LINK.fullmatch(asked.url), asked
                done = sign_in(idp, remote, "alice", asked.url)
                assert "/connect/up/callback -> 200" in done.stderr, done.stderr
                result = await session.call_tool("whoami", {})
                assert not result.isError and "sub=alice " in text_of(result), text_of(result)


ENV_SERVER = Path(__file__).parent / "servers" / "env_server.py"


def start_per_person(gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config, **per_person: Any) -> Path:
    """moniker serve --http with servers/env_server.py run once for each person, whose secret
    is SERVICE_TOKEN."""
    import sys

    config = write_config(
        {
            "servers": {
                "env": {
                    "command": sys.executable,
                    "args": [str(ENV_SERVER)],
                    "per_person": {"secrets": ["SERVICE_TOKEN"], **per_person},
                }
            },
            "http": {"auth": auth_section(gw, idp, toolsets=None, default_toolset=None)},
            "audit": str(gw.audit_path),
        },
        name="per-person-stdio.yaml",
    )
    base_env = Gateway.env(gw)
    gw.env = lambda: {**base_env, "MONIKER_SECRET_KEY": KEY}  # type: ignore[method-assign]
    gw.start(moniker_bin, config)
    return config


def set_secret(gw: Gateway, token: str, value: str) -> httpx.Response:
    return httpx.put(
        f"{gw.origin}/connect/env/secrets",
        json={"SERVICE_TOKEN": value},
        headers={"authorization": f"Bearer {token}"},
        timeout=10,
    )


@pytest.mark.timeout(180)
async def test_a_stdio_server_runs_once_for_each_person_with_their_own_secret(
    gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """servers.env.per_person: a person without their secret is told to set it; alice and bob
    each set theirs (PUT /connect/env/secrets with their own token) and each call reaches an
    instance of their own holding their own secret (60 calls at once never cross); the shared
    instance, which lists the tools, holds neither; a name that is not a secret is refused;
    the sealed file holds no value; signing out forgets the secret and stops the instance."""
    start_per_person(gw, idp, moniker_bin, write_config)
    tokens = {who: idp.interactive(gw.url(), account=who)["access_token"] for who in ("alice", "bob")}
    failed, text = await call(gw, tokens["alice"])
    assert failed and "SERVICE_TOKEN" in text and "/connect/env/secrets" in text, text

    assert set_secret(gw, tokens["alice"], "alice-s3cret").status_code == 204
    assert set_secret(gw, tokens["bob"], "bob-s3cret").status_code == 204
    wrong = httpx.put(f"{gw.origin}/connect/env/secrets", json={"PATH": "/tmp"},
                      headers={"authorization": f"Bearer {tokens['alice']}"}, timeout=10)
    assert wrong.status_code == 400 and "not a secret" in wrong.text, wrong.text
    anonymous = httpx.put(f"{gw.origin}/connect/env/secrets", json={"SERVICE_TOKEN": "x"}, timeout=10)
    assert anonymous.status_code == 401

    async def person(who: str) -> list[str]:
        async with bearer_session(gw.url(), tokens[who]) as session:
            results = await asyncio.gather(*(session.call_tool("whoami", {}) for _ in range(30)))
        return [text_of(r) for r in results]

    answers = dict(zip(("alice", "bob"), await asyncio.gather(person("alice"), person("bob"))))
    pids = {}
    for who, texts in answers.items():
        assert all(t.startswith(f"token={who}-s3cret ") for t in texts), f"{who}: {texts[:3]}\n{gw.describe()}"
        pids[who] = {t.split("pid=")[1] for t in texts}
        assert len(pids[who]) == 1, pids
    assert pids["alice"] != pids["bob"], pids
    sealed = list((gw.tmp_path / "gateway-home").rglob("*.sealed"))
    assert len(sealed) == 2 and all(b"s3cret" not in f.read_bytes() for f in sealed), sealed
    listed = subprocess.run(
        [str(moniker_bin), "people", "env", "-c", str(gw.config)], capture_output=True, text=True, timeout=30, env=gw.env()
    )
    assert "alice: has set their secrets for `env`; secrets SERVICE_TOKEN" in listed.stdout, listed.stdout + listed.stderr
    assert "s3cret" not in listed.stdout + listed.stderr

    out = httpx.delete(f"{gw.origin}/connect/env", headers={"authorization": f"Bearer {tokens['alice']}"}, timeout=10)
    assert out.status_code == 204, out.text
    failed, text = await call(gw, tokens["alice"])
    assert failed and "SERVICE_TOKEN" in text, text

    # An admin sets alice's secret from the command line (its value on stdin, never an
    # argument): her next call starts her instance with it.
    done = subprocess.run(
        [str(moniker_bin), "people", "env", "--set", "SERVICE_TOKEN", "--for", "alice", "-c", str(gw.config)],
        input="alice-from-admin\n", capture_output=True, text=True, timeout=30, env=gw.env(),
    )
    assert done.returncode == 0 and "alice-from-admin" not in done.stdout + done.stderr, done.stdout + done.stderr
    failed, text = await call(gw, tokens["alice"])
    assert not failed and text.startswith("token=alice-from-admin "), text
    failed, text = await call(gw, tokens["bob"])
    assert not failed and text.startswith("token=bob-s3cret "), text


@pytest.mark.timeout(180)
async def test_instances_are_bounded_and_stop_when_idle(
    gw: Gateway, idp: OAuthServers, moniker_bin: Path, write_config
) -> None:
    """instances: 1, idle: 1s. bob's call right after alice's is refused (hers was just used);
    a moment later it stops hers for his; her next call starts hers anew (another process); an
    instance no call reaches for a second stops (its process ends)."""
    start_per_person(gw, idp, moniker_bin, write_config, instances=1, idle="1s")
    tokens = {who: idp.interactive(gw.url(), account=who)["access_token"] for who in ("alice", "bob")}
    for who in tokens:
        assert set_secret(gw, tokens[who], f"{who}-s3cret").status_code == 204
    _, first = await call(gw, tokens["alice"])
    # Her instance was just used: it is not stopped for bob's (her next request may be on its
    # way to it).
    failed, busy = await call(gw, tokens["bob"])
    assert failed and "instances are at work" in busy, busy
    await asyncio.sleep(1.2)
    _, bobs = await call(gw, tokens["bob"])
    await asyncio.sleep(1.2)
    _, again = await call(gw, tokens["alice"])
    assert first.startswith("token=alice-s3cret") and bobs.startswith("token=bob-s3cret"), (first, bobs)
    assert again.startswith("token=alice-s3cret") and again != first, (first, again)
    pid = int(again.split("pid=")[1])
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists(), f"alice's idle instance still runs\n{gw.describe()}"


@pytest.mark.timeout(180)
async def test_a_persons_secret_never_widens_their_instances_sandbox(
    gw: Gateway, idp: OAuthServers, moniker_bin: Path, fixture_bin: Path, write_config, tmp_path: Path
) -> None:
    """An attacker's test: the hostile fixture server run once for each person, in a sandbox;
    alice sets her secret to the path of another project's folder (a sandbox opens the paths a
    server's own `env` names): her instance still cannot read it, though it has her value."""
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "plans.txt").write_text("the other project's plans\n")
    work = tmp_path / "work"
    work.mkdir()
    config = write_config(
        {
            "servers": {
                "hostile": {
                    "command": str(fixture_bin.parent / "moniker-hostile"),
                    "args": [str(work)],
                    "sandbox": True,
                    "per_person": {"secrets": ["SERVICE_TOKEN"]},
                }
            },
            "http": {"auth": auth_section(gw, idp, toolsets=None, default_toolset=None)},
        },
        name="hostile-per-person.yaml",
    )
    base_env = Gateway.env(gw)
    gw.env = lambda: {**base_env, "MONIKER_SECRET_KEY": KEY}  # type: ignore[method-assign]
    gw.start(moniker_bin, config)
    alice = idp.interactive(gw.url(), account="alice")["access_token"]
    put = httpx.put(
        f"{gw.origin}/connect/hostile/secrets",
        json={"SERVICE_TOKEN": str(other)},
        headers={"authorization": f"Bearer {alice}"},
        timeout=10,
    )
    assert put.status_code == 204, put.text
    async with bearer_session(gw.url(), alice) as session:
        result = await session.call_tool("attempt", {"action": "read", "target": str(other / "plans.txt")})
        said = text_of(result)
        assert result.isError and said.startswith("refused: "), f"{said}\n{gw.describe()}"
        result = await session.call_tool("attempt", {"action": "read", "target": str(work)})
        echo = await session.call_tool("echo", {"message": "honest work"})
        assert "honest work" in text_of(echo), text_of(echo)
