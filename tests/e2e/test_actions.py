"""Action tools through the official Python SDK: the ctx-sys consolidation of seed 004
(examples/ctxsys.yaml, its `actions:` section as written) in front of moniker-fixture serving
fixtures/ctxsys.json."""

from __future__ import annotations

import json
from pathlib import Path


def ctxsys_config(tmp_path: Path, repo_root: Path, fixture_bin: Path) -> Path:
    example = (repo_root / "examples" / "ctxsys.yaml").read_text()
    actions = example[example.index("actions:") :]
    inventory = repo_root / "fixtures" / "ctxsys.json"
    config = tmp_path / "ctxsys.yaml"
    config.write_text(
        "servers:\n"
        f"  ctxsys: {{ command: {json.dumps(str(fixture_bin))}, args: [{json.dumps(str(inventory))}] }}\n"
        + actions
    )
    return config


def ran(result) -> dict:
    """The fixture's echo: which origin tool ran, with which arguments."""
    assert not result.isError, result
    return json.loads(result.content[0].text)


async def test_an_action_tool_end_to_end(moniker, tmp_path: Path, repo_root: Path, fixture_bin: Path) -> None:
    async with moniker(ctxsys_config(tmp_path, repo_root, fixture_bin)) as session:
        listed = await session.list_tools()
        names = sorted(tool.name for tool in listed.tools)
        assert len(names) == 12, names
        project = next(tool for tool in listed.tools if tool.name == "project")
        assert project.inputSchema["required"] == ["action"]
        assert project.inputSchema["properties"]["action"]["enum"] == ["create", "list", "set_active", "delete"]
        # One server behind moniker: the listing says it once, in its own `_meta`; no entry does.
        assert listed.meta == {"io.moniker/server": "ctxsys"}, listed.meta
        assert all("io.moniker/server" not in (tool.meta or {}) for tool in listed.tools), listed.tools

        result = await session.call_tool("project", {"action": "create", "name": "demo", "path": "/tmp/demo"})
        assert ran(result) == {"tool": "create_project", "arguments": {"name": "demo", "path": "/tmp/demo"}}

        # The old name still works (legacy: hidden), though it is not listed.
        assert "create_project" not in names
        result = await session.call_tool("create_project", {"name": "demo", "path": "/tmp/demo"})
        assert ran(result)["tool"] == "create_project"

        refused = await session.call_tool("project", {"action": "archive"})
        assert refused.isError
        assert refused.content[0].text == "Unknown action: archive. Valid actions: create, list, set_active, delete"

        missing = await session.call_tool("project", {"action": "create", "name": "demo"})
        assert missing.isError
        assert missing.content[0].text == 'Missing required parameter(s) for action "create": path'
