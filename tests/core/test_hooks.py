"""Hooks as a user writes them: each wrapper and observer, what a wrapper may do with the
call (skip, replace, retry), the order of several hooks, nested agents passing through the
root run's hooks, what an exception from a hook does, and ``install``/``uninstall``.

See docs/hooks.md for the same, in prose."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.events import (
    AgentFinished,
    ClarificationRequest,
    ClarificationResolved,
    PermissionRequest,
    RequestEvent,
    RequestStatus,
    TextDelta,
    ToolCallStarted,
)
from hpd_agent.hooks import (
    AgentInvocation,
    AgentOutcome,
    CallNext,
    Hook,
    HookSet,
    ModelCall,
    StepCall,
    ToolExecution,
    ToolOutcome,
    install,
    installed,
    uninstall,
)
from hpd_agent.messages import Message, ToolResultMessage, Usage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.permissions import Approve
from hpd_agent.store import MemoryStore
from hpd_agent.testing import FunctionModel, ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def _results(messages: Sequence[Message]) -> list[tuple[str, bool]]:
    return [(m.content, m.is_error) for m in messages if isinstance(m, ToolResultMessage)]


def _adder(*turns: Any) -> Agent:
    return Agent(
        "Calc", model=ScriptedModel(turns or [tool_call("add", a=1, b=2), text("3")]), tools=[add]
    )


@pytest.fixture
def clean_install() -> Iterator[None]:
    """Whatever a test installs is uninstalled after it."""
    before = installed()
    try:
        yield
    finally:
        for hook in installed():
            if hook not in before:
                uninstall(hook)


class Recorder(Hook):
    """Records every call object each wrapper sees, then passes it on."""

    def __init__(self) -> None:
        self.agents: list[AgentInvocation] = []
        self.outcomes: list[AgentOutcome] = []
        self.models: list[ModelCall] = []
        self.sent: list[list[Message]] = []
        self.tools: list[ToolExecution] = []
        self.tool_outcomes: list[ToolOutcome] = []
        self.steps: list[StepCall] = []
        self.step_values: list[Any] = []

    async def wrap_agent(
        self, invocation: AgentInvocation, call_next: CallNext[AgentInvocation, AgentOutcome]
    ) -> AgentOutcome:
        self.agents.append(invocation)
        outcome = await call_next(invocation)
        self.outcomes.append(outcome)
        return outcome

    async def wrap_model_request(
        self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
    ) -> ModelResponse:
        self.models.append(call)
        self.sent.append(list(call.messages))  # the live conversation: it grows after
        return await call_next(call)

    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        self.tools.append(execution)
        outcome = await call_next(execution)
        self.tool_outcomes.append(outcome)
        return outcome

    async def wrap_step(self, step: StepCall, call_next: CallNext[StepCall, Any]) -> Any:
        self.steps.append(step)
        value = await call_next(step)
        self.step_values.append(value)
        return value


# -- each wrapper sees its call ----------------------------------------------------------
async def test_wrap_agent_sees_the_invocation_and_the_outcome() -> None:
    agent = _adder()
    rec = Recorder()
    result = await agent.run("1 + 2?", hooks=[rec], run_id="run_a")
    assert result.output == "3"
    [inv] = rec.agents
    assert (inv.run_id, inv.agent_name, inv.agent_path, inv.depth) == (
        "run_a",
        "Calc",
        ("Calc",),
        0,
    )
    assert (inv.input, inv.tool_call_id, inv.resumed) == ("1 + 2?", None, False)
    assert inv.scope_path == "run_a"
    assert inv.model is agent.model
    [outcome] = rec.outcomes
    assert outcome.output == "3" and not outcome.truncated
    assert outcome.usage == Usage(requests=2)
    assert outcome.messages == result.messages


async def test_wrap_model_request_sees_each_turn() -> None:
    agent = _adder()
    rec = Recorder()
    await agent.run("1 + 2?", hooks=[rec], run_id="run_m")
    assert [c.turn for c in rec.models] == [0, 1]
    assert [c.key for c in rec.models] == ["run_m@0", "run_m@1"]
    first, second = rec.models
    assert (first.run_id, first.agent_path, first.scope_path) == ("run_m", ("Calc",), "run_m")
    assert first.model is agent.model
    assert [d.name for d in first.params.tools] == ["add"]
    assert (first.params.agent_name, first.params.turn) == ("Calc", 0)
    assert rec.sent[0][-1].content == "1 + 2?"
    # The second request carries the tool's result.
    assert _results(rec.sent[1]) == [("3", False)]
    # call.messages is the agent's conversation itself, which grows after the call.
    assert first.messages is second.messages


async def test_wrap_tool_call_sees_the_call_and_its_outcome() -> None:
    agent = _adder(tool_call("add", _id="c1", a=1, b=2), tool_call("nope", _id="c2"), text("3"))
    rec = Recorder()
    await agent.run("1 + 2?", hooks=[rec], run_id="run_t")
    known, unknown = rec.tools
    assert (known.tool_name, known.call.id, known.call.arguments) == (
        "add",
        "c1",
        '{"a": 1, "b": 2}',
    )
    assert (known.run_id, known.agent_path, known.known, known.side_effects) == (
        "run_t",
        ("Calc",),
        True,
        True,
    )
    assert known.call_path == known.key == "run_t@0:c1"
    assert (unknown.tool_name, unknown.known, unknown.call_path) == ("nope", False, "run_t@1:c2")
    ok, failed = rec.tool_outcomes
    assert ok == ToolOutcome(text="3")
    assert failed.is_error and failed.error_type == "unknown_tool"


async def test_a_tool_failure_reaches_the_wrapper_as_an_error_outcome() -> None:
    @tool
    def broken() -> str:
        """Fail."""
        raise RuntimeError("disk full")

    agent = Agent("A", model=ScriptedModel([tool_call("broken"), text("sorry")]), tools=[broken])
    rec = Recorder()
    result = await agent.run("go", hooks=[rec])
    assert result.status == "completed"
    [outcome] = rec.tool_outcomes
    assert outcome.is_error and outcome.error_type == "RuntimeError"
    assert "disk full" in outcome.text


async def test_wrap_step_sees_each_step_and_may_replace_its_value() -> None:
    done: list[str] = []

    @tool
    async def charge(ctx: ToolContext, amount: int) -> str:
        """Charge.

        Args:
            amount: How much.
        """
        receipt = await ctx.step("charge", lambda: done.append("charged") or f"r-{amount}")
        mail = await ctx.step("mail", done.append, "mailed")
        return f"{receipt} {mail}"

    class Stub(Recorder):
        async def wrap_step(self, step: StepCall, call_next: CallNext[StepCall, Any]) -> Any:
            if step.name == "mail":
                self.steps.append(step)
                return "not sent"  # skipped: the function does not run
            return await super().wrap_step(step, call_next)

    model = ScriptedModel([tool_call("charge", _id="c1", amount=5), text("ok")])
    agent = Agent("Shop", model=model, tools=[charge])
    hook = Stub()
    result = await agent.run("buy", hooks=[hook], run_id="run_s")
    assert _results(result.messages) == [("r-5 not sent", False)]
    assert done == ["charged"]
    assert [(s.name, s.key, s.agent_path) for s in hook.steps] == [
        ("charge", "run_s@0:c1!0:charge", ("Shop",)),
        ("mail", "run_s@0:c1!1:mail", ("Shop",)),
    ]
    assert hook.step_values == ["r-5"]


# -- the observers ---------------------------------------------------------------------
class Watcher(Hook):
    def __init__(self) -> None:
        self.seen: list[tuple[str, RequestEvent, RequestStatus | None, Any]] = []

    def request_opened(self, event: RequestEvent) -> None:
        self.seen.append(("opened", event, None, None))

    def request_resolved(self, event: RequestEvent, status: RequestStatus, answer: Any) -> None:
        self.seen.append(("resolved", event, status, answer))


async def test_observers_see_a_question_open_and_its_answer() -> None:
    model = ScriptedModel(
        [tool_call("ask_user", question="Which colour?", options=["red", "blue"]), text("ok")]
    )
    agent = Agent("A", model=model, tools=[ask_user()])
    watcher = Watcher()
    await agent.run("go", hooks=[watcher], handler=ScriptedHuman({"colour": "blue"}))
    (opened, event, _, _), (resolved, same, status, answer) = watcher.seen
    assert (opened, resolved) == ("opened", "resolved")
    assert isinstance(event, ClarificationRequest) and event.question == "Which colour?"
    assert same is event
    assert (status, answer) == ("answered", "blue")


async def test_observers_see_a_request_nobody_answers() -> None:
    model = ScriptedModel([tool_call("ask_user", question="Which colour?"), text("ok")])
    agent = Agent("A", model=model, tools=[ask_user()])
    watcher = Watcher()
    await agent.run("go", hooks=[watcher])  # no handler: resolved as unavailable
    assert [(kind, status, answer) for kind, _, status, answer in watcher.seen] == [
        ("opened", None, None),
        ("resolved", "unavailable", None),
    ]


async def test_observers_see_permission_requests() -> None:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: Which.
        """
        return f"deleted {path}"

    agent = Agent(
        "A", model=ScriptedModel([tool_call("delete", path="x"), text("ok")]), tools=[delete]
    )
    watcher = Watcher()
    human = ScriptedHuman(permissions={"delete": Approve()})
    result = await agent.run("go", hooks=[watcher], handler=human)
    assert _results(result.messages) == [("deleted x", False)]
    (_, event, _, _), (_, _, status, answer) = watcher.seen
    assert isinstance(event, PermissionRequest) and event.tool_name == "delete"
    assert status == "answered" and isinstance(answer, Approve)


# -- skip, replace, retry ----------------------------------------------------------------
async def test_a_model_wrapper_may_skip_the_model() -> None:
    recorded = ModelResponse(text="from the cassette", usage=Usage(requests=1, output_tokens=7))

    class Replay(Hook):
        async def wrap_model_request(
            self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
        ) -> ModelResponse:
            return recorded

    model = ScriptedModel([])  # any request to it would fail the run
    agent = Agent("A", model=model)
    async with agent.stream("go", hooks=[Replay()]) as run:
        events = [e async for e in run]
    assert run.result.output == "from the cassette"
    assert model.requests == []
    assert run.result.usage.output_tokens == 7  # counted as if the model had answered
    # The loop streams the text of a response not marked streamed.
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["from the cassette"]


async def test_a_model_wrapper_may_replace_the_response() -> None:
    class Shout(Hook):
        async def wrap_model_request(
            self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
        ) -> ModelResponse:
            response = await call_next(call)
            return dataclasses.replace(response, text=(response.text or "").upper())

    agent = Agent("A", model=ScriptedModel([text("quiet")]))
    result = await agent.run("go", hooks=[Shout()])
    assert result.output == "QUIET"


async def test_a_model_wrapper_may_retry_a_failed_request() -> None:
    failures = [ConnectionError("flaky")]

    def flaky(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        if failures:
            raise failures.pop()
        return text("fine")

    class RetryOnce(Hook):
        def __init__(self) -> None:
            self.errors: list[BaseException] = []

        async def wrap_model_request(
            self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
        ) -> ModelResponse:
            try:
                return await call_next(call)
            except ConnectionError as e:
                self.errors.append(e)
                return await call_next(call)

    model = FunctionModel(flaky)
    hook = RetryOnce()
    result = await Agent("A", model=model).run("go", hooks=[hook])
    assert result.output == "fine"
    assert model.calls == 2
    assert [str(e) for e in hook.errors] == ["flaky"]


async def test_a_tool_wrapper_may_skip_the_tool() -> None:
    ran: list[int] = []

    @tool
    def launch(n: int) -> str:
        """Launch.

        Args:
            n: How many.
        """
        ran.append(n)
        return "launched"

    class DryRun(Hook):
        async def wrap_tool_call(
            self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
        ) -> ToolOutcome:
            return ToolOutcome(text=f"dry run: {execution.tool_name} not called")

    model = ScriptedModel([tool_call("launch", n=3), text("ok")])
    agent = Agent("A", model=model, tools=[launch])
    async with agent.stream("go", hooks=[DryRun()]) as run:
        events = [e async for e in run]
    assert ran == []
    assert _results(model.requests[1]) == [("dry run: launch not called", False)]
    # A skipped call puts no tool event on the stream (the wrapper may emit its own).
    assert not [e for e in events if isinstance(e, ToolCallStarted)]


async def test_a_tool_wrapper_may_replace_the_outcome() -> None:
    class Redact(Hook):
        async def wrap_tool_call(
            self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
        ) -> ToolOutcome:
            outcome = await call_next(execution)
            return dataclasses.replace(outcome, text=outcome.text.replace("3", "[n]"))

    agent = _adder()
    result = await agent.run("go", hooks=[Redact()])
    assert _results(result.messages) == [("[n]", False)]


async def test_a_tool_wrapper_may_retry_a_failed_call() -> None:
    attempts: list[int] = []

    @tool
    def fetch() -> str:
        """Fetch."""
        attempts.append(1)
        if len(attempts) == 1:
            raise TimeoutError("slow upstream")
        return "page"

    class RetryErrors(Hook):
        async def wrap_tool_call(
            self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
        ) -> ToolOutcome:
            outcome = await call_next(execution)
            if outcome.is_error and outcome.error_type == "TimeoutError":
                outcome = await call_next(execution)
            return outcome

    agent = Agent("A", model=ScriptedModel([tool_call("fetch"), text("ok")]), tools=[fetch])
    result = await agent.run("go", hooks=[RetryErrors()])
    assert len(attempts) == 2
    assert _results(result.messages) == [("page", False)]


async def test_a_retried_tool_call_reuses_its_request_ids_and_step_keys() -> None:
    """A retry is the same call again: with a store, what the first attempt did (steps,
    answered questions) is replayed to the second; without one, everything runs again."""
    effects: list[str] = []

    @tool
    async def pick(ctx: ToolContext) -> str:
        """Pick."""
        n = await ctx.step("effect", lambda: effects.append("x") or len(effects))
        colour = await ctx.ask("Which colour?")
        return f"step {n}: {colour}"

    class Twice(Hook):
        async def wrap_tool_call(
            self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
        ) -> ToolOutcome:
            await call_next(execution)
            return await call_next(execution)

    async def run(store: MemoryStore | None) -> tuple[list[tuple[str, bool]], list[str]]:
        effects.clear()
        human = ScriptedHuman().answer("colour", "red", times=1).answer("colour", "blue")
        agent = Agent("A", model=ScriptedModel([tool_call("pick"), text("ok")]), tools=[pick])
        result = await agent.run("go", hooks=[Twice()], handler=human, store=store)
        return _results(result.messages), [e.request_id for e in human.asked]

    plain, asked = await run(None)
    assert plain == [("step 2: blue", False)] and effects == ["x", "x"]
    assert len(asked) == 2 and asked[0] == asked[1]
    stored, asked = await run(MemoryStore())
    assert stored == [("step 1: red", False)] and effects == ["x"]
    assert len(asked) == 1


# -- order -----------------------------------------------------------------------------
class Tracer(Hook):
    """Logs ``>name`` when a call enters the hook and ``<name`` when it leaves."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def _around(self, kind: str, call: Any, call_next: CallNext[Any, Any]) -> Any:
        self.log.append(f">{kind}:{self.name}")
        try:
            return await call_next(call)
        finally:
            self.log.append(f"<{kind}:{self.name}")

    async def wrap_agent(
        self, invocation: AgentInvocation, call_next: CallNext[AgentInvocation, AgentOutcome]
    ) -> AgentOutcome:
        return await self._around("agent", invocation, call_next)

    async def wrap_model_request(
        self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
    ) -> ModelResponse:
        return await self._around("model", call, call_next)

    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        return await self._around("tool", execution, call_next)


async def test_run_hooks_wrap_installed_hooks_first_given_outermost(clean_install: None) -> None:
    log: list[str] = []
    install(Tracer("installed", log))
    agent = _adder()
    await agent.run("go", hooks=[Tracer("first", log), Tracer("second", log)])
    order = ["first", "second", "installed"]

    def nest(kind: str, *inner: str) -> list[str]:
        return [
            *(f">{kind}:{n}" for n in order),
            *inner,
            *(f"<{kind}:{n}" for n in reversed(order)),
        ]

    assert log == nest("agent", *nest("model"), *nest("tool"), *nest("model"))


async def test_the_stores_journal_is_outermost_a_replayed_call_reaches_no_hook() -> None:
    def picker(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        if params.turn == 0:
            return tool_call("ask_user", question="Pick one", options=["a", "b"])
        return text(f"picked {_results(messages)[-1][0]}")

    store = MemoryStore()
    agent = Agent("Picker", model=FunctionModel(picker), tools=[ask_user()])
    first = await agent.run("go", store=store, on_unhandled="interrupt")
    assert first.status == "interrupted"
    rec = Recorder()
    rid = first.pending[0].request_id
    done = await agent.resume(first.run_id, store=store, answers={rid: "b"}, hooks=[rec])
    assert done.output == "picked b"
    [inv] = rec.agents
    assert inv.resumed
    # Turn 0 was replayed from the journal, inside which the hook sits: it sees only the
    # live work (the question's call, whose answer now waits in the store, and turn 1).
    assert [c.turn for c in rec.models] == [1]
    assert [t.tool_name for t in rec.tools] == ["ask_user"]


# -- nested agents ---------------------------------------------------------------------
async def test_nested_agents_calls_pass_through_the_root_runs_hooks() -> None:
    worker = Agent(
        "Worker",
        model=ScriptedModel([tool_call("add", _id="w1", a=2, b=2), text("4")]),
        tools=[add],
    )
    root = Agent(
        "Boss",
        model=ScriptedModel([tool_call("Worker", _id="b1", query="2+2"), text("4!")]),
        tools=[worker.as_tool()],
    )
    rec = Recorder()
    result = await root.run("go", hooks=[rec], run_id="run_n")
    assert result.output == "4!"
    boss, work = rec.agents
    assert (boss.agent_path, boss.depth, boss.tool_call_id) == (("Boss",), 0, None)
    assert (work.agent_path, work.depth, work.tool_call_id) == (("Boss", "Worker"), 1, "b1")
    assert (work.input, work.scope_path) == ("2+2", "run_n@0:b1/Worker")
    assert work.model is worker.model
    assert [(c.agent_path, c.turn) for c in rec.models] == [
        (("Boss",), 0),
        (("Boss", "Worker"), 0),
        (("Boss", "Worker"), 1),
        (("Boss",), 1),
    ]
    assert [(t.agent_path, t.tool_name, t.side_effects) for t in rec.tools] == [
        (("Boss",), "Worker", False),  # an agent's tool acts only through its own calls
        (("Boss", "Worker"), "add", True),
    ]
    assert rec.tools[1].call_path == "run_n@0:b1/Worker@0:w1"


# -- a hook that raises ----------------------------------------------------------------
class Raising(Hook):
    def __init__(self, where: str, depth: int = 0) -> None:
        self.where = where
        self.depth = depth

    def _check(self, where: str, path: tuple[str, ...]) -> None:
        if where == self.where and len(path) - 1 == self.depth:
            raise ValueError(f"{where} hook broke")

    async def wrap_agent(
        self, invocation: AgentInvocation, call_next: CallNext[AgentInvocation, AgentOutcome]
    ) -> AgentOutcome:
        self._check("agent", invocation.agent_path)
        return await call_next(invocation)

    async def wrap_model_request(
        self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
    ) -> ModelResponse:
        self._check("model", call.agent_path)
        return await call_next(call)

    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        self._check("tool", execution.agent_path)
        return await call_next(execution)

    async def wrap_step(self, step: StepCall, call_next: CallNext[StepCall, Any]) -> Any:
        self._check("step", step.agent_path)
        return await call_next(step)


@pytest.mark.parametrize("where", ["agent", "model", "tool"])
async def test_a_hook_raising_in_the_root_agent_fails_the_run(where: str) -> None:
    with pytest.raises(ValueError, match=f"{where} hook broke"):
        await _adder().run("go", hooks=[Raising(where)])
    # Through a stream too: the stream ends normally, leaving the block raises.
    with pytest.raises(ValueError, match=f"{where} hook broke"):
        async with _adder().stream("go", hooks=[Raising(where)]) as run:
            events = [e async for e in run]
    assert run.result.status == "failed" and isinstance(run.result.error, ValueError)
    if where != "agent":  # a wrap_agent that raises before call_next: the agent never started
        finished = [e for e in events if isinstance(e, AgentFinished)]
        assert [(e.status, e.error) for e in finished] == [
            ("failed", f"ValueError: {where} hook broke")
        ]


@pytest.mark.parametrize("where", ["agent", "model", "tool"])
async def test_a_hook_raising_in_a_nested_agent_fails_that_agent_only(where: str) -> None:
    worker = Agent(
        "Worker", model=ScriptedModel([tool_call("add", a=1, b=1), text("2")]), tools=[add]
    )
    root = Agent(
        "Boss",
        model=ScriptedModel([tool_call("Worker", query="1+1"), text("oops")]),
        tools=[worker.as_tool()],
    )
    result = await root.run("go", hooks=[Raising(where, depth=1)])
    # The sub-agent failed like any failing tool: its caller gets an error result.
    assert result.status == "completed" and result.output == "oops"
    assert _results(result.messages) == [(f"Error: ValueError: {where} hook broke", True)]


async def test_a_step_wrapper_raising_is_the_tools_error() -> None:
    @tool
    async def pay(ctx: ToolContext) -> str:
        """Pay."""
        return await ctx.step("pay", lambda: "paid")

    agent = Agent("A", model=ScriptedModel([tool_call("pay"), text("no")]), tools=[pay])
    result = await agent.run("go", hooks=[Raising("step")])
    assert _results(result.messages) == [("Error: ValueError: step hook broke", True)]


async def test_a_tool_wrapper_raising_in_a_parallel_batch_fails_the_run_with_its_error() -> None:
    agent = _adder([tool_call("add", a=1, b=2), tool_call("add", a=3, b=4)], text("done"))
    with pytest.raises(ValueError, match="tool hook broke"):
        await agent.run("go", hooks=[Raising("tool")])


async def test_the_first_tool_wrapper_to_raise_in_a_parallel_batch_fails_the_run() -> None:
    """The other calls are cancelled; one raising something else as it unwinds is dropped."""
    cancelled: list[str] = []

    class FirstWins(Hook):
        async def wrap_tool_call(
            self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
        ) -> ToolOutcome:
            if execution.call.id == "fails":
                await anyio.lowlevel.checkpoint()  # after the other call started waiting
                raise ValueError("first")
            try:
                await anyio.Event().wait()  # until cancelled
            except anyio.get_cancelled_exc_class():
                cancelled.append(execution.call.id)
                raise KeyError("second") from None
            return await call_next(execution)

    agent = _adder(
        [tool_call("add", _id="waits", a=1, b=2), tool_call("add", _id="fails", a=3, b=4)],
        text("done"),
    )
    with pytest.raises(ValueError, match="first"):
        await agent.run("go", hooks=[FirstWins()])
    assert cancelled == ["waits"]


async def test_an_observer_raising_leaves_no_request_open() -> None:
    class Broken(Hook):
        def request_opened(self, event: RequestEvent) -> None:
            raise ValueError("observer broke")

    model = ScriptedModel([tool_call("ask_user", question="Which colour?"), text("ok")])
    agent = Agent("A", model=model, tools=[ask_user()])
    with contextlib.suppress(ValueError):  # failing the run with the observer's error is fine
        async with agent.stream("go", hooks=[Broken()]) as run:
            events = [e async for e in run]
        asked = {e.request_id for e in events if isinstance(e, ClarificationRequest)}
        ended = {e.request_id for e in events if isinstance(e, ClarificationResolved)}
        assert asked == ended
    assert run.pending == []


class BrokenObserver(Hook):
    def __init__(self, where: str) -> None:
        self.where = where

    def request_opened(self, event: RequestEvent) -> None:
        if self.where == "opened":
            raise ValueError("observer broke")

    def request_resolved(self, event: RequestEvent, status: RequestStatus, answer: Any) -> None:
        if self.where == "resolved":
            raise ValueError("observer broke")


@pytest.mark.parametrize("stored", [False, True])
async def test_an_observer_raising_from_request_opened_withdraws_the_request(
    stored: bool,
) -> None:
    store = MemoryStore() if stored else None
    before, after = Watcher(), Watcher()
    model = ScriptedModel([tool_call("ask_user", question="Which colour?"), text("ok")])
    agent = Agent("A", model=model, tools=[ask_user()])
    human = ScriptedHuman({"colour": "blue"})  # would answer at once: no ClosedResourceError
    hooks = [before, BrokenObserver("opened"), after]
    result = await agent.run("go", hooks=hooks, handler=human, store=store, run_id="run_w")
    # The asking tool got the observer's error; the run went on.
    assert result.status == "completed"
    assert _results(result.messages) == [("Error: ValueError: observer broke", True)]
    # Every observer was told it opened, then that it ended as cancelled.
    for watcher in (before, after):
        assert [(kind, status) for kind, _, status, _ in watcher.seen] == [
            ("opened", None),
            ("resolved", "cancelled"),
        ]
    if store is not None:
        assert [r.status for r in await store.list_requests(run_id="run_w", status=None)] == [
            "cancelled"
        ]


async def test_an_observer_raising_from_request_resolved_is_logged_and_the_answer_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def agent() -> Agent:
        model = ScriptedModel([tool_call("ask_user", question="Which colour?"), text("ok")])
        return Agent("A", model=model, tools=[ask_user()])

    # Answered from the stream: run.respond returns the answer, the run completes.
    watcher = Watcher()
    async with agent().stream("go", hooks=[BrokenObserver("resolved"), watcher]) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert await run.respond(event.request_id, "blue") == "blue"
    assert run.result.status == "completed"
    assert _results(run.result.messages) == [("blue", False)]
    assert [(kind, status) for kind, _, status, _ in watcher.seen] == [
        ("opened", None),
        ("resolved", "answered"),  # the observers after the broken one are still told
    ]
    # Answered by a handler: the same.
    result = await agent().run(
        "go", hooks=[BrokenObserver("resolved")], handler=ScriptedHuman({"colour": "blue"})
    )
    assert result.status == "completed"
    assert _results(result.messages) == [("blue", False)]
    logged = [r for r in caplog.records if r.name == "hpd_agent.hooks"]
    assert len(logged) == 2
    assert all(r.exc_info and isinstance(r.exc_info[1], ValueError) for r in logged)


# -- install, uninstall, active --------------------------------------------------------
async def test_install_adds_a_hook_to_every_root_run_until_uninstalled(clean_install: None) -> None:
    rec = Recorder()
    install(rec)
    install(rec)  # twice: no effect
    assert installed().count(rec) == 1
    await _adder().run("go")
    assert len(rec.agents) == 1 and len(rec.models) == 2 and len(rec.tools) == 1
    uninstall(rec)
    assert rec not in installed()
    await _adder().run("go")
    assert len(rec.agents) == 1  # not called again


async def test_a_run_keeps_the_hooks_it_started_with(clean_install: None) -> None:
    rec = Recorder()

    @tool
    def stop_tracing() -> str:
        """Uninstall the hook mid-run."""
        uninstall(rec)
        return "done"

    agent = Agent(
        "A", model=ScriptedModel([tool_call("stop_tracing"), text("ok")]), tools=[stop_tracing]
    )
    install(rec)
    await agent.run("go")
    assert rec not in installed()
    assert [c.turn for c in rec.models] == [0, 1]  # turn 1 came after the uninstall


async def test_an_inactive_hook_sits_the_run_out(clean_install: None) -> None:
    class Off(Recorder):
        def active(self) -> bool:
            return False

    off = Off()
    install(off)
    await _adder().run("go", hooks=[off])
    assert off.agents == [] and off.models == [] and off.tools == []


def test_a_hookset_keeps_only_the_methods_a_hook_overrides() -> None:
    class ToolsOnly(Hook):
        async def wrap_tool_call(
            self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
        ) -> ToolOutcome:
            return await call_next(execution)

    hooks = HookSet([ToolsOnly(), Watcher()])
    assert len(hooks.tool_wrappers) == 1
    assert hooks.agent_wrappers == hooks.model_wrappers == hooks.step_wrappers == ()
    assert len(hooks.observers) == 1
    assert not HookSet([])


async def test_a_nested_run_takes_no_hooks_of_its_own() -> None:
    inner = Agent("Inner", model=ScriptedModel([text("hi")]))

    @tool
    async def delegate() -> str:
        """Delegate."""
        result = await inner.run("hi", hooks=[Recorder()])
        return str(result.output)

    agent = Agent("A", model=ScriptedModel([tool_call("delegate"), text("ok")]), tools=[delegate])
    result = await agent.run("go")
    [(content, is_error)] = _results(result.messages)
    assert is_error and "uses its root run's store, hooks and handler" in content
