"""An answer racing a cancel: exactly one outcome, the same for everyone.

If ``respond`` returns, the request ended answered (in the stream and in the store); if the
run was cancelled first, ``respond`` raises ``RequestCancelledError`` and the request ended
cancelled (in the stream and in the store). Never one thing here and another there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from hpd_agent import Agent, ask_user
from hpd_agent.events import ClarificationRequest, ClarificationResolved, Event
from hpd_agent.exceptions import RequestCancelledError
from hpd_agent.store import SQLiteStore, Store
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


def _asker() -> Agent:
    model = ScriptedModel([tool_call("ask_user", question="Colour?"), text("done")])
    return Agent("A", model=model, tools=[ask_user()])


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store | None]:
    if request.param == "memory":
        yield None
        return
    s = SQLiteStore(tmp_path / "runs.db")
    yield s
    anyio.run(s.aclose)


async def test_an_answer_after_cancel_is_refused_and_the_request_ends_cancelled(
    store: Store | None,
) -> None:
    events: list[Event] = []
    with anyio.fail_after(10):
        async with _asker().stream("go", store=store) as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ClarificationRequest):
                    run.cancel()
                    with pytest.raises(RequestCancelledError):
                        await run.respond(event.request_id, "red")
    (resolved,) = [e for e in events if isinstance(e, ClarificationResolved)]
    assert resolved.status == "cancelled"
    assert run.result.status == "cancelled"
    if store is not None:
        record = await store.get_request(resolved.request_id)
        assert record is not None and record.status == "cancelled"


@pytest.mark.parametrize("answer_first", [True, False])
async def test_racing_answer_and_cancel_agree_everywhere(
    store: Store | None, answer_first: bool
) -> None:
    for _ in range(10):
        events: list[Event] = []
        outcome: dict[str, object] = {}
        with anyio.fail_after(10):
            async with _asker().stream("go", store=store) as run, anyio.create_task_group() as tg:

                async def answer(rid: str, outcome: dict[str, object] = outcome) -> None:
                    try:
                        outcome["value"] = await run.respond(rid, "red")
                    except RequestCancelledError:
                        outcome["value"] = "refused"

                async for event in run:
                    events.append(event)
                    if isinstance(event, ClarificationRequest):
                        if answer_first:
                            tg.start_soon(answer, event.request_id)
                            await anyio.lowlevel.checkpoint()
                            run.cancel()
                        else:
                            run.cancel()
                            tg.start_soon(answer, event.request_id)
        resolved = [e for e in events if isinstance(e, ClarificationResolved)]
        assert len(resolved) == 1, resolved
        status = resolved[0].status
        if outcome["value"] == "refused":
            assert status == "cancelled"
        else:
            assert outcome["value"] == "red" and status == "answered"
        if store is not None:
            record = await store.get_request(resolved[0].request_id)
            assert record is not None and record.status == status
