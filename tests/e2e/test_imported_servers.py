"""Twenty-one real servers from npm and PyPI, of the kinds people import from their clients, in
a Claude-Desktop-shaped file as people write them (a credential where the server wants one:
dummies, the calls that would use them are not made). `moniker install claude-desktop --import`
writes a sandbox for each; the client's entry then serves every one of them in it, listed and
called through the official Python SDK: each server's tools are there, and the servers that
work on what is at hand (files, a memory, a repository, a database, arithmetic, time) answer a
call. The servers are the ones `tests/e2e/package.json` and `requirements.txt` install.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import scenarios as s
from conftest import REPO_ROOT, npm_entry

# Server id -> (npm package, extra arguments, env, a tool it lists).
NPM = {
    "filesystem": ("@modelcontextprotocol/server-filesystem", ["{work}"], {}, "read_text_file"),
    "memory": ("@modelcontextprotocol/server-memory", [], {"MEMORY_FILE_PATH": "{tmp}/memory/memory.jsonl"}, "create_entities"),
    "everything": ("@modelcontextprotocol/server-everything", [], {}, "echo"),
    "thinking": ("@modelcontextprotocol/server-sequential-thinking", [], {}, "sequentialthinking"),
    "github": ("@modelcontextprotocol/server-github", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_dummy"}, "create_issue"),
    "gitlab": ("@modelcontextprotocol/server-gitlab", [], {"GITLAB_PERSONAL_ACCESS_TOKEN": "glpat-dummy"}, "create_merge_request"),
    "slack": ("@modelcontextprotocol/server-slack", [], {"SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T0"}, "slack_post_message"),
    "maps": ("@modelcontextprotocol/server-google-maps", [], {"GOOGLE_MAPS_API_KEY": "dummy"}, "maps_geocode"),
    "brave": ("@modelcontextprotocol/server-brave-search", [], {"BRAVE_API_KEY": "dummy"}, "brave_web_search"),
    "aws-kb": (
        "@modelcontextprotocol/server-aws-kb-retrieval",
        [],
        {"AWS_ACCESS_KEY_ID": "dummy", "AWS_SECRET_ACCESS_KEY": "dummy", "AWS_REGION": "us-east-1"},
        "retrieve_from_aws_kb",
    ),
    "everart": ("@modelcontextprotocol/server-everart", [], {"EVERART_API_KEY": "dummy"}, "generate_image"),
    "postgres": ("@modelcontextprotocol/server-postgres", ["postgresql://127.0.0.1:1/none"], {}, "query"),
    "weather": ("open-meteo-mcp-server", [], {}, "weather_forecast"),
    "context7": ("@upstash/context7-mcp", [], {}, "resolve-library-id"),
    "tavily": ("tavily-mcp", [], {"TAVILY_API_KEY": "tvly-dummy"}, "tavily_search"),
}

# Server id -> (venv, program, arguments, env, a tool it lists).
PYPI = {
    "time": (".venv", "mcp-server-time", ["--local-timezone", "UTC"], {}, "get_current_time"),
    "git": (".venv-2026", "mcp-server-git", ["--repository", "{repo}"], {}, "git_log"),
    # Only its venv on PATH: with node there, its HTML extraction runs `npm install` into its
    # own package at its first use (test_sandbox.py says more).
    "fetch": (".venv-2026", "mcp-server-fetch", [], {"PATH": "{venv}"}, "fetch"),
    "sqlite": (".venv", "mcp-server-sqlite", ["--db-path", "{tmp}/data/app.db"], {}, "write_query"),
    "calculator": (".venv", "mcp-server-calculator", [], {}, "calculate"),
    "obsidian": (".venv", "mcp-obsidian", [], {"OBSIDIAN_API_KEY": "dummy"}, "obsidian_list_files_in_vault"),
}

# The servers the import knows to need no network: it writes `sandbox: true` for them; those
# it knows to reach only an HTTPS API get TCP to port 443 alone; the others the network on.
OFFLINE = {"filesystem", "memory", "everything", "thinking", "time", "git", "sqlite", "calculator"}
HTTPS_ONLY = {"github", "slack", "maps", "brave", "aws-kb", "everart", "context7", "tavily", "weather"}


def client_file_of(tmp_path: Path, node: Path, places: dict[str, str]) -> dict[str, Any]:
    """The `mcpServers` of a client's file: node and each npm server's entry, each PyPI
    server's program in its venv, with the places each names filled in."""

    def fill(text: str, venv: str = "") -> str:
        return text.format(**places, venv=str(REPO_ROOT / venv / "bin"))

    servers: dict[str, Any] = {}
    for server, (package, args, env, _) in NPM.items():
        servers[server] = {
            "command": str(node),
            "args": [str(npm_entry(package)), *(fill(a) for a in args)],
            "env": {k: fill(v) for k, v in env.items()},
        }
    for server, (venv, program, args, env, _) in PYPI.items():
        servers[server] = {
            "command": str(REPO_ROOT / venv / "bin" / program),
            "args": [fill(a) for a in args],
            "env": {k: fill(v, venv) for k, v in env.items()},
        }
    return servers


def a_repository(at: Path) -> None:
    git = ["git", "-C", str(at), "-c", "user.name=moniker", "-c", "user.email=e2e@moniker.invalid"]
    subprocess.run(["git", "init", "-q", str(at)], check=True)
    (at / "README.md").write_text("an imported project\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "The imported project's first commit"], check=True)


async def test_twenty_real_servers_serve_in_the_sandboxes_the_import_writes(
    tmp_path: Path, moniker_bin: Path, node_bin: Path, mcp_session
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("moniker enforces a sandbox on Linux only")
    home = tmp_path / "home"
    # Apart from the home: a folder above it is never a sandbox's to write.
    work, repo, data, memory = (tmp_path / name for name in ("work", "repo", "data", "memory"))
    for folder in (work, repo, data, memory):
        folder.mkdir(parents=True)
    (work / "notes.txt").write_text("imported notes\n")
    a_repository(repo)
    places = {"work": str(work), "repo": str(repo), "tmp": str(tmp_path)}
    servers = client_file_of(tmp_path, node_bin, places)
    assert len(servers) == 21
    client_file = home / ".config" / "Claude" / "claude_desktop_config.json"
    client_file.parent.mkdir(parents=True)
    client_file.write_text(json.dumps({"mcpServers": servers}, indent=2))
    s.import_claude_desktop(moniker_bin, home, timeout=300)
    written = next(home.rglob("moniker.yaml")).read_text()
    for server in servers:
        line = next(line for line in written.splitlines() if line.strip().startswith(f'"{server}":'))
        sandbox = line.replace(" ", "")
        if server in OFFLINE:
            assert '"sandbox":true' in sandbox, line
        elif server in HTTPS_ONLY:
            assert '"sandbox":{"network":[443]}' in sandbox, line
        else:
            assert '"sandbox":{"network":"on"}' in sandbox, line

    entry = json.loads(client_file.read_text())["mcpServers"]["moniker"]
    async with mcp_session(
        entry["command"],
        entry["args"],
        # A gateway of its own, whose log (its stderr) says what each server's guard enforced.
        env={"HOME": str(home), "RUST_LOG": "info", "MONIKER_STANDALONE": "1"},
        label="the imported moniker entry",
    ) as session:
        tools = {tool.name for tool in await s.list_all_tools(session)}
        listed = {**{k: v[3] for k, v in NPM.items()}, **{k: v[4] for k, v in PYPI.items()}}
        # A name two servers share is renamed after its server by the import.
        missing = {server: tool for server, tool in listed.items() if not {tool, f"{server}_{tool}"} & tools}
        assert not missing, (missing, sorted(tools))

        async def ok(name: str, arguments: dict[str, Any], *words: str) -> None:
            name = name if name in tools else next(t for t in tools if t.endswith(f"_{name}"))
            result = await session.call_tool(name, arguments)
            text = "".join(s.texts(result))
            assert not result.isError and all(w in text for w in words), (name, result.content)

        await ok("read_text_file", {"path": str(work / "notes.txt")}, "imported notes")
        await ok("create_entities", {"entities": [{"name": "import", "entityType": "test", "observations": ["kept"]}]})
        await ok("echo", {"message": "from the import"}, "from the import")
        await ok(
            "sequentialthinking",
            {"thought": "one step", "nextThoughtNeeded": False, "thoughtNumber": 1, "totalThoughts": 1},
        )
        await ok("get_current_time", {"timezone": "Asia/Tokyo"}, "Asia/Tokyo")
        await ok("git_log", {"repo_path": str(repo)}, "The imported project's first commit")
        await ok("write_query", {"query": "CREATE TABLE t (v TEXT)"})
        await ok("write_query", {"query": "INSERT INTO t VALUES ('in the sandbox')"})
        await ok("read_query", {"query": "SELECT v FROM t"}, "in the sandbox")
        await ok("calculate", {"expression": "6 * 7"}, "42")
        # What the sandbox keeps out, which the server itself would allow: SQLite asked to make
        # a database in a folder its config does not name (outside the sandbox it would).
        escaped = repo / "escaped.db"
        outside = await session.call_tool(
            next(t for t in tools if t.endswith("write_query")), {"query": f"ATTACH DATABASE '{escaped}' AS o"}
        )
        # The server answers its error as text (not `isError`).
        assert "unable to open database" in "".join(s.texts(outside)), outside.content
        assert not escaped.exists()
    assert (data / "app.db").is_file()
    log = "".join(p.read_text() for p in tmp_path.glob("*.stderr"))
    enforced = {
        server
        for line in log.splitlines()
        if "moniker sandbox: files fully enforced (Landlock)" in line
        for server in servers
        if f"server={server} " in line or f"server={server}:" in line or line.endswith(f"server={server}")
    }
    assert enforced == set(servers), (set(servers) - enforced, log[-3000:])
