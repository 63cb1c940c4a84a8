"""Every answer has an author: who answered, on which channel, on the resolved events, to the
hooks that ask, in the store (never overwritten) and on a replay; a policy refuses an author
before anything is written (issue 35, items 2 and 3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.backend import Author
from hpd_agent.events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RequestEvent,
)
from hpd_agent.exceptions import AnswerRefusedError, RequestAlreadyAnsweredError
from hpd_agent.governance import PathPolicy
from hpd_agent.hooks import Hook
from hpd_agent.messages import ToolResultMessage
from hpd_agent.permissions import Approve, Deny
from hpd_agent.questions import Decline
from hpd_agent.store import SQLiteStore, Store, open_store, respond
from hpd_agent.testing import FunctionModel, ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

POLICY = PathPolicy({"alice": ["*"], "bob": ["*"]}, permissions={"deploy": ["alice"]})


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store | None]:
    if request.param == "memory":
        yield None
        return
    if request.param == "postgres":
        s: Store = open_store(str(request.getfixturevalue("fresh_postgres")))
    else:
        s = SQLiteStore(tmp_path / "runs.db")
    yield s
    anyio.run(s.aclose)


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "postgres":
        s: Store = open_store(str(request.getfixturevalue("fresh_postgres")))
    else:
        s = SQLiteStore(tmp_path / "runs.db")
    yield s
    anyio.run(s.aclose)


def _asker() -> Agent:
    model = ScriptedModel([tool_call("ask_user", question="Colour?"), text("done")])
    return Agent("A", model=model, tools=[ask_user()])


def _deployer(ran: list[str]) -> Agent:
    @tool(requires_approval=True)
    async def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return "deployed"

    model = ScriptedModel([tool_call("deploy", env="prod"), text("over")])
    return Agent("Ops", model=model, tools=[deploy])


def _resolved(events: list[Event]) -> list[ClarificationResolved | PermissionResolved]:
    return [e for e in events if isinstance(e, (ClarificationResolved, PermissionResolved))]


async def test_an_answer_names_who_gave_it_and_on_which_channel(store: Store | None) -> None:
    events: list[Event] = []
    with anyio.fail_after(10):
        async with _asker().stream("go", store=store) as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ClarificationRequest):
                    await run.respond(event.request_id, "red", by="alice", channel="web")
    (resolved,) = _resolved(events)
    assert (resolved.answered_by, resolved.channel, resolved.answer) == ("alice", "web", "red")
    if store is not None:
        record = await store.get_request(resolved.request_id)
        assert record is not None
        assert (record.answered_by, record.channel) == ("alice", "web")
        assert record.answered_at is not None
        # Never overwritten: a second answer is refused and the record keeps the first.
        with pytest.raises(RequestAlreadyAnsweredError):
            await respond(store, resolved.request_id, "blue", by="bob")
        again = await store.get_request(resolved.request_id)
        assert again is not None and (again.answered_by, again.answer) == ("alice", "red")


async def test_code_that_names_nobody_answers_on_the_api_channel(store: Store | None) -> None:
    events: list[Event] = []
    with anyio.fail_after(10):
        async with _asker().stream("go", store=store) as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ClarificationRequest):
                    await run.respond(event.request_id, Decline())
    (resolved,) = _resolved(events)
    assert (resolved.status, resolved.answered_by, resolved.channel) == ("declined", None, "api")


async def test_a_request_that_ends_unanswered_names_nobody(store: Store | None) -> None:
    @tool
    async def slow(ctx: ToolContext) -> str:
        """Ask with a timeout nobody meets."""
        try:
            return await ctx.ask("Colour?", timeout=0.01)
        except Exception as e:
            return str(e)

    model = ScriptedModel([tool_call("slow"), text("done")])
    events: list[Event] = []
    with anyio.fail_after(10):
        async with Agent("A", model=model, tools=[slow]).stream("go", store=store) as run:
            async for event in run:
                events.append(event)
    (resolved,) = _resolved(events)
    assert (resolved.status, resolved.answered_by, resolved.channel) == ("expired", None, None)


class _Recording(ScriptedHuman):
    """A scripted human that keeps every event it sees."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[Event] = []

    async def on_event(self, event: Event) -> None:
        self.seen.append(event)


async def test_a_handler_says_who_answers_through_it() -> None:
    told: list[str] = []

    class Watch(Hook):
        def request_resolved(self, event: RequestEvent, status: Any, answer: Any) -> None:
            told.append(status)

    human = _Recording({"Colour": "red"}, by="tester")
    result = await _asker().run("go", handler=human, hooks=[Watch()])
    assert result.status == "completed"
    assert told == ["answered"]  # a hook without ``author`` is called as before
    assert [(e.answered_by, e.channel) for e in _resolved(human.seen)] == [("tester", "api")]

    class Console(_Recording):
        channel = "console"

    console = Console({"Colour": "red"}, by="ana")
    await _asker().run("go", handler=console)
    assert [(e.answered_by, e.channel) for e in _resolved(console.seen)] == [("ana", "console")]


async def test_hooks_that_declare_author_are_told_who_answered(store: Store | None) -> None:
    told: list[tuple[str, Author | None]] = []

    class Audit(Hook):
        def request_resolved(
            self, event: RequestEvent, status: Any, answer: Any, author: Author | None = None
        ) -> None:
            told.append((status, author))

    with anyio.fail_after(10):
        async with _asker().stream("go", store=store, hooks=[Audit()]) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    await run.respond(event.request_id, "red", by="alice", channel="cli")
    assert told == [("answered", Author("alice", "cli"))]


async def test_an_answer_through_the_store_reaches_the_run_with_its_author(
    durable: Store,
) -> None:
    # Another process answers through the store: the waiting run's resolved event names
    # the author the store kept, and so does a replay of the run.
    events: list[Event] = []
    with anyio.fail_after(20):
        async with _asker().stream("go", store=durable) as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ClarificationRequest):
                    await respond(durable, event.request_id, "red", by="carol", channel="cli")
    (resolved,) = _resolved(events)
    assert (resolved.answered_by, resolved.channel) == ("carol", "cli")


async def test_a_resumed_run_replays_who_answered(durable: Store) -> None:
    def reply(messages: Any, params: Any) -> Any:
        if any(isinstance(m, ToolResultMessage) for m in messages):
            return text("done")
        return tool_call("ask_user", question="Colour?")

    agent = Agent("A", model=FunctionModel(reply), tools=[ask_user()])
    first = await agent.run("go", store=durable, on_unhandled="interrupt")
    assert first.status == "interrupted"
    (request,) = first.pending
    await respond(durable, request.request_id, "red", by="dora", channel="inbox")
    events: list[Event] = []
    with anyio.fail_after(20):
        async with agent.resume_stream(first.run_id, store=durable) as run:
            async for event in run:
                events.append(event)
    (resolved,) = _resolved(events)
    assert resolved.replayed
    assert (resolved.answered_by, resolved.channel, resolved.answer) == ("dora", "inbox", "red")


async def test_a_policy_refuses_bobs_approval_of_deploy_and_nothing_is_written(
    store: Store | None,
) -> None:
    ran: list[str] = []
    events: list[Event] = []
    refusals: list[str] = []
    with anyio.fail_after(20):
        async with _deployer(ran).stream("go", store=store) as run:
            async for event in run:
                events.append(event)
                if not isinstance(event, PermissionRequest):
                    continue
                rid = event.request_id
                for who in ("bob", None):
                    with pytest.raises(AnswerRefusedError) as refused:
                        await run.respond(rid, Approve(), by=who, policy=POLICY)
                    refusals.append(str(refused.value))
                assert [r.request_id for r in run.pending] == [rid]  # still open here
                if store is not None:
                    # Through the store alike, and nothing was written.
                    with pytest.raises(AnswerRefusedError):
                        await respond(store, rid, Deny(), by="bob", policy=POLICY)
                    record = await store.get_request(rid)
                    assert record is not None and record.status == "pending"
                    assert record.answered_at is None and record.answered_by is None
                await run.respond(rid, Approve(), by="alice", channel="cli", policy=POLICY)
    assert "only alice may decide 'deploy'" in refusals[0] and "'bob'" in refusals[0]
    assert "needs an identity" in refusals[1]
    (resolved,) = _resolved(events)
    assert isinstance(resolved, PermissionResolved) and resolved.approved
    assert (resolved.answered_by, resolved.channel) == ("alice", "cli")
    assert ran == ["prod"]


async def test_a_backend_written_before_authors_still_takes_answers() -> None:
    # A third party's backend whose ``resolve`` has no ``author`` keyword: called without it.
    from hpd_agent.backend import Settlement
    from hpd_agent.coordinator import Coordinator

    class OldBackend:
        durable = True

        def __init__(self) -> None:
            self.resolved: list[tuple[str, str, Any]] = []
            self.done = anyio.Event()

        def alias_of(self, request_id: str) -> str | None:
            return None

        async def record_alias(self, request_id: str, first_id: str) -> None:
            return None

        async def open(self, event: RequestEvent, timeout: float | None) -> Any:
            return None, timeout

        async def wait(self, request_id: str) -> Settlement:
            await self.done.wait()
            return Settlement(status="answered", answer="red")

        async def resolve(self, request_id: str, status: Any, answer: Any) -> None:
            self.resolved.append((request_id, status, answer))
            self.done.set()

        async def settlement(self, request_id: str) -> Any:
            return None

    backend = OldBackend()
    coordinator = Coordinator("run", listening=True)
    coordinator.configure(coordinator.hooks, backend)
    assert not coordinator.keeps_authors
    from hpd_agent.questions import TextQuestion

    class Asker:
        run_id = "run"
        agent_path = ("A",)
        depth = 0
        tool_name = "t"
        tool_call_id = "c"
        invocation_id = "i"

    async with anyio.create_task_group() as tg:
        got: list[Any] = []

        async def ask() -> None:
            got.append(
                await coordinator.request(
                    Asker(), TextQuestion(question="Colour?"), request_id="r1", timeout=None
                )
            )

        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        await coordinator.respond("r1", "red", author=Author("eve", "cli"))
    assert got == ["red"] and backend.resolved == [("r1", "answered", "red")]
