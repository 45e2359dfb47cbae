"""Tasks through moniker: server-everything's `simulate-research-query` runs only as a task.
The official Python SDK calls it as a task through moniker, gets a task id that names its
server, polls `tasks/get` until it completes, fetches the result with `tasks/result`, and finds
the task in `tasks/list`; an id that names no server is refused."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp.types as types
from mcp.shared.exceptions import McpError

import scenarios as s


async def test_a_tool_run_as_a_task_is_found_by_its_id(moniker, gateway_config: Path) -> None:
    async with moniker(gateway_config) as session:
        created = await session.experimental.call_tool_as_task("simulate-research-query", {"topic": "gateways"})
        task_id = created.task.taskId
        assert task_id.startswith("everything/"), task_id

        with anyio.fail_after(30):
            while True:
                status = await session.experimental.get_task(task_id)
                assert status.taskId == task_id, status
                if status.status == "completed":
                    break
                assert status.status == "working", status
                await anyio.sleep(0.2)
        result = await session.experimental.get_task_result(task_id, types.CallToolResult)
        assert "gateways" in " ".join(s.texts(result)), result

        listed = await session.experimental.list_tasks()
        assert task_id in [t.taskId for t in listed.tasks], listed

        try:
            await session.experimental.get_task("nowhere/123")
            raise AssertionError("a task of no server was found")
        except McpError as e:
            assert e.error.code == -32602 and "unknown task" in e.error.message, e.error
