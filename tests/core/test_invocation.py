"""Invocation identity: every event says which call of its agent produced it.

Two parallel calls of one sub-agent share an ``agent_path``; only ``invocation_id`` tells
them apart, and each answer must reach the call that asked.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from _trees import asking_writer as _asking_writer
from _trees import writers_root as _root

from hpd_agent.events import AgentStarted, ClarificationRequest, Event, RunStarted
from hpd_agent.store import MemoryStore

pytestmark = pytest.mark.anyio


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
