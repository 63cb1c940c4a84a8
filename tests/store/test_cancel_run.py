"""``cancel_run``: a stored run cancelled from another process while its driver waits for a
human. The driver (here: a run on one store object, with a lease that would not be renewed
for 20 s) stops at once, before its next model request; the store says cancelled, every
question of the run ends cancelled and the lease is given up; nothing runs twice."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hpd_agent import Agent, ClarificationRequest, RunLeasedError, ask_user
from hpd_agent.exceptions import UserError
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import SQLiteStore, Store, cancel_run, open_store
from hpd_agent.testing import FunctionModel, Step, text, tool_call

pytestmark = pytest.mark.anyio

TTL = 60.0
"""The driver's lease: renewed every 20 s, so only ``cancel_run`` can stop it in time."""


@asynccontextmanager
async def two_stores(location: str) -> AsyncIterator[tuple[Store, Store]]:
    """The driver's store object and the canceller's, on one store (as two processes)."""
    driver, other = open_store(location, lease_ttl=TTL), open_store(location)
    try:
        yield driver, other
    finally:
        await driver.aclose()
        await other.aclose()


def asker(calls: list[str]) -> Agent:
    def reply(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        calls.append("model")
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return tool_call("ask_user", question="Which region?")
        return text("deployed")

    return Agent("Deployer", model=FunctionModel(reply), tools=[ask_user()])


async def test_a_run_another_process_drives_is_cancelled_and_stops_at_once(
    location: str,
) -> None:
    calls: list[str] = []
    async with two_stores(location) as (driver, other):
        with pytest.raises(RunLeasedError) as lost:  # the driver stopped where it waited
            async with asker(calls).stream("deploy", store=driver, run_id="run-c") as run:
                async for event in run:
                    if isinstance(event, ClarificationRequest):
                        with anyio.fail_after(30):
                            record = await cancel_run(other, "run-c")
                        assert record.status == "cancelled"
        assert lost.value.lost
        # Fenced out at once: its model was not asked again with the cancelled question.
        assert calls == ["model"]
        assert (await other.get_run("run-c")).status == "cancelled"  # type: ignore[union-attr]
        [request] = await other.list_requests(run_id="run-c", status=None)
        assert request.status == "cancelled"
        assert await other.get_lease("run-c") is None  # given up
        # Cancelling it again changes nothing; a run the store lacks is refused.
        assert (await cancel_run(other, "run-c")).status == "cancelled"
        with pytest.raises(UserError, match="no run 'nope'"):
            await cancel_run(other, "nope")


async def test_a_run_that_ended_is_left_as_it_was(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        calls: list[str] = []
        async with asker(calls).stream("deploy", store=store, run_id="run-d") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    await run.respond(event.request_id, "eu-west")
        assert (await cancel_run(store, "run-d")).status == "completed"
        assert (await store.get_run("run-d")).output == "deployed"  # type: ignore[union-attr]
    finally:
        await store.aclose()
