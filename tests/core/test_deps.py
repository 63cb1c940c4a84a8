"""Dependencies: ``Agent(deps_type=...)``, ``run(deps=...)``, tools read ``ctx.deps``;
nested agents inherit the caller's deps unless given their own; wrong deps are refused."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hpd_agent import Agent, ToolContext, UserError, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import MemoryStore, SQLiteStore, Store
from hpd_agent.testing import FunctionModel, ScriptedModel, Step, text, tool_call

pytestmark = pytest.mark.anyio


@dataclass
class Shop:
    name: str
    stock: dict[str, int]


@dataclass
class Audit:
    log: list[str]


@tool
def stock_of(ctx: ToolContext[Shop], item: str) -> str:
    """How many of an item the shop has.

    Args:
        item: The item.
    """
    return f"{ctx.deps.name}: {ctx.deps.stock.get(item, 0)} {item}"


def _tool_results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def test_a_typed_context_parameter_is_not_part_of_the_schema() -> None:
    assert list(stock_of.parameters["properties"]) == ["item"]
    assert stock_of.parameters["required"] == ["item"]


async def test_tools_read_the_runs_deps() -> None:
    model = ScriptedModel([tool_call("stock_of", item="apples"), text("done")])
    agent = Agent("Clerk", model=model, tools=[stock_of], deps_type=Shop)
    result = await agent.run("apples?", deps=Shop("Corner", {"apples": 3}))
    assert [r.content for r in _tool_results(result.messages)] == ["Corner: 3 apples"]
    # The same agent, another run, other deps.
    model.reset()
    other = await agent.run("apples?", deps=Shop("Market", {"apples": 40}))
    assert [r.content for r in _tool_results(other.messages)] == ["Market: 40 apples"]


async def test_stream_and_a_context_without_deps() -> None:
    seen: list[object] = []

    @tool
    def look(ctx: ToolContext) -> str:
        """Look at the deps."""
        seen.append(ctx.deps)
        return "ok"

    agent = Agent("Plain", model=ScriptedModel([tool_call("look"), text("done")] * 2), tools=[look])
    await agent.run("go")  # no deps_type, no deps: ctx.deps is None
    async with agent.stream("go", deps={"any": "thing"}) as run:
        async for _ in run:
            pass
    assert seen == [None, {"any": "thing"}]


async def test_nested_agents_inherit_the_callers_deps() -> None:
    grandchild = Agent(
        "Stockist",
        model=ScriptedModel([tool_call("stock_of", item="pears"), text("2 pears")]),
        tools=[stock_of],
        deps_type=Shop,
    )

    @tool
    async def ask_stockist(ctx: ToolContext[Shop], item: str) -> str:
        """Ask the stockist (a nested run started inside a tool).

        Args:
            item: The item.
        """
        return (await grandchild.run(f"{item}?")).output

    child = Agent(
        "Manager",
        model=ScriptedModel([tool_call("ask_stockist", item="pears"), text("we have 2 pears")]),
        tools=[ask_stockist],
    )
    root = Agent(
        "Owner",
        model=ScriptedModel([tool_call("Manager", query="pears?"), text("2 pears")]),
        tools=[child.as_tool()],
        deps_type=Shop,
    )
    result = await root.run("pears?", deps=Shop("Corner", {"pears": 2}))
    assert result.output == "2 pears"
    stockist_model = grandchild.model
    assert isinstance(stockist_model, ScriptedModel)
    (stock_result,) = _tool_results(stockist_model.requests[1])
    assert stock_result.content == "Corner: 2 pears"


async def test_a_nested_run_given_its_own_deps_uses_them() -> None:
    seen: list[object] = []

    @tool
    def record(ctx: ToolContext[Audit], note: str) -> str:
        """Record a note.

        Args:
            note: The note.
        """
        ctx.deps.log.append(note)
        seen.append(ctx.deps)
        return "recorded"

    auditor = Agent(
        "Auditor",
        model=ScriptedModel([tool_call("record", note="checked"), text("audited")]),
        tools=[record],
        deps_type=Audit,
    )
    audit = Audit(log=[])

    @tool
    async def run_audit(ctx: ToolContext[Shop]) -> str:
        """Have the shop audited."""
        assert isinstance(ctx.deps, Shop)
        return (await auditor.run("audit", deps=audit)).output

    root = Agent(
        "Owner",
        model=ScriptedModel([tool_call("run_audit"), text("done")]),
        tools=[run_audit],
        deps_type=Shop,
    )
    await root.run("audit please", deps=Shop("Corner", {}))
    assert audit.log == ["checked"]
    assert seen == [audit]


async def test_wrong_or_missing_deps_are_refused_before_the_run_starts() -> None:
    model = ScriptedModel([text("never")])
    agent = Agent("Clerk", model=model, tools=[stock_of], deps_type=Shop)
    with pytest.raises(UserError, match=r"needs deps of type Shop, got Audit"):
        await agent.run("go", deps=Audit(log=[]))
    with pytest.raises(UserError, match=r"deps_type=Shop: pass deps="):
        await agent.run("go")
    with pytest.raises(UserError, match=r"needs deps of type Shop"):
        agent.stream("go", deps="a string")
    with pytest.raises(UserError, match=r"needs deps of type Shop"):
        await anyio.to_thread.run_sync(lambda: agent.run_sync("go", deps=1))
    assert model.remaining == 1  # no model call was made


async def test_a_type_that_is_not_a_class_is_not_checked() -> None:
    agent = Agent("Clerk", model=ScriptedModel([text("ok")]), deps_type=dict[str, int])
    assert (await agent.run("go", deps={"a": 1})).output == "ok"


async def test_a_nested_agent_given_wrong_deps_fails_as_its_callers_tool_error() -> None:
    child = Agent("Clerk", model=ScriptedModel([text("never")]), deps_type=Shop)
    root = Agent(
        "Owner",
        model=ScriptedModel([tool_call("Clerk", query="go"), text("could not")]),
        tools=[child.as_tool()],
    )
    result = await root.run("go", deps=Audit(log=[]))  # the root has no deps_type
    (failed,) = _tool_results(result.messages)
    assert failed.is_error
    assert "agent 'Clerk' needs deps of type Shop, got Audit" in failed.content


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")
    yield s
    anyio.run(s.aclose)


async def test_deps_are_given_again_to_resume(store: Store) -> None:
    def answer(messages: Sequence[Message], params: ModelRequestParams) -> Step:
        return [
            tool_call("ask_user", question="Which item?"),
            tool_call("stock_of", item="figs"),
            text("done"),
        ][params.turn]

    def build() -> Agent:
        return Agent(
            "Clerk", model=FunctionModel(answer), tools=[ask_user(), stock_of], deps_type=Shop
        )

    shop = Shop("Corner", {"figs": 7})
    first = await build().run("stock?", store=store, on_unhandled="interrupt", deps=shop)
    assert first.status == "interrupted"
    answers = {first.pending[0].request_id: "figs"}
    with pytest.raises(UserError, match="pass them again to resume"):
        await build().resume(first.run_id, store=store, answers=answers)
    resumed = await build().resume(first.run_id, store=store, answers=answers, deps=shop)
    assert resumed.status == "completed"
    assert _tool_results(resumed.messages)[-1].content == "Corner: 7 figs"
