"""moniker's one-shot commands against the same four servers: `moniker list --json` and
`moniker call NAME ARGS`. Loose on output shape (JSON for list, the tool's text for call)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

CLI_TIMEOUT = 30  # seconds for one command, servers' start-up included


@pytest.fixture
def run_moniker(moniker_bin: Path, memory_file: Path, repo_root: Path):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "RUST_BACKTRACE": "1", "MEMORY_FILE_PATH": str(memory_file)}
        try:
            return subprocess.run(
                [str(moniker_bin), *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CLI_TIMEOUT,
                env=env,
                cwd=repo_root,
            )
        except subprocess.TimeoutExpired as expired:
            pytest.fail(f"`moniker {' '.join(args)}` did not end within {CLI_TIMEOUT} s: {expired}")

    return run


def strings_in(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(strings_in(v) for v in value.values()), set(map(str, value)))
    if isinstance(value, list):
        return set().union(*(strings_in(v) for v in value)) if value else set()
    return set()


def describe(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-3000:]}"


def test_list_json_shows_every_server(run_moniker, gateway_config: Path) -> None:
    done = run_moniker("list", "--json", "-c", str(gateway_config))
    assert done.returncode == 0, describe(done)
    try:
        listed = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        pytest.fail(f"`moniker list --json` printed no JSON ({error})\n{describe(done)}")
    seen = strings_in(listed)
    for name in ("echo", "fixture_echo", "read_text_file", "cat", "create_entities", "remember"):
        assert name in seen, f"{name!r} not in `moniker list --json`\n{describe(done)}"


def test_call_by_alias_prints_the_result(run_moniker, gateway_config: Path, fs_root: Path) -> None:
    args = json.dumps({"path": str(fs_root / "hello.txt")})
    done = run_moniker("call", "cat", args, "-c", str(gateway_config))
    assert done.returncode == 0, describe(done)
    assert "hello from moniker e2e" in done.stdout, describe(done)


def test_call_unknown_tool_fails(run_moniker, gateway_config: Path) -> None:
    done = run_moniker("call", "no_such_tool", "{}", "-c", str(gateway_config))
    assert done.returncode != 0, describe(done)
    assert "Unknown tool: no_such_tool" in done.stdout + done.stderr, describe(done)


def test_doctor_names_a_certificate_it_does_not_trust(moniker_bin: Path, write_config, tmp_path: Path) -> None:
    """A remote server behind a certificate of a CA moniker does not know: `moniker doctor`
    says the certificate is not trusted and to give its CA in `tls.ca_file`; with that CA
    given, the certificate problem is gone."""
    import http.server
    import ssl
    import threading

    from oauth_harness import LocalCa

    local = LocalCa(tmp_path, name="moniker-e2e-unknown-ca")
    ca_pem, cert_pem, key_pem = local.ca, local.cert, local.key

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_pem, key_pem)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}/mcp"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config"), "NO_COLOR": "1"}
    try:
        config = write_config({"servers": {"remote": {"url": url}}})
        done = subprocess.run([str(moniker_bin), "doctor", "-c", str(config)], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 1, describe(done)
        assert "FAIL    remote" in done.stdout, describe(done)
        assert "certificate" in done.stdout.lower(), describe(done)
        assert "servers.remote.tls.ca_file" in done.stdout, describe(done)

        config = write_config({"servers": {"remote": {"url": url, "tls": {"ca_file": str(ca_pem)}}}}, name="trusted.yaml")
        done = subprocess.run([str(moniker_bin), "doctor", "-c", str(config)], capture_output=True, text=True, timeout=60, env=env)
        assert "tls.ca_file" not in done.stdout, f"the CA is given, yet:\n{describe(done)}"
    finally:
        server.shutdown()
        server.server_close()
