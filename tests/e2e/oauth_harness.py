"""The OAuth harness shared by test_oauth.py (moniker as an OAuth client) and
test_resource_server.py (moniker as a resource server): tests/e2e/oauth/server.mjs started and
driven from Python (its test controls, tokens of every kind), the Python SDK's OAuth client with
tests/e2e/oauth/follow.py as its browser, and `Moniker`, the moniker binary run with a private
HOME / XDG_DATA_HOME. See server.mjs's header comment for the servers' rules.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import secrets
import selectors
import shutil
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

E2E_DIR = Path(__file__).resolve().parent
OAUTH_DIR = E2E_DIR / "oauth"
SERVER_JS = OAUTH_DIR / "server.mjs"
FOLLOW = OAUTH_DIR / "follow.py"
NODE = shutil.which("node")
HAVE_OIDC_PROVIDER = NODE is not None and (E2E_DIR / "node_modules" / "oidc-provider").is_dir()
SKIP_REASON = "needs `node` on PATH and tests/e2e/node_modules/oidc-provider (npm ci --prefix tests/e2e)"

SessionOpener = Any  # conftest's mcp_session fixture: opener(command, args, **kw) -> async CM

CLI_TIMEOUT = 30  # seconds for one moniker command (or one follow.py run)
SERVER_START_TIMEOUT = 20
SCOPE = "mcp:tools"


# --------------------------------------------------------------------------------------------
# server.mjs
# --------------------------------------------------------------------------------------------


class OAuthServers:
    """One running server.mjs: its authorization server (`issuer`), its own MCP resource server
    (`mcp`) and its test controls (`control`)."""

    def __init__(self, info: dict[str, Any], stderr_path: Path, ca: Path | None = None) -> None:
        # The CA of the resource server's certificate when it is over HTTPS (`tls`): its file,
        # and what checks it.
        self.ca = ca
        self.verify: Any = ssl.create_default_context(cafile=str(ca)) if ca else True
        self.issuer: str = info["issuer"]
        self.mcp: str = info["mcp"]
        self.client_id: str = info["client_credentials"]["client_id"]
        self.client_secret: str = info["client_credentials"]["client_secret"]
        self.control: str = info["control"]
        self.resources: list[str] = info.get("resources", [self.mcp])
        self.kid: str | None = info.get("kid")
        self.stderr_path = stderr_path
        self._metadata: dict[str, Any] | None = None

    # ---- controls ----

    def _post(self, name: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = httpx.post(f"{self.control}/{name}", json=body or {}, timeout=10, verify=self.verify)
        assert response.status_code == 200, (
            f"server.mjs POST /_test/{name} answered {response.status_code}: {response.text}\n{self.log()}"
        )
        return response.json()

    def revoke_seen(self) -> None:
        """The MCP server refuses (401 invalid_token) every access token it accepted so far."""
        self._post("revoke-seen")

    def turn_hostile(self, **said: str) -> None:
        """The MCP server names other places: `resource_metadata` in its challenges,
        `authorization_server` in its resource metadata."""
        self._post("hostile", said)

    def add_resources(self, *resources: str) -> list[str]:
        """The authorization server issues tokens for these resource URLs too."""
        self.resources = self._post("resources", {"resources": list(resources)})["resources"]
        return self.resources

    def revoke_account(self, account: str) -> None:
        """The authorization server no longer exchanges `account`'s tokens (RFC 8693)."""
        self._post("revoke-account", {"account": account})

    def exchanges(self) -> dict[str, Any]:
        """The token exchanges made so far: {count, subjects: {sub: count}}."""
        return self._post("exchanges")

    def login_as(self, account: str) -> None:
        """Every interactive login from now on is `account`'s (alice: groups [staff]; bob:
        groups [admins])."""
        self._post("login-as", {"account": account})

    def rotate(self, phase: str) -> dict[str, Any]:
        """"add": a new signing key, published beside the old; "drop": only the signing key
        stays published. -> {kid: signing kid, published: [kids]}."""
        answer = self._post("rotate", {"phase": phase})
        self.kid = answer["kid"]
        return answer

    def mint(self, claims: dict[str, Any] | None = None, *, key: str = "signing", header: dict[str, Any] | None = None) -> str:
        """A JWT access token made by server.mjs itself (not oidc-provider): default claims
        (iss, sub mallory, aud = its MCP URL, scope mcp:tools, exp in OAUTH_ACCESS_TTL) replaced
        by `claims` (None removes one); key "signing" (published) or "unpublished"."""
        return self._post("mint", {"claims": claims or {}, "key": key, "header": header or {}})["access_token"]

    # ---- tokens ----

    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            response = httpx.get(f"{self.issuer}/.well-known/oauth-authorization-server", timeout=10)
            response.raise_for_status()
            self._metadata = response.json()
        return self._metadata

    def client_credentials(self, resource: str | None, scope: str | None = SCOPE) -> str:
        """An access token of the static client_credentials client (sub = its client id, no
        groups): a JWT for `resource`; without a resource, an opaque token."""
        data = {"grant_type": "client_credentials"}
        if resource is not None:
            data["resource"] = resource
        if scope is not None:
            data["scope"] = scope
        response = httpx.post(
            self.metadata()["token_endpoint"], data=data, auth=(self.client_id, self.client_secret), timeout=10
        )
        assert response.status_code == 200, f"client_credentials token: {response.status_code} {response.text}\n{self.log()}"
        return response.json()["access_token"]

    def interactive(
        self, resource: str, account: str | None = None, scope: str = SCOPE, refresh: bool = False
    ) -> dict[str, Any]:
        """The token response of an interactive login (authorization code + PKCE, a public
        native client registered for it, follow.py as the browser) by `account` (else whoever
        login_as chose last) for `resource`, plus the registered `client_id`. With `refresh`,
        the client is registered with the refresh_token grant too (a refresh token comes)."""
        if account is not None:
            self.login_as(account)
        meta = self.metadata()
        with callback_listener() as listener:
            redirect_uri = listener.redirect_uri
            registered = httpx.post(
                meta["registration_endpoint"],
                json={
                    "client_name": "e2e-interactive",
                    "redirect_uris": [redirect_uri],
                    "grant_types": ["authorization_code", "refresh_token"] if refresh else ["authorization_code"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                    "application_type": "native",
                },
                timeout=10,
            )
            assert registered.status_code == 201, f"registration: {registered.status_code} {registered.text}"
            client_id = registered.json()["client_id"]
            verifier = secrets.token_urlsafe(48)
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            state = secrets.token_urlsafe(16)
            url = meta["authorization_endpoint"] + "?" + urllib.parse.urlencode(
                {
                    "response_type": "code",
                    "client_id": client_id,
                    "redirect_uri": redirect_uri,
                    "code_challenge": challenge,
                    "code_challenge_method": "S256",
                    "state": state,
                    "scope": scope,
                    "resource": resource,
                }
            )
            followed = subprocess.run([str(FOLLOW), url], capture_output=True, text=True, timeout=CLI_TIMEOUT)
            assert followed.returncode == 0 and listener.reached, (
                f"follow.py did not reach the callback:\n{followed.stderr}\n--- server.mjs ---\n{self.log()}"
            )
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(listener.reached[-1]).query)
        assert query.get("state") == [state] and "code" in query, f"callback without code or state: {sorted(query)}"
        response = httpx.post(
            meta["token_endpoint"],
            data={
                "grant_type": "authorization_code",
                "code": query["code"][0],
                "code_verifier": verifier,
                "redirect_uri": redirect_uri,
                "client_id": client_id,
                "resource": resource,
            },
            timeout=10,
        )
        assert response.status_code == 200, f"code exchange: {response.status_code} {response.text}\n{self.log()}"
        return {**response.json(), "client_id": client_id}

    def refresh(self, tokens: dict[str, Any], resource: str) -> dict[str, Any]:
        """The token response of a refresh_token grant with what `interactive(refresh=True)`
        returned (plus the `client_id`)."""
        response = httpx.post(
            self.metadata()["token_endpoint"],
            data={
                "grant_type": "refresh_token",
                "refresh_token": tokens["refresh_token"],
                "client_id": tokens["client_id"],
                "resource": resource,
            },
            timeout=10,
        )
        assert response.status_code == 200, f"refresh: {response.status_code} {response.text}\n{self.log()}"
        return {**response.json(), "client_id": tokens["client_id"]}

    def log_all(self) -> str:
        """server.mjs's whole log."""
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def log(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"


class LocalCa:
    """A CA of the test's own and a certificate it signed for 127.0.0.1 (EC P-256, an hour):
    PEM files in `folder` (`ca`, `cert`, `key`), for a server over HTTPS that moniker trusts
    only when told (`tls.ca_file`)."""

    def __init__(self, folder: Path, name: str = "moniker-e2e-ca") -> None:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.timezone.utc)

        def certificate(subject: str, key: Any, issuer: x509.Name, signer: Any, ca: bool) -> x509.Certificate:
            builder = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                .issuer_name(issuer)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(hours=1))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), True)
            )
            if not ca:
                san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
                builder = builder.add_extension(san, False)
            return builder.sign(signer, hashes.SHA256())

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        ca = certificate(name, ca_key, ca_name, ca_key, ca=True)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = certificate("127.0.0.1", key, ca_name, ca_key, ca=False)
        folder.mkdir(parents=True, exist_ok=True)
        self.ca = folder / "ca.pem"
        self.cert = folder / "cert.pem"
        self.key = folder / "key.pem"
        self.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pkcs8 = serialization.PrivateFormat.PKCS8
        self.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption()))


@contextmanager
def start_oauth_servers(
    tmp_path: Path,
    ttl: int,
    resources: Iterable[str] = (),
    name: str = "oauth-server",
    opaque: Iterable[str] = (),
    tls: LocalCa | None = None,
) -> Iterator[OAuthServers]:
    """server.mjs running (access tokens live `ttl` seconds; it also issues tokens for
    `resources`, and opaque ones for `opaque`; its resource server over HTTPS with `tls`'s
    certificate when given), stopped on leaving."""
    assert NODE is not None
    stderr_path = tmp_path / f"{name}.stderr"
    env = {**os.environ, "OAUTH_ACCESS_TTL": str(ttl)}
    resources = list(resources)
    if resources:
        env["OAUTH_RESOURCES"] = ",".join(resources)
    opaque = list(opaque)
    if opaque:
        env["OAUTH_OPAQUE_RESOURCES"] = ",".join(opaque)
    if tls is not None:
        env["OAUTH_RS_TLS_CERT"], env["OAUTH_RS_TLS_KEY"] = str(tls.cert), str(tls.key)
    with open(stderr_path, "w") as errlog:
        proc = subprocess.Popen(
            [NODE, str(SERVER_JS)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errlog,
            text=True,
            env=env,
            cwd=E2E_DIR,
        )
    try:
        line = _read_line(proc, SERVER_START_TIMEOUT)
        if not line:
            pytest.fail(
                f"server.mjs printed no JSON line within {SERVER_START_TIMEOUT} s (exit {proc.poll()})\n"
                + stderr_path.read_text(errors="replace")[-3000:],
                pytrace=False,
            )
        yield OAuthServers(json.loads(line), stderr_path, ca=tls.ca if tls else None)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout:
            proc.stdout.close()


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=max(0.0, deadline - time.monotonic())):
                return proc.stdout.readline().strip()
            if proc.poll() is not None:
                return ""
    return ""


def decode_jwt(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) of a JWT, unverified."""

    def part(text: str) -> dict[str, Any]:
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))

    header, claims, _ = token.split(".")
    return part(header), part(claims)


# --------------------------------------------------------------------------------------------
# A loopback redirect URI, and the Python SDK's OAuth client with follow.py as its browser
# --------------------------------------------------------------------------------------------


class _Listener:
    def __init__(self) -> None:
        reached: list[str] = []
        self.reached = reached

        class Callback(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                reached.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"done\n")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Callback)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.redirect_uri = f"http://127.0.0.1:{self.server.server_address[1]}/callback"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def callback_listener() -> Iterator[_Listener]:
    """An HTTP server on loopback recording the paths it was sent to (`reached`)."""
    listener = _Listener()
    try:
        yield listener
    finally:
        listener.close()


class SdkOAuth:
    """mcp's OAuthClientProvider (in `auth`, for an httpx.AsyncClient) with follow.py as its
    browser; `reached`: the callback paths the browser reached; `storage.tokens`: the tokens."""

    def __init__(self, auth: Any, reached: list[str], storage: Any) -> None:
        self.auth = auth
        self.reached = reached
        self.storage = storage


@asynccontextmanager
async def sdk_oauth(server_url: str, servers: OAuthServers, client_name: str = "sdk-e2e") -> AsyncIterator[SdkOAuth]:
    """The official Python SDK's OAuth client for `server_url` (its own discovery from the
    401, Dynamic Client Registration, PKCE, resource, refresh), logging in through
    server.mjs's authorization server with follow.py as the browser."""
    from mcp.client.auth import OAuthClientProvider, TokenStorage
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

    class Memory(TokenStorage):
        tokens: OAuthToken | None = None
        client: OAuthClientInformationFull | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            self.client = client_info

    with callback_listener() as listener:

        async def open_browser(url: str) -> None:
            done = await anyio.to_thread.run_sync(
                lambda: subprocess.run([str(FOLLOW), url], capture_output=True, text=True, timeout=CLI_TIMEOUT)
            )
            assert done.returncode == 0, f"follow.py failed:\n{done.stderr}\n--- server.mjs ---\n{servers.log()}"

        async def callback() -> tuple[str, str | None]:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(listener.reached[-1]).query)
            assert query.get("iss") == [servers.issuer], f"callback without the right iss: {sorted(query)}"
            return query["code"][0], query.get("state", [None])[0]

        storage = Memory()
        auth = OAuthClientProvider(
            server_url=server_url,
            client_metadata=OAuthClientMetadata(
                client_name=client_name,
                redirect_uris=[listener.redirect_uri],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=storage,
            redirect_handler=open_browser,
            callback_handler=callback,
            timeout=CLI_TIMEOUT,
        )
        yield SdkOAuth(auth, listener.reached, storage)


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


# --------------------------------------------------------------------------------------------
# moniker: one-shot commands and serve sessions, with a private HOME / XDG_DATA_HOME
# --------------------------------------------------------------------------------------------


class Moniker:
    """Runs the moniker binary with tokens kept in tmp_path; records every stderr it saw."""

    def __init__(self, binary: Path, tmp_path: Path, servers: OAuthServers, opener: SessionOpener) -> None:
        self.binary = binary
        self.tmp_path = tmp_path
        self.servers = servers
        self.opener = opener
        self.data = tmp_path / "data"
        self.home = tmp_path / "home"
        self.data.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(exist_ok=True)
        self.follow_log = tmp_path / "follow.log"
        self.outputs: list[tuple[str, str]] = []  # (what, text): every stderr (and CLI stdout)

    @property
    def auth_dir(self) -> Path:
        return self.data / "moniker" / "auth"

    def env(self, browser: str | None) -> dict[str, str]:
        env = {
            "RUST_BACKTRACE": "1",
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.data),
            "FOLLOW_LOG": str(self.follow_log),
            # Each `serve` is a gateway of its own: the one after `logout` must not be the
            # shared gateway that still holds the token from before.
            "MONIKER_STANDALONE": "1",
        }
        if browser is not None:
            env["BROWSER"] = browser
        return env

    def run(
        self, *args: str, browser: str | None = None, timeout: float = CLI_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if k not in ("BROWSER", "RUST_LOG", "MONIKER_LOG")}
        command = " ".join(["moniker", *args])
        try:
            done = subprocess.run(
                [str(self.binary), *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**base, **self.env(browser)},
                cwd=self.tmp_path,
            )
        except subprocess.TimeoutExpired as expired:
            err = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr
            pytest.fail(
                f"`{command}` did not end within {timeout} s\n--- its stderr ---\n{(err or '')[-3000:]}"
                f"\n--- server.mjs log ---\n{self.servers.log()}",
                pytrace=False,
            )
        self.outputs.append((f"`{command}` stderr", done.stderr))
        self.outputs.append((f"`{command}` stdout", done.stdout))
        return done

    def describe(self, done: subprocess.CompletedProcess[str]) -> str:
        return (
            f"exit {done.returncode}\n--- stdout ---\n{done.stdout[-2000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
            f"\n--- server.mjs log ---\n{self.servers.log()}"
        )

    def serve(self, config: Path, *, log: str | None = None, name: str = "serve"):
        args = ["-c", str(config)] + (["--log", log] if log else []) + ["serve"]
        stderr_path = self.tmp_path / f"moniker-{name}.stderr"
        return self.opener(
            self.binary, args, env=self.env(None), stderr_path=stderr_path, label=f"moniker {' '.join(args)}"
        )

    def record_stderr(self, name: str) -> str:
        text = (self.tmp_path / f"moniker-{name}.stderr").read_text(errors="replace")
        self.outputs.append((f"`moniker serve` ({name}) stderr", text))
        return text

    def auth_files(self) -> list[Path]:
        if not self.auth_dir.exists():
            return []
        return sorted(p for p in self.auth_dir.rglob("*") if p.is_file())
