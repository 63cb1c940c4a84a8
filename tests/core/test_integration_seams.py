"""The public seams an integration uses instead of the run's coordinator: a request under an
id taken beforehand (``ToolContext.request(spec, request_id=...)``), one ended from the frame
(``ToolContext.cancel_request``), what a call reads of its run (``cancelling``, ``durable``),
the frame a tool wrapper asks from (``ToolContext.for_execution``) and a run nobody listens
to any more (``Run.stop_listening``)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hpd_agent import (
    Agent,
    Approve,
    ClarificationRequest,
    PermissionRequest,
    QuestionNotAnswered,
    ToolContext,
    UserError,
    tool,
)
from hpd_agent.hooks import CallNext, Hook, ToolExecution, ToolOutcome
from hpd_agent.questions import TextQuestion
from hpd_agent.store import MemoryStore
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


async def test_a_request_under_an_id_taken_beforehand() -> None:
    """Two questions whose ids were taken in one order are asked at once, each under its
    own id (what an MCP client's input requests need: ids in the server's order)."""
    asked: list[ClarificationRequest] = []

    @tool
    async def relay(ctx: ToolContext) -> str:
        """Ask two questions at once."""
        first, second = ctx.next_request_id(), ctx.next_request_id()
        answers: dict[str, Any] = {}

        async def one(rid: str, question: str) -> None:
            answers[rid] = await ctx.request(TextQuestion(question=question), request_id=rid)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, second, "second?")
            tg.start_soon(one, first, "first?")
        return f"{answers[first]} {answers[second]}"

    agent = Agent("Root", model=ScriptedModel([tool_call("relay"), text("done")]), tools=[relay])
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                asked.append(event)
                await run.respond(event.request_id, event.question.rstrip("?"))
    ids = {e.question: e.request_id for e in asked}
    assert sorted(ids) == ["first?", "second?"]
    assert ids["first?"] != ids["second?"]
    # Each answer reached the request whose id was taken for its question.
    assert run.result.messages[-2].content == "first second"  # the tool's result


async def test_a_request_ended_from_the_frame() -> None:
    """``ctx.cancel_request``: the asker is told nobody answered, the call goes on."""
    seen = anyio.Event()

    @tool
    async def withdraw(ctx: ToolContext) -> str:
        """Ask, then withdraw the question."""
        rid = ctx.next_request_id()
        outcome: list[str] = []

        async def ask() -> None:
            try:
                await ctx.request(TextQuestion(question="still there?"), request_id=rid)
            except QuestionNotAnswered as e:
                outcome.append(e.status)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await seen.wait()  # the question is out: the stream saw it
            ctx.cancel_request(rid)
        return outcome[0]

    agent = Agent(
        "Root", model=ScriptedModel([tool_call("withdraw"), text("done")]), tools=[withdraw]
    )
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                seen.set()
    assert run.result.status == "completed"
    assert run.result.messages[-2].content == "cancelled"


@pytest.mark.parametrize("stored", [False, True])
async def test_what_a_call_reads_of_its_run(stored: bool) -> None:
    """``durable``: the run keeps its requests in a store; ``cancelling``: the run is being
    cancelled on purpose (not before)."""
    read: list[tuple[bool, bool]] = []

    @tool
    async def wait(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        read.append((ctx.durable, ctx.cancelling))
        try:
            await ctx.ask("never answered?")
        finally:
            read.append((ctx.durable, ctx.cancelling))
        return "no"

    agent = Agent("Root", model=ScriptedModel([tool_call("wait"), text("done")]), tools=[wait])
    async with agent.stream("go", store=MemoryStore() if stored else None) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                run.cancel()
    assert run.result.status == "cancelled"
    assert read == [(stored, False), (stored, True)]


class _AskingHook(Hook):
    """Asks a guarded tool's permission itself, from the frame the loop would give it."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        ctx = ToolContext.for_execution(execution)
        self.ids.append(ctx.next_request_id())
        refusal = await ToolContext.for_execution(execution).ask_permission("deploy", {})
        return ToolOutcome(text=refusal or "deployed by the hook")


async def test_a_tool_wrapper_asks_from_the_frame_the_loop_would_give() -> None:
    """The wrapper's permission request has the id the loop's own would have."""

    @tool(requires_approval=True)
    async def deploy() -> str:
        """Deploy."""
        return "deployed"

    def agent() -> Agent:
        model = ScriptedModel([tool_call("deploy", _id="c1"), text("done")])
        return Agent("Root", model=model, tools=[deploy])

    async def permission_ids(a: Agent, hooks: list[Hook]) -> list[str]:
        ids: list[str] = []
        async with a.stream("go", run_id="run-1", hooks=hooks) as run:
            async for event in run:
                if isinstance(event, PermissionRequest):
                    ids.append(event.request_id)
                    await run.respond(event.request_id, Approve())
        assert run.result.status == "completed"
        return ids

    hook = _AskingHook()
    with_hook = await permission_ids(agent(), [hook])
    assert with_hook == await permission_ids(agent(), []) == hook.ids


async def test_a_frame_outside_a_run_is_refused() -> None:
    from hpd_agent.messages import ToolCall

    execution = ToolExecution(
        run_id="r",
        agent_path=("Root",),
        call=ToolCall(id="c1", name="deploy", arguments="{}"),
        call_path="r>Root@0:c1",
        known=True,
        emit=lambda event: None,
    )
    with pytest.raises(UserError, match="no tool call of a run"):
        ToolContext.for_execution(execution)


async def test_a_run_nobody_listens_to_ends_interrupted() -> None:
    """``Run.stop_listening`` under ``on_unhandled="interrupt"``: the question is left
    pending in the store, the run ends interrupted."""

    @tool
    async def asks(ctx: ToolContext) -> str:
        """Ask."""
        return await ctx.ask("which?")

    store = MemoryStore()
    model = ScriptedModel([tool_call("asks"), text("done")])
    agent = Agent("Root", model=model, tools=[asks])
    async with agent.stream("go", store=store, on_unhandled="interrupt") as run:
        run.stop_listening()
        async for _ in run:
            pass
    assert run.result.status == "interrupted"
    assert [r.request_id for r in await store.list_requests(run_id=run.run_id)] == [
        e.request_id for e in run.result.pending
    ]
