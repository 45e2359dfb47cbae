"""The console in a real browser: Debian's chromium, driven by Playwright for Python, against a
real `moniker serve --http --console` in front of moniker-fixture servers (one of them
colliding, one whose tool description holds a `<script>`).

Each page loads with no console error; the namespace shows an alias and a collision's fix;
"view as" a bound toolset shows only its tools; a playground call reaches the server and
appears in Activity; a bound token and no token are refused; the `<script>` is shown as text.
Behind HAProxy (Debian's), which puts moniker under `/team`, the console works whole: its
links, forms, redirects and cookies stay under the path, for a token and for a sign-in at the
identity provider.
With CONSOLE_SCREENSHOTS=<dir> the pages are saved there (docs/src/console holds the guide's).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager, nullcontext
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

ADMIN = "console-admin-token-7d1"
BOUND = "console-bound-token-2c9"
SCRIPT = "<script>alert('poisoned')</script>"
PAGES = ["servers", "namespace", "access", "activity", "playground"]
HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
# moniker under a path: what is below `prefix` goes to moniker without it, nothing else does;
# and moniker is told its own address as `Host`, as nginx does by default (`$proxy_host`).
UNDER_A_PATH = """global
    maxconn 64
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend web
    bind 127.0.0.1:{port}
    http-request deny deny_status 404 unless {{ path_beg {prefix}/ }}
    http-request replace-path ^{prefix}(/.*)$ \\1
    http-request set-header Host 127.0.0.1:{upstream}
    default_backend moniker
backend moniker
    server moniker 127.0.0.1:{upstream}
"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("Debian's `chromium` is not installed (apt-get install chromium; scripts/test does)", pytrace=False)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(
    moniker_bin: Path, config: Path, tmp_path: Path, *extra: str, port: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port = port or free_port()
    log = open(tmp_path / f"console-{port}.stderr", "w")
    proc = subprocess.Popen(
        [str(moniker_bin), "serve", "--http", f"127.0.0.1:{port}", "-c", str(config), *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path)},
    )
    base = f"http://127.0.0.1:{port}"
    up(base, proc, "moniker --http", tmp_path / f"console-{port}.stderr")
    return proc, base


def up(base: str, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    """Waits until `base` answers `/healthz` (30 s at most); kills `proc` and fails with its
    log if it does not."""
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f"{base}/healthz", timeout=1).read()
            return
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError(f"{what} did not come up: {log.read_text()}")
            time.sleep(0.1)


@pytest.fixture
def console(moniker_bin: Path, fixture_bin: Path, write_config, tmp_path: Path) -> Iterator[str]:
    evil = tmp_path / "evil.json"
    evil.write_text(
        json.dumps({"tools": [{"name": "evil_tool", "description": f"Looks fine. {SCRIPT}", "inputSchema": {"type": "object"}}]})
    )
    repo = Path(__file__).resolve().parents[2]
    config = write_config(
        {
            "servers": {
                "graph": {"command": str(fixture_bin), "args": [str(repo / "fixtures" / "contextgraph.json")]},
                "one": {"command": str(fixture_bin), "args": []},
                "two": {"command": str(fixture_bin), "args": []},
                "evil": {"command": str(fixture_bin), "args": [str(evil)]},
                "broken": {"command": str(tmp_path / "no-such-server")},
            },
            "tools": {"discover_sub_goals": {"aliases": ["discover_goals"]}},
            "toolsets": {"small": {"tools": ["discover_goals"]}},
            "http": {"tokens": [{"token": ADMIN, "name": "admin"}, {"token": BOUND, "toolset": "small", "name": "bound"}]},
        }
    )
    proc, base = serve(moniker_bin, config, tmp_path, "--console")
    # Every server has answered (the collision is in /healthz once `one` and `two` have listed).
    deadline = time.time() + 20
    while "naming::duplicate" not in urllib.request.urlopen(f"{base}/healthz", timeout=2).read().decode() and time.time() < deadline:
        time.sleep(0.1)
    yield base
    proc.terminate()
    proc.wait(timeout=10)


@contextmanager
def under_a_path(upstream: str, prefix: str, tmp_path: Path, port: int | None = None) -> Iterator[str]:
    """HAProxy on `port`, giving `upstream` (moniker's base URL) under `prefix`: the base URL
    through it."""
    if not HAPROXY:
        pytest.fail("Debian's `haproxy` is not installed (apt-get install haproxy; scripts/test does)", pytrace=False)
    port = port or free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(UNDER_A_PATH.format(port=port, prefix=prefix, upstream=upstream.rsplit(":", 1)[1]))
    log = open(tmp_path / "haproxy.log", "w")
    proc = subprocess.Popen([HAPROXY, "-db", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}{prefix}"
    try:
        up(base, proc, "haproxy", tmp_path / "haproxy.log")
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        yield launched
        launched.close()


class Watched:
    """A page whose console errors and dialogs are kept (a dialog would be a script that ran)."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def login(self, base: str, token: str) -> None:
        self.page.goto(f"{base}/console/login")
        self.page.fill("#token", token)
        self.page.click("button[type=submit]")


def test_no_token_and_a_bound_token_are_refused(console: str, browser: Any) -> None:
    watched = Watched(browser)
    response = watched.page.goto(f"{console}/console/namespace")
    assert watched.page.url.endswith("/console/login"), watched.page.url
    assert response is not None and response.status == 200
    watched.login(console, BOUND)
    assert "bound to toolset `small`" in watched.page.inner_text("main")
    watched.login(console, "not-a-token")
    assert "not a token of" in watched.page.inner_text("main")
    # Without a session, the pages send the browser to the login page, whatever it asks.
    with pytest.raises(urllib.error.HTTPError) as bound:
        urllib.request.urlopen(urllib.request.Request(f"{console}/console/servers", headers={"Authorization": f"Bearer {BOUND}"}))
    assert bound.value.code == 403


def test_log_out_takes_the_consoles_own_form(console: str, browser: Any) -> None:
    """A POST to /console/logout from elsewhere (another port of this host passes the Origin
    check; it has the browser's cookie but not the page's CSRF token) ends nothing; the
    console's own Log out button does."""
    watched = Watched(browser)
    watched.login(console, ADMIN)
    cookies = "; ".join(f"{c['name']}={c['value']}" for c in watched.page.context.cookies())
    forged = urllib.request.Request(
        f"{console}/console/logout",
        data=b"",
        method="POST",
        headers={"Cookie": cookies, "Origin": console, "Content-Type": "application/x-www-form-urlencoded"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged)
    assert refused.value.code == 403
    response = watched.page.goto(f"{console}/console/servers")
    assert response is not None and response.status == 200 and watched.page.url.endswith("/console/servers"), watched.page.url
    watched.page.click("form.who button[type=submit]")
    watched.page.goto(f"{console}/console/servers")
    assert watched.page.url.endswith("/console/login"), watched.page.url


def test_every_page_loads_and_shows_what_it_must(console: str, browser: Any, tmp_path: Path) -> None:
    watched = Watched(browser)
    watched.login(console, ADMIN)
    shots = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    for name in PAGES:
        response = watched.page.goto(f"{console}/console/{name}")
        assert response is not None and response.status == 200, name
        csp = response.headers.get("content-security-policy", "")
        assert "default-src 'none'" in csp and "script-src" not in csp, csp
        watched.page.screenshot(path=str(shots / f"{name}.png"), full_page=False)
    assert watched.errors == [], watched.errors

    # Servers: the two whose names collide both serve; the name is served by neither (the
    # fix is on the namespace page, below).
    watched.page.goto(f"{console}/console/servers")
    rows = watched.page.locator("tbody tr").all_inner_texts()
    held = [r.split("\t")[0] for r in rows if "held out" in r]
    assert held == [], rows
    # A server that cannot start: restarting (or starting again), its error and when.
    broken = next(r for r in rows if r.startswith("broken"))
    assert ("restarting" in broken or "starting" in broken) and "no-such-server" in broken and " UTC, " in broken, broken

    # Namespace: the alias beside its tool, the collision with the fix to paste.
    watched.page.goto(f"{console}/console/namespace?q=goal")
    row = watched.page.locator("tr", has=watched.page.locator("td.name", has_text="discover_sub_goals"))
    assert "discover_goals" in row.inner_text()
    watched.page.goto(f"{console}/console/namespace")
    fixes = watched.page.locator("pre.fix").all_inner_texts()
    assert any("one/echo: { name: one_echo }" in fix for fix in fixes), fixes

    # View as the bound toolset: its tools alone, with its token count.
    watched.page.goto(f"{console}/console/access?as=small")
    listing = json.loads(watched.page.inner_text("#view-listing"))
    names = {tool["name"] for tool in listing["tools"]}
    assert names == {"discover_sub_goals"}, names
    assert "tokens (o200k)" in watched.page.inner_text("#view-summary")
    # The same toolset in search mode: moniker's search tools beside the pinned (none here).
    watched.page.goto(f"{console}/console/access?as=small&mode=search")
    searched = {tool["name"] for tool in json.loads(watched.page.inner_text("#view-listing"))["tools"]}
    assert searched == {"search_tools", "call_tool"}, searched
    watched.page.goto(f"{console}/console/access?as=small&mode=hints")
    hinted = json.loads(watched.page.inner_text("#view-listing"))["tools"]
    assert [t["name"] for t in hinted] == ["discover_sub_goals"], hinted
    assert "anthropic/searchHint" in hinted[0]["_meta"], hinted

    # A description holding a script is text: shown, never run.
    watched.page.goto(f"{console}/console/access?as=*")
    assert SCRIPT in watched.page.inner_text("#view-listing")
    assert watched.dialogs == [] and watched.errors == [], (watched.dialogs, watched.errors)
    watched.page.screenshot(path=str(shots / "view-as.png"), full_page=False)


def test_a_playground_call_reaches_the_server_and_appears_in_activity(console: str, browser: Any, tmp_path: Path) -> None:
    watched = Watched(browser)
    watched.login(console, ADMIN)
    watched.page.goto(f"{console}/console/playground?toolset=*&tool=discover_sub_goals")
    watched.page.fill("#arg-max_goals", "3")
    watched.page.click("#call")
    sent = json.loads(watched.page.inner_text("#call-sent"))
    assert sent["params"] == {"name": "discover_sub_goals", "arguments": {"max_goals": 3}}, sent
    answer = json.loads(watched.page.inner_text("#call-answer"))
    text = answer["result"]["content"][0]["text"]
    assert json.loads(text) == {"tool": "discover_sub_goals", "arguments": {"max_goals": 3}}, answer
    shots = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path)
    watched.page.screenshot(path=str(shots / "playground-call.png"), full_page=False)

    # search_tools as a toolset in list mode would have it: its tools alone, ranked.
    # (`echo`, which `one` and `two` both claim, is served by neither: not found either.)
    for toolset, query, expected in (("small", "sub goals", {"discover_sub_goals"}), ("*", "evil tool echo", None)):
        watched.page.goto(f"{console}/console/playground?toolset={toolset}&q={urllib.parse.quote(query)}")
        found = json.loads(watched.page.inner_text("#search-answer"))
        assert "error" not in found and not found["result"].get("isError"), found
        lines = found["result"]["content"][0]["text"].splitlines()
        names = {line[2:].split("(")[0] for line in lines if line.startswith("- ")}
        if expected is not None:
            assert names == expected, names
        else:
            assert "evil_tool" in names and "echo" not in names and "discover_sub_goals" not in names, names

    watched.page.goto(f"{console}/console/activity?principal=console")
    rows = watched.page.locator("tbody tr").all_inner_texts()
    assert any("console admin" in r and "discover_sub_goals" in r and "ok" in r for r in rows), rows
    # The playground's two searches, each in a session of its own that ended with no call.
    searches = dict(r.split("\t")[:2] for r in watched.page.locator("#searches tbody tr").all_inner_texts())
    assert int(searches["no_call"]) >= 2 and searches["called_1"] == "0", searches

    # A form not from this console (no CSRF token) is refused, the session's cookie or not.
    refused = watched.page.request.post(
        f"{console}/console/playground",
        form={"toolset": "*", "tool": "discover_sub_goals", "arg.max_goals": "1"},
        headers={"Origin": console},
    )
    assert refused.status == 403, refused.status
    assert watched.errors == [], watched.errors


def test_the_console_works_under_a_path_a_proxy_gives_it(console: str, browser: Any, tmp_path: Path) -> None:
    """Every link, form, redirect and cookie of the console is relative to where it is: behind
    HAProxy at `/team`, a browser logs in, walks every page, calls a tool and logs out without
    a request leaving `/team` (there, moniker would not be found)."""
    with under_a_path(console, "/team", tmp_path) as base:
        watched = Watched(browser)
        asked: list[str] = []
        answered: dict[str, int] = {}
        watched.page.on("request", lambda r: asked.append(urllib.parse.urlsplit(r.url).path))
        watched.page.on("response", lambda r: answered.__setitem__(urllib.parse.urlsplit(r.url).path, r.status))

        # `/team/console` → its namespace page → the login page, each redirect relative.
        watched.page.goto(f"{base}/console")
        assert watched.page.url == f"{base}/console/login", watched.page.url
        watched.page.fill("#token", ADMIN)
        watched.page.click("button[type=submit]")
        assert watched.page.url == f"{base}/console/namespace", watched.page.url
        cookies = watched.page.context.cookies()
        assert [(c["name"], c["path"]) for c in cookies] == [("moniker_console", "/team/console")], cookies

        for name in PAGES:
            with watched.page.expect_navigation() as went:
                watched.page.click(f"nav a[href='{name}']")
            assert went.value is not None and went.value.status == 200, name
            assert watched.page.url == f"{base}/console/{name}", watched.page.url

        # The playground's form posts under the path, its CSRF token with it.
        watched.page.goto(f"{base}/console/playground?toolset=*&tool=discover_sub_goals")
        watched.page.fill("#arg-max_goals", "2")
        watched.page.click("#call")
        answer = json.loads(watched.page.inner_text("#call-answer"))
        assert json.loads(answer["result"]["content"][0]["text"])["arguments"] == {"max_goals": 2}, answer

        watched.page.click("form.who button[type=submit]")
        assert watched.page.url == f"{base}/console/login", watched.page.url
        watched.page.goto(f"{base}/console/servers")
        assert watched.page.url == f"{base}/console/login", watched.page.url

        assert asked and all(path.startswith("/team/console") for path in asked), asked
        assert answered.get("/team/console/console.css") == 200, answered
        assert all(status < 400 for status in answered.values()), answered
        assert watched.errors == [], watched.errors

        # A browser on https (a proxy ended TLS: its Origin says so) gets a `Secure` cookie.
        form = urllib.parse.urlencode({"token": ADMIN}).encode()
        https = urllib.request.Request(f"{base}/console/login", data=form, headers={"Origin": "https://127.0.0.1"})
        with pytest.raises(urllib.error.HTTPError) as redirected:
            urllib.request.build_opener(NoRedirect()).open(https)
        assert redirected.value.code == 303 and "; Secure" in redirected.value.headers["Set-Cookie"], redirected.value.headers


def test_the_console_is_not_there_when_off(moniker_bin: Path, fixture_bin: Path, write_config, tmp_path: Path) -> None:
    config = write_config({"servers": {"one": {"command": str(fixture_bin), "args": []}}}, name="off.yaml")
    proc, base = serve(moniker_bin, config, tmp_path)
    try:
        with pytest.raises(urllib.error.HTTPError) as off:
            urllib.request.urlopen(f"{base}/console/login")
        assert off.value.code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("under", ["", "/team"], ids=["at-the-root", "under-a-path"])
def test_an_admin_of_the_identity_provider_signs_in_and_others_are_refused(
    moniker_bin: Path, fixture_bin: Path, write_config, tmp_path: Path, browser: Any, under: str
) -> None:
    """`http.auth.admins` names the identity provider's admins: bob (groups [admins]) signs in
    at oidc-provider in the browser (authorization code with PKCE, the console registering
    itself) and sees the console; alice (groups [staff]) signs in too and is refused; an access
    token as a bearer header opens nothing; a callback replayed, or finished by a browser that
    did not start it, is refused. `under-a-path`: the same behind HAProxy at `/team`, where
    `http.auth.resource` says moniker is (`…/team/mcp`), so the identity provider sends the
    browser back to `…/team/console/signin/callback`."""
    from oauth_harness import HAVE_OIDC_PROVIDER, SKIP_REASON, start_oauth_servers

    if not HAVE_OIDC_PROVIDER:
        pytest.fail(SKIP_REASON, pytrace=False)
    port = free_port()
    public = free_port() if under else port
    resource = f"http://127.0.0.1:{public}{under}/mcp"
    with start_oauth_servers(tmp_path, 120, resources=[resource]) as idp:
        config = write_config(
            {
                "servers": {"one": {"command": str(fixture_bin), "args": []}},
                "http": {
                    "console": True,
                    "tokens": [{"token": ADMIN, "name": "admin"}],
                    "auth": {
                        "resource": resource,
                        "issuer": idp.issuer,
                        "scopes": ["mcp:tools"],
                        "admins": [{"claim": "groups", "value": "admins"}],
                    },
                },
            },
            name="idp.yaml",
        )
        proc, direct = serve(moniker_bin, config, tmp_path, port=port)
        try:
            with under_a_path(direct, under, tmp_path, port=public) if under else nullcontext(direct) as base:
                idp.login_as("bob")
                bob = Watched(browser)
                callbacks: list[str] = []
                bob.page.on("request", lambda r: callbacks.append(r.url) if "/console/signin/callback" in r.url else None)
                bob.page.goto(f"{base}/console/login")
                bob.page.click("#signin")
                bob.page.wait_for_url(f"{base}/console/namespace")
                assert callbacks and callbacks[0].startswith(f"{base}/console/signin/callback?"), callbacks
                ours = [c for c in bob.page.context.cookies() if c["name"].startswith("moniker_console")]
                assert [(c["name"], c["path"]) for c in ours] == [("moniker_console", f"{under}/console")], ours

                # A token logs in wherever the console is reached, behind the proxy or not: the
                # session's cookie is at the login page's folder.
                for at in {base, direct}:
                    admin = Watched(browser)
                    admin.login(at, ADMIN)
                    assert admin.page.url == f"{at}/console/namespace", admin.page.url
                    assert "console admin" in admin.page.inner_text("header")
                assert "console bob" in bob.page.inner_text("header"), bob.page.inner_text("header")
                assert "echo" in bob.page.inner_text("main")
                bob.page.goto(f"{base}/console/access")
                assert "admins: claim groups = admins" in bob.page.inner_text("main")
                assert bob.errors == [], bob.errors

                idp.login_as("alice")
                alice = Watched(browser)
                # Her refusal is a level below the console: its stylesheet is found all the same.
                styles: list[int] = []
                alice.page.on("response", lambda r: styles.append(r.status) if r.url.endswith("/console.css") else None)
                alice.page.goto(f"{base}/console/login")
                alice.page.click("#signin")
                alice.page.wait_for_load_state()
                assert "`alice` is signed in, but `http.auth.admins` does not name them" in alice.page.inner_text("main")
                # The login page's stylesheet, then her refusal's (`../console.css`).
                assert styles == [200, 200], styles
                # No session came of it: the pages send her back to the login page.
                alice.page.goto(f"{base}/console/servers")
                assert alice.page.url == f"{base}/console/login", alice.page.url

                # An access token an MCP client holds opens no console, even an admin's: identities
                # sign in with a browser.
                token = idp.interactive(resource, account="bob")["access_token"]
                request = urllib.request.Request(f"{base}/console/servers", headers={"Authorization": f"Bearer {token}"})
                with pytest.raises(urllib.error.HTTPError) as bearer:
                    urllib.request.urlopen(request)
                assert bearer.value.code == 401

                # A sign-in another browser started: its callback is refused here (its state is not
                # this browser's), and so is the same callback again.
                idp.login_as("bob")
                started = urllib.request.build_opener(NoRedirect()).open
                to_idp = f"{base}/console/signin"
                # Behind the proxy, which hands moniker its own address as `Host`, the sign-in
                # first sends the browser to the public URL, once.
                for _ in range(2 if under else 1):
                    try:
                        started(to_idp)
                    except urllib.error.HTTPError as redirect:
                        to_idp = redirect.headers["Location"]
                    else:
                        raise AssertionError("/console/signin did not redirect")
                    if under and to_idp.startswith(base):
                        assert to_idp == f"{base}/console/signin?moved", to_idp
                assert "code_challenge_method=S256" in to_idp and "resource=" in to_idp, to_idp
                mallory = Watched(browser)
                # Her browser is in the middle of a sign-in of its own (another state).
                mallory.page.context.add_cookies(
                    [{"name": "moniker_console_signin", "value": "herstate.herverifier.herclient", "url": f"{base}/console/signin/callback"}]
                )
                mallory.page.goto(to_idp)
                mallory.page.wait_for_load_state()
                assert "not started by this browser" in mallory.page.inner_text("main"), mallory.page.inner_text("main")
                # bob's own callback again, in his browser: the sign-in is over (its cookie gone).
                replayed = bob.page.goto(callbacks[0])
                assert replayed is not None and replayed.status == 400
                assert "or is over: sign in again" in bob.page.inner_text("main")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001
        return None
