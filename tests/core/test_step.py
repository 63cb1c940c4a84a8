"""``ctx.step``: a tool's side effect before it asks mid-way happens once, even across a
resume that re-runs the tool call."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpd_agent import Agent, ToolContext, tool
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


def _charging_agent(ledger: Path, *, journaled: bool) -> Agent:
    def charge(amount: int) -> dict[str, object]:
        with ledger.open("a") as f:
            f.write(f"charged {amount}\n")
        return {"receipt": f"r-{amount}", "amount": amount}

    @tool
    async def checkout(ctx: ToolContext, amount: int) -> str:
        """Charge the card, then ask where to ship.

        Args:
            amount: What to charge.
        """
        if journaled:
            receipt = await ctx.step("charge", charge, amount)
        else:
            receipt = charge(amount)
        address = await ctx.ask("Where should we ship it?")
        return f"{receipt['receipt']} shipped to {address}"

    def reply(messages: list[object], params: object) -> object:
        last = messages[-1]
        if getattr(last, "kind", "") == "tool":
            return text(f"done: {last.content}")  # type: ignore[attr-defined]
        return tool_call("checkout", amount=42)

    return Agent("Shop", model=FunctionModel(reply), tools=[checkout])


async def _interrupt_then_resume(agent: Agent, store: SQLiteStore) -> str | None:
    first = await agent.run("buy", store=store, on_unhandled="interrupt")
    assert first.status == "interrupted"
    (pending,) = first.pending
    done = await agent.resume(first.run_id, store=store, answers={pending.request_id: "Paris"})
    return done.output


async def test_a_journaled_step_runs_once_across_a_resume(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        output = await _interrupt_then_resume(_charging_agent(ledger, journaled=True), store)
    finally:
        await store.aclose()
    assert output == "done: r-42 shipped to Paris"  # the replayed step gave the same receipt
    assert ledger.read_text() == "charged 42\n"


async def test_without_a_step_the_side_effect_repeats(tmp_path: Path) -> None:
    # Why the step exists: a resumed run re-runs a tool call that had not finished.
    ledger = tmp_path / "ledger.txt"
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        await _interrupt_then_resume(_charging_agent(ledger, journaled=False), store)
    finally:
        await store.aclose()
    assert ledger.read_text() == "charged 42\ncharged 42\n"


async def test_a_step_without_a_store_just_runs(tmp_path: Path) -> None:
    seen: list[int] = []

    @tool
    async def work(ctx: ToolContext) -> str:
        """Do two steps."""

        async def one() -> int:
            seen.append(1)
            return 1

        a = await ctx.step("one", one)
        b = await ctx.step("two", lambda x: x + 1, a)
        return str(a + b)

    agent = Agent("A", model=ScriptedModel([tool_call("work"), text("ok")]), tools=[work])
    result = await agent.run("go")
    assert result.output == "ok" and seen == [1]


async def test_a_step_result_that_is_not_json_is_refused_in_a_durable_run(tmp_path: Path) -> None:
    @tool
    async def bad(ctx: ToolContext) -> str:
        """Return something a journal cannot keep."""
        await ctx.step("weird", lambda: object())
        return "unreachable"

    agent = Agent("A", model=ScriptedModel([tool_call("bad"), text("ok")]), tools=[bad])
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        result = await agent.run("go", store=store)
    finally:
        await store.aclose()
    messages = [m for m in result.messages if getattr(m, "kind", "") == "tool"]
    assert "cannot be journaled as JSON" in messages[0].content  # type: ignore[attr-defined]
