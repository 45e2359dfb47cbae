"""`moniker install claude-desktop --import` with real npm servers that share names ("Works the
first time", item 1): two copies of server-filesystem (a work folder and a personal one, every
tool name shared) and server-memory, in a Claude-Desktop-shaped file. The import starts them,
renames the shared names after their servers in the config it writes, and the client's entry
then serves all of them, with no hand edit: listed and called through the official Python SDK
as Claude Desktop would.
"""

from __future__ import annotations

import json
from pathlib import Path

import scenarios as s


async def test_an_import_of_servers_that_share_names_serves_with_no_hand_edit(
    tmp_path: Path, moniker_bin: Path, node_bin: Path, npm_entries: dict[str, Path], mcp_session
) -> None:
    home = tmp_path / "home"
    work, personal = tmp_path / "work", tmp_path / "personal"
    for root, text in ((work, "work notes\n"), (personal, "personal notes\n")):
        root.mkdir(parents=True)
        (root / "notes.txt").write_text(text)
    (tmp_path / "memory").mkdir()
    client_file = home / ".config" / "Claude" / "claude_desktop_config.json"
    client_file.parent.mkdir(parents=True)
    filesystem = str(npm_entries["filesystem"])
    client_file.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "work": {"command": str(node_bin), "args": [filesystem, str(work)]},
                    "personal": {"command": str(node_bin), "args": [filesystem, str(personal)]},
                    "memory": {
                        "command": str(node_bin),
                        "args": [str(npm_entries["memory"])],
                        # Apart from the home: a folder above it is never a sandbox's to write.
                        "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory" / "memory.jsonl")},
                    },
                },
                "globalShortcut": "Ctrl+Space",
            },
            indent=2,
        )
    )
    done = s.import_claude_desktop(moniker_bin, home, timeout=120)
    assert "renamed after their servers" in done.stdout, done.stdout
    # Each imported stdio server runs in a sandbox: these three need no network.
    written = next(home.rglob("moniker.yaml")).read_text()
    for name in ("work", "personal", "memory"):
        line = next(line for line in written.splitlines() if line.strip().startswith(f'"{name}":'))
        assert '"sandbox":true' in line.replace(" ", ""), written

    # The client's entry, run as Claude Desktop runs it.
    entry = json.loads(client_file.read_text())["mcpServers"]["moniker"]
    async with mcp_session(
        entry["command"],
        entry["args"],
        env={"HOME": str(home), "RUST_BACKTRACE": "1"},
        label="the imported moniker entry",
    ) as session:
        tools = {tool.name for tool in await s.list_all_tools(session)}
        for name in ("work_read_text_file", "personal_read_text_file", "create_entities"):
            assert name in tools, sorted(tools)
        assert "read_text_file" not in tools, sorted(tools)
        for server, root, text in (("work", work, "work notes"), ("personal", personal, "personal notes")):
            result = await session.call_tool(f"{server}_read_text_file", {"path": str(root / "notes.txt")})
            assert not result.isError, result
            assert text in "".join(s.texts(result)), result
