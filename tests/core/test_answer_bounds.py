"""A refused answer of megabytes gives an error message of a few KB (issue 22, item 3b),
whichever way it arrives: ``run.respond`` in the run's process or ``respond`` on a store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, ToolContext, tool
from hpd_agent.events import RequestEvent
from hpd_agent.exceptions import InvalidAnswerError
from hpd_agent.store import SQLiteStore, respond
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

HUGE = "x" * 5_000_000
FEW_KB = 5_000
REFUSAL = 1_000
"""Longest refusal of an answer: it quotes at most 200 characters of it."""

ASKS = {
    "options": lambda ctx: ctx.ask("Colour?", options=["red", "blue"]),
    "confirm": lambda ctx: ctx.confirm("Go on?"),
    "schema": lambda ctx: ctx.ask_custom("n", "How many?", schema={"type": "integer"}),
    "permission": lambda ctx: ctx.ask_permission("deploy", {"target": "prod"}),
}
ANSWERS: dict[str, Any] = {"options": HUGE, "confirm": HUGE, "schema": HUGE, "permission": HUGE}


def _agent(kind: str) -> Agent:
    @tool
    async def ask(ctx: ToolContext) -> str:
        """Ask one question."""
        return str(await ASKS[kind](ctx))

    return Agent("A", model=ScriptedModel([tool_call("ask"), text("done")]), tools=[ask])


@pytest.mark.parametrize("kind", sorted(ASKS))
async def test_a_huge_invalid_answer_is_refused_in_a_few_kb_through_run_respond(kind: str) -> None:
    refused: list[InvalidAnswerError] = []
    with anyio.fail_after(30):
        async with _agent(kind).stream("go") as run:
            async for event in run:
                if isinstance(event, RequestEvent):
                    with pytest.raises(InvalidAnswerError) as e:
                        await run.respond(event.request_id, ANSWERS[kind])
                    refused.append(e.value)
                    run.cancel()
    (error,) = refused
    assert len(str(error)) < REFUSAL, len(str(error))
    assert str(error).startswith(f"invalid answer for request {error.request_id}: ")


@pytest.mark.parametrize("kind", sorted(ASKS))
async def test_a_huge_invalid_answer_is_refused_in_a_few_kb_through_a_store(
    kind: str, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        first = await _agent(kind).run("go", store=store, on_unhandled="interrupt")
        (pending,) = first.pending
        with pytest.raises(InvalidAnswerError) as e:
            await respond(store, pending.request_id, ANSWERS[kind])
        record = await store.get_request(pending.request_id)
    finally:
        await store.aclose()
    assert len(str(e.value)) < REFUSAL, len(str(e.value))
    assert record is not None and record.status == "pending"  # left exactly as it was


def test_an_unknown_request_id_of_megabytes_is_named_in_a_few_kb() -> None:
    from hpd_agent.exceptions import UnknownRequestError

    assert len(str(UnknownRequestError(f"no request {HUGE!r}", request_id=HUGE))) < FEW_KB
