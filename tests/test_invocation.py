"""Invocation identity: every event says which call of its agent produced it.

Two parallel calls of one sub-agent share an ``agent_path``; only ``invocation_id`` tells
them apart, and each answer must reach the call that asked.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from hpd_agent import Agent, ask_user
from hpd_agent.events import AgentStarted, ClarificationRequest, Event, RunStarted
from hpd_agent.messages import ToolCall, ToolResultMessage, UserMessage
from hpd_agent.models import ModelResponse
from hpd_agent.store import MemoryStore
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio


def _asking_writer() -> Agent:
    """A sub-agent that streams its query back, asks a question about it, and answers with
    the query and the answer it got (so each call's answer shows where it went)."""

    def reply(messages, params):  # type: ignore[no-untyped-def]
        query = next(m.content for m in messages if isinstance(m, UserMessage))
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if not results:
            return ModelResponse(
                text=f"working on {query}",
                tool_calls=(
                    ToolCall(
                        id="ask",
                        name="ask_user",
                        arguments=json.dumps({"question": f"detail for {query}?"}),
                    ),
                ),
                finish_reason="tool_calls",
            )
        return text(f"{query}: {results[-1].content}")

    return Agent("Writer", model=FunctionModel(reply), tools=[ask_user()])


def _root(writer: Agent) -> Agent:
    def plan(messages, params):  # type: ignore[no-untyped-def]
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return [tool_call("Writer", query="alpha"), tool_call("Writer", query="beta")]
        return text("done")

    return Agent("Root", model=FunctionModel(plan), tools=[writer.as_tool()])


async def test_parallel_calls_of_one_sub_agent_have_their_own_ids_and_answers() -> None:
    root = _root(_asking_writer())
    events: list[Event] = []
    asked: list[ClarificationRequest] = []
    async with root.stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                asked.append(event)
                if len(asked) == 2:
                    # Answered in reverse order, each naming the question it answers.
                    for request in reversed(asked):
                        await run.respond(request.request_id, f"answer to {request.question}")
    assert run.result.status == "completed"

    assert all(e.invocation_id for e in events)
    root_id = events[0].invocation_id
    assert isinstance(events[0], RunStarted)
    started = [
        e for e in events if isinstance(e, AgentStarted) and e.agent_path == ("Root", "Writer")
    ]
    assert len(started) == 2
    assert {s.parent_invocation_id for s in started} == {root_id}
    by_query = {s.input: s.invocation_id for s in started}
    assert by_query["alpha"] != by_query["beta"]

    # Every event of each call carries that call's id, and nothing of the other's.
    per_call: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        per_call[e.invocation_id].append(e)
    assert set(per_call) == {root_id, by_query["alpha"], by_query["beta"]}
    for query, inv in by_query.items():
        own = per_call[inv]
        texts = "".join(getattr(e, "text", "") for e in own)
        assert texts == f"working on {query}{query}: answer to detail for {query}?"
        questions = [e for e in own if isinstance(e, ClarificationRequest)]
        assert [q.question for q in questions] == [f"detail for {query}?"]
        assert {e.kind for e in own} >= {
            "agent_started",
            "text_delta",
            "tool_call_started",
            "clarification_request",
            "clarification_resolved",
            "tool_call_finished",
            "agent_finished",
        }
        finished = [e for e in own if e.kind == "agent_finished"]
        # Each call got the answer to its own question.
        assert [getattr(f, "output", None) for f in finished] == [
            f"{query}: answer to detail for {query}?"
        ]


async def test_invocation_ids_are_stable_across_a_resume() -> None:
    store = MemoryStore()
    writer = _asking_writer()
    root = _root(writer)
    first = await root.run("go", store=store, on_unhandled="interrupt", run_id="run_inv")
    assert first.status == "interrupted"
    ids_before = {p.question: p.invocation_id for p in first.pending}
    assert len(set(ids_before.values())) == 2

    root = _root(writer)
    events: list[Event] = []
    async with root.resume_stream("run_inv", store=store) as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest) and not event.replayed:
                await run.respond(event.request_id, "x")
    asked = {e.question: e.invocation_id for e in events if isinstance(e, ClarificationRequest)}
    assert asked == ids_before
    assert run.result.status == "completed"
