"""A remote chooses the agent names and request ids of the questions it relays: two
questions whose names and ids joined alike (``"a"`` + ``"x#y"``, ``"a#x"`` + ``"y"``) once
got one request id, so answering one refused the other and the run waited for ever."""

from __future__ import annotations

import anyio
import anyio.to_thread
import pytest
from a2a_servers import ManyPending, Pending, a2a_server

from hpd_agent import Agent, ClarificationRequest
from hpd_agent.a2a import RemoteAgent
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

_HANG = 60  # seconds: far beyond what the exchange needs, only to end a run that hangs


async def test_questions_whose_names_and_ids_join_alike_are_both_answered() -> None:
    pending = [Pending("x#y", "Q1?", ["Planner", "a"]), Pending("y", "Q2?", ["Planner", "a#x"])]
    executor = ManyPending(pending)
    with a2a_server(executor) as server:
        remote = RemoteAgent(server.url)
        await remote.read_card()
        remote_tool = remote.as_tool()
        model = ScriptedModel([tool_call(remote_tool.name, query="go"), text("done")])
        agent = Agent("Orchestrator", model=model, tools=[remote_tool])
        seen: list[ClarificationRequest] = []
        with anyio.fail_after(_HANG):
            async with agent.stream("go") as run:
                async for event in run:
                    if isinstance(event, ClarificationRequest):
                        seen.append(event)
                        if len(seen) == 2:  # both asked before either is answered
                            await run.respond(seen[0].request_id, "one")
                            await anyio.to_thread.run_sync(executor.got_an_answer.wait)
                            await run.respond(seen[1].request_id, "two")
    assert run.result.status == "completed"
    assert len({e.request_id for e in seen}) == 2
    assert sorted(answer for _, answer in executor.answered) == ["one", "two"]
