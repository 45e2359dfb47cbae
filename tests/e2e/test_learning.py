"""Search learns from the calls that follow it (issue "The model's view, third round"), through
the official Python SDK in front of the real memory and filesystem servers: a request searched
and then answered by a successful call of a tool ranks that tool first the next time, in the
next process too (kept in the user's state directory); a failed call teaches nothing;
`moniker forget` clears it and the ranking is what it was; `discovery.learn: false` keeps
nothing; and over HTTP, one token's teaching never moves another token's ranking."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import scenarios as s
from test_http import serve_http
from test_search import found, search_config

# A request the memory server's `add_observations` serves, which search does not rank first
# before it is taught (asserted below: the test would prove nothing otherwise).
REQUEST = "jot down that Alice moved to Berlin last spring"
TAUGHT = "add_observations"


def learned_files(state: Path) -> list[Path]:
    return sorted((state / "moniker" / "learned").glob("*.json"))


def forget(moniker_bin: Path, state: Path, *args: str) -> str:
    done = subprocess.run(
        [str(moniker_bin), "forget", *args],
        env={"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(state)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


async def names_for(session, query: str) -> list[str]:
    return [t["name"] for t in await found(session, query, limit=10)]


async def observe(session) -> None:
    """`add_observations` through `call_tool`, on an entity made before any search."""
    added = await session.call_tool(
        "call_tool",
        {"name": TAUGHT, "arguments": {"observations": [{"entityName": "Alice", "contents": ["moved to Berlin"]}]}},
    )
    assert not added.isError, added.content


async def make_alice(session) -> None:
    made = await session.call_tool(
        "call_tool",
        {"name": "create_entities", "arguments": {"entities": [{"name": "Alice", "entityType": "person", "observations": []}]}},
    )
    assert not made.isError, made.content


async def taught(session) -> list[str]:
    """Alice made, then the request searched and answered by `add_observations`: the lesson.
    What the search found before it was taught."""
    await make_alice(session)
    before = await names_for(session, REQUEST)
    assert before and before[0] != TAUGHT, before
    await observe(session)
    return before


async def test_a_call_after_a_search_teaches_it_and_forget_clears_it(
    moniker, moniker_bin: Path, write_config, server_specs, tmp_path: Path
) -> None:
    config = write_config(search_config(server_specs))
    state = tmp_path / "state"
    async with moniker(config) as session:
        before = await taught(session)
        # A failed call teaches nothing: a file that is not there.
        await found(session, "show me the notes file in the project folder")
        failed = await session.call_tool("call_tool", {"name": "read_text_file", "arguments": {"path": str(tmp_path / "absent.txt")}})
        assert failed.isError, failed.content
        # Taught now, in this session.
        assert (await names_for(session, REQUEST))[0] == TAUGHT

    [kept] = learned_files(state)
    file = json.loads(kept.read_text())
    assert file["principal"] == "stdio"
    assert list(file["taught"]["tools"]) == [TAUGHT], file
    assert [lesson["request"] for lesson in file["taught"]["tools"][TAUGHT]] == [REQUEST]
    assert (kept.stat().st_mode & 0o777) == 0o600

    # The next process reads what the last one learned.
    async with moniker(config) as session:
        assert (await names_for(session, REQUEST))[0] == TAUGHT

    assert forget(moniker_bin, state, "--list").strip() == "stdio: 1 requests for 1 tools"
    assert "forgot every principal's lessons (1 file" in forget(moniker_bin, state)
    assert learned_files(state) == []
    async with moniker(config) as session:
        assert await names_for(session, REQUEST) == before


async def test_a_running_gateway_forgets_at_its_next_search(
    moniker, moniker_bin: Path, write_config, server_specs, tmp_path: Path
) -> None:
    config = write_config(search_config(server_specs))
    state = tmp_path / "state"
    async with moniker(config) as session:
        before = await taught(session)
        assert (await names_for(session, REQUEST))[0] == TAUGHT
        assert "1 file" in forget(moniker_bin, state, "--principal", "stdio")
        assert await names_for(session, REQUEST) == before


async def test_learning_off_keeps_nothing(moniker, write_config, server_specs, tmp_path: Path) -> None:
    config_dict: dict[str, Any] = search_config(server_specs)
    config_dict["discovery"] = {**config_dict["discovery"], "learn": False}
    config = write_config(config_dict)
    async with moniker(config) as session:
        await make_alice(session)
        before = await names_for(session, REQUEST)
        await observe(session)
        assert await names_for(session, REQUEST) == before
    assert learned_files(tmp_path / "state") == []


ALICE = "alice-token-0123456789abcdef"
MALLORY = "mallory-token-0123456789abcdef"


async def test_one_token_s_teaching_never_moves_another_s_ranking(
    moniker_bin: Path, write_config, server_specs, tmp_path: Path, memory_file: Path
) -> None:
    """Mallory teaches search that the request means `delete_relations`, again and again:
    her own ranking follows; Alice's, over the same gateway, stays what it was."""
    config_dict = search_config(server_specs)
    config_dict["http"] = {"tokens": [{"token": ALICE, "name": "alice"}, {"token": MALLORY, "name": "mallory"}]}
    config = write_config(config_dict, name="learning-http.yaml")
    env = {"MEMORY_FILE_PATH": str(memory_file), "XDG_STATE_HOME": str(tmp_path / "state")}
    for url in serve_http(moniker_bin, config, tmp_path, env):
        async with s.bearer_session(url, ALICE) as alice, s.bearer_session(url, MALLORY) as mallory:
            before = await names_for(alice, REQUEST)
            assert await names_for(mallory, REQUEST) == before
            for _ in range(3):
                await names_for(mallory, REQUEST)
                deleted = await mallory.call_tool("call_tool", {"name": "delete_relations", "arguments": {"relations": []}})
                assert not deleted.isError, deleted.content
            assert (await names_for(mallory, REQUEST))[0] == "delete_relations"
            assert await names_for(alice, REQUEST) == before
        # A new session of Alice's, after all of Mallory's: the same.
        async with s.bearer_session(url, ALICE) as alice:
            assert await names_for(alice, REQUEST) == before
        # What search did, from the gateway's metrics: Mallory's first call was of a tool her
        # search did not show, her next two of the one it showed first once taught; the other
        # five searches had no call after them. The bytes each tool took, beside its calls.
        stats = subprocess.run(
            [str(moniker_bin), "stats", "-c", str(config), "--from", url.removesuffix("/mcp"), "--token", ALICE],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        searched = next(line for line in stats.splitlines() if line.endswith(" searches:") or " searches: " in line)
        assert searched == "8 searches: called_1 2, called_other 1, no_call 5", stats
        [row] = [line.split() for line in stats.splitlines() if line.startswith("delete_relations ")]
        assert int(row[1]) > 0 and row[2] == "3", stats
    # One file, Mallory's (Alice called nothing after a search): named by her token's digest.
    [file] = [json.loads(f.read_text()) for f in learned_files(tmp_path / "state")]
    assert file["principal"].startswith("token ") and MALLORY not in json.dumps(file), file
    assert list(file["taught"]["tools"]) == ["delete_relations"], file
