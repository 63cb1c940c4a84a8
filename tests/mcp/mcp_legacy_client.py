"""A 2025-11-25 MCP client in a process of its own (the SDK's ``Client``, ``mode="legacy"``),
for a test to kill while its question is shown: ``python mcp_legacy_client.py URL``.

It calls the Planner at ``URL``; when asked, it writes ``asked: <message>`` on stdout and
waits for a line on stdin (the person at the other end), which is its answer. Once the call
returns it writes ``result: <text>``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext


async def asked(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
    print(f"asked: {params.message}", flush=True)
    line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    return types.ElicitResult(action="accept", content={"answer": line.strip()})


async def main(url: str) -> None:
    async with Client(url, mode="legacy", elicitation_callback=asked) as client:
        result = await client.call_tool("Planner", {"query": "a todo API"})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    print(f"result: {block.text}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
