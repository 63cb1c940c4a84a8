"""Expiry warnings of a durable run (memory, a SQLite file, a real PostgreSQL server): the
stored request keeps the deadline its event shows; a run resumed before expiry re-arms the
warning from that kept deadline, and one whose warning went out does not warn again.

Every wait is on an event of the run, never a sleep.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent import Agent, ToolContext, tool
from hpd_agent.events import ClarificationRequest, Event, RequestEvent, RequestExpiring
from hpd_agent.hooks import Hook
from hpd_agent.store import MemoryStore, Store, open_store
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

TIMEOUT = 120.0


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        s: Store = MemoryStore()
    elif request.param == "sqlite":
        s = open_store(str(tmp_path / "runs.db"))
    else:
        s = open_store(str(request.getfixturevalue("fresh_postgres")))
    yield s
    anyio.run(s.aclose)


class Seen(Hook):
    def __init__(self) -> None:
        self.opened: list[RequestEvent] = []
        self.expiring: list[RequestEvent] = []

    def request_opened(self, event: RequestEvent) -> None:
        self.opened.append(event)

    def request_expiring(self, event: RequestEvent) -> None:
        self.expiring.append(event)


def asker(warn_before: float) -> Agent:
    @tool
    async def work(ctx: ToolContext) -> str:
        """Ask for a colour."""
        return await ctx.ask("Colour?", timeout=TIMEOUT, warn_before=warn_before)

    return Agent("Root", model=ScriptedModel([tool_call("work"), text("done")]), tools=[work])


async def test_the_stored_request_keeps_the_deadline_its_event_shows(store: Store) -> None:
    async with asker(1.0).stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                record = await store.get_request(event.request_id)
                assert record is not None and event.expires_at is not None
                assert record.expires_at == event.expires_at
                await run.respond(event.request_id, "blue")
    assert run.result.output == "done"


async def test_a_run_resumed_before_its_warning_re_arms_it_from_the_kept_deadline(
    store: Store,
) -> None:
    agent = asker(TIMEOUT - 2.0)  # due 2 s after asking: after the first life has ended
    first = await agent.run("go", store=store, on_unhandled="interrupt")
    assert first.status == "interrupted"
    (pending,) = first.pending
    kept = pending.expires_at
    assert kept is not None
    seen = Seen()
    events: list[Event] = []
    async with agent.resume_stream(first.run_id, store=store, hooks=[seen]) as run:
        async for event in run:
            events.append(event)
            if isinstance(event, RequestExpiring):
                await run.respond(event.request_id, "blue")
    assert run.result.output == "done"
    (again,) = [e for e in events if isinstance(e, ClarificationRequest) and not e.replayed]
    (warning,) = [e for e in events if isinstance(e, RequestExpiring)]
    # The first life's deadline, not one counted from the resume.
    assert again.expires_at == kept and warning.expires_at == kept
    # Hooks are told the request again, as replayed: an earlier life opened it.
    assert [e.replayed for e in seen.opened] == [True]
    assert seen.expiring == [again]


async def test_a_warning_that_went_out_does_not_go_out_again_after_a_resume(
    store: Store,
) -> None:
    agent = asker(TIMEOUT - 0.1)  # due a tenth of a second after asking
    warned: list[RequestExpiring] = []
    async with agent.stream("go", store=store, on_unhandled="interrupt") as run:
        async for event in run:
            if isinstance(event, RequestExpiring):
                warned.append(event)
                run.stop_listening()  # nobody answers here: it waits in the store
    assert run.result.status == "interrupted" and len(warned) == 1
    seen = Seen()
    events: list[Event] = []
    async with agent.resume_stream(run.run_id, store=store, hooks=[seen]) as again:
        async for event in again:
            events.append(event)
            if isinstance(event, ClarificationRequest) and not event.replayed:
                assert event.expires_at == warned[0].expires_at
                assert await again.settled()  # waiting: past its warning time already
                await again.respond(event.request_id, "blue")
    assert again.result.output == "done"
    assert not [e for e in events if isinstance(e, RequestExpiring)]
    assert seen.expiring == [] and [e.replayed for e in seen.opened] == [True]
