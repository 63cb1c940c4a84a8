"""Declining through a durable store (a real SQLite file, a real PostgreSQL server).

``hpd_agent.store.respond(store, request_id, Decline())`` from another store object (as
another process would) stores the request as declined and wakes the waiting run; a run
resumed after the decline replays it: the asker gets ``QuestionNotAnswered("declined")``
again, nothing runs twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import durable_agents
import pytest

from hpd_agent import (
    Agent,
    Decline,
    RequestAlreadyAnsweredError,
    ToolCallFinished,
    tool,
)
from hpd_agent.events import ClarificationRequest, ClarificationResolved, Event, PermissionResolved
from hpd_agent.store import Store, open_store, respond
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

DECLINED = (
    "Orchestrator: built with The user declined to answer. Do not ask again now; continue "
    "with your best judgement and state the assumptions you make."
)


@pytest.fixture
def stores(location: str) -> Iterator[tuple[Store, Store]]:
    """Two store objects on one database: the run's, and the answering side's."""
    run_side, answering = open_store(location), open_store(location)
    yield run_side, answering
    anyio.run(run_side.aclose)
    anyio.run(answering.aclose)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPD_TEST_DIR", str(tmp_path))
    return tmp_path


async def _first_pending(store: Store, run_id: str) -> str:
    while not (pending := await store.list_requests(run_id=run_id)):
        await anyio.wait_all_tasks_blocked()
    return pending[0].request_id


async def test_a_decline_from_another_store_object_wakes_the_waiting_run(
    stores: tuple[Store, Store], workdir: Path
) -> None:
    run_side, answering = stores
    events: list[Event] = []
    rid = ""
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def run_it() -> None:
                # No handler: with a store the run waits for an answer from anywhere.
                async with durable_agents.build().stream(
                    "Build", store=run_side, run_id="run_d"
                ) as run:
                    async for event in run:
                        events.append(event)

            tg.start_soon(run_it)
            rid = await _first_pending(answering, "run_d")
            record = await respond(answering, rid, Decline(), context={"sender": "ops"})
            assert (record.status, record.answer, record.context["sender"]) == (
                "declined",
                None,
                "ops",
            )
    (resolved,) = [e for e in events if isinstance(e, ClarificationResolved)]
    assert (resolved.request_id, resolved.status, resolved.answer) == (rid, "declined", None)
    assert events[-1].kind == "run_finished" and events[-1].output == DECLINED
    # Stored once and for good: another decline or an answer is refused, nothing changes.
    for late in (Decline(), "Flask"):
        with pytest.raises(RequestAlreadyAnsweredError, match="declined"):
            await respond(answering, rid, late)
    stored = await run_side.get_request(rid)
    assert stored is not None and (stored.status, stored.answer) == ("declined", None)
    assert await answering.list_requests() == []  # `pending` shows nothing


async def test_a_run_resumed_after_a_decline_replays_it(
    stores: tuple[Store, Store], workdir: Path
) -> None:
    run_side, answering = stores
    first = await durable_agents.build().run("Build", store=run_side, on_unhandled="interrupt")
    assert first.status == "interrupted"
    (pending,) = first.pending
    await respond(answering, pending.request_id, Decline())
    # A restart: a new agent tree, the answering store object resumes the run.
    events: list[Event] = []
    async with durable_agents.build().resume_stream(first.run_id, store=answering) as run:
        async for event in run:
            events.append(event)
    assert run.result.status == "completed" and run.result.output == DECLINED
    (resolved,) = [e for e in events if isinstance(e, ClarificationResolved)]
    assert (resolved.status, resolved.replayed) == ("declined", True)
    assert durable_agents.read_lines("side_effects.txt") == ["scaffolded"]  # not run twice
    calls = durable_agents.read_lines("calls.txt")
    # Resuming the finished run replays the declined outcome again, with no model call.
    again = await durable_agents.build().resume(first.run_id, store=run_side)
    assert again.output == DECLINED
    assert durable_agents.read_lines("calls.txt") == calls


async def test_resume_answers_can_decline(stores: tuple[Store, Store], workdir: Path) -> None:
    run_side, answering = stores
    first = await durable_agents.build().run("Build", store=run_side, on_unhandled="interrupt")
    rid = first.pending[0].request_id
    resumed = await durable_agents.build().resume(
        first.run_id, store=answering, answers={rid: Decline()}
    )
    assert resumed.output == DECLINED
    record = await run_side.get_request(rid)
    assert record is not None and (record.status, record.channel, record.answered_by) == (
        "declined",
        "api",  # code gave it (resume's answers=), naming nobody
        None,
    )


async def test_a_permission_declined_through_the_store_does_not_run_its_tool(
    stores: tuple[Store, Store],
) -> None:
    run_side, answering = stores
    ran: list[str] = []

    @tool(requires_approval=True)
    async def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return "deployed"

    model = ScriptedModel([tool_call("deploy", env="prod"), text("not deployed")])
    agent = Agent("A", model=model, tools=[deploy])
    events: list[Event] = []
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def run_it() -> None:
                async with agent.stream("go", store=run_side, run_id="run_p") as run:
                    async for event in run:
                        events.append(event)

            tg.start_soon(run_it)
            await respond(answering, await _first_pending(answering, "run_p"), Decline())
    assert ran == []
    (resolved,) = [e for e in events if isinstance(e, PermissionResolved)]
    assert (resolved.status, resolved.approved) == ("declined", False)
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert "declined" in finished.result
    assert not [e for e in events if isinstance(e, ClarificationRequest)]
