"""The MCP client on trio too (the SDK is written on anyio): a question over each protocol
and transport, and the server process gone when the run ends."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_client_harness import stdio_children, target

from hpd_agent import Agent, ClarificationRequest
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


@pytest.mark.parametrize(
    ("kind", "transport", "mode"),
    [("low", "stdio", "auto"), ("low", "http", "legacy"), ("fast", "stdio", "legacy")],
)
async def test_a_question_round_trip_on_trio(
    kind: str, transport: str, mode: str, tmp_path: Path
) -> None:
    with target(kind, transport, mode, tmp_path) as server:
        call = tool_call("ask") if kind == "low" else tool_call("greet")
        agent = Agent("A", model=ScriptedModel([call, text("done")]), tools=[server.tools()])
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    await run.respond(event.request_id, {"name": "Ada"})
        [result] = [m for m in run.result.messages if isinstance(m, ToolResultMessage)]
        assert result.content in ('ask accept {"name": "Ada"}', "hello Ada")
        assert len(server.effects()) in (1, 2)
    assert stdio_children() == []
