"""``ctx.step``: a tool's side effect before it asks mid-way happens once, even across a
resume that re-runs the tool call."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpd_agent import Agent, StepFailed, ToolContext, tool
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


class _Gateway:
    """A card gateway that drops the first ``failures`` connections; counts every charge."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts = 0
        self.charged = 0

    def charge(self, amount: int) -> dict[str, object]:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError(f"gateway dropped attempt {self.attempts}")
        self.charged += 1
        return {"receipt": f"r-{amount}-{self.attempts}"}


def _retrying_agent(gateway: _Gateway, seen: list[str]) -> Agent:
    @tool
    async def checkout(ctx: ToolContext, amount: int) -> str:
        """Charge the card (retrying a dropped connection), then ask where to ship.

        Args:
            amount: What to charge.
        """
        receipt: dict[str, object] = {}
        for _ in range(3):
            try:
                receipt = await ctx.step("charge", gateway.charge, amount)
                break
            except ConnectionError as e:
                seen.append(f"{type(e).__name__}: {e}")
                continue
        address = await ctx.ask("Where should we ship it?")
        return f"{receipt['receipt']} shipped to {address}"

    def reply(messages: list[object], params: object) -> object:
        last = messages[-1]
        if getattr(last, "kind", "") == "tool":
            return text(f"done: {last.content}")  # type: ignore[attr-defined]
        return tool_call("checkout", amount=5)

    return Agent("Shop", model=FunctionModel(reply), tools=[checkout])


async def test_a_failed_step_is_journaled_and_replayed_as_the_same_failure(
    tmp_path: Path,
) -> None:
    # Issue 22: the failed attempt used up index 0 but only successes were journaled, so
    # the replay called the gateway again at index 0: charged twice, another receipt.
    gateway = _Gateway(failures=2)
    seen: list[str] = []
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        output = await _interrupt_then_resume(_retrying_agent(gateway, seen), store)
    finally:
        await store.aclose()
    assert output == "done: r-5-3 shipped to Paris"  # the receipt the first run saw
    assert (gateway.attempts, gateway.charged) == (3, 1)
    # The replay raised the recorded failures again, as ConnectionError with their messages.
    first = [f"ConnectionError: gateway dropped attempt {n}" for n in (1, 2)]
    assert seen == first * 2


async def test_a_failure_of_a_type_that_cannot_be_rebuilt_replays_as_step_failed(
    tmp_path: Path,
) -> None:
    from hpd_agent.store._steps import failure_value, replayed_failure

    class Local(Exception):
        pass

    value = failure_value(Local("x" * 10_000))["error"]
    assert len(value["message"]) < 4_100 and value["type"].endswith("Local")
    replayed = replayed_failure("charge", value)
    assert isinstance(replayed, StepFailed)
    assert (replayed.step, replayed.error_type) == ("charge", value["type"])
    rebuilt = replayed_failure("charge", failure_value(TimeoutError("slow"))["error"])
    assert type(rebuilt) is TimeoutError and str(rebuilt) == "slow"
