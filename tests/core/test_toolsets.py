"""Toolsets: tools known when a run starts, resolved once per root run, their resources
closed when the root run ends (``hpd_agent.tools.Toolset``, ``RunResources``)."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from hpd_agent import (
    Agent,
    ClarificationRequest,
    RunFinished,
    ToolContext,
    UserError,
    tool,
)
from hpd_agent.messages import ToolResultMessage
from hpd_agent.store import MemoryStore
from hpd_agent.testing import ScriptedModel, text, tool_call
from hpd_agent.tools import RunResources, Tool, Toolset

pytestmark = pytest.mark.anyio


class Connection:
    """A resource like a client session: it runs a task group while it is open, so it
    must be exited in the task that entered it."""

    def __init__(self, log: list[str], fail_after_start: bool = False) -> None:
        self.log = log
        self.open = False
        self._fail = fail_after_start
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Connection:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._serve)
        self.open = True
        self.log.append("open")
        return self

    async def _serve(self) -> None:
        if self._fail:
            raise RuntimeError("connection lost")
        await anyio.sleep_forever()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        self.open = False
        self.log.append("closed")
        return await self._group.__aexit__(et, e, tb)


class Refused:
    async def __aenter__(self) -> None:
        raise ConnectionRefusedError("nothing listens there")

    async def __aexit__(self, *exc: object) -> None:
        return None


class Remote(Toolset):
    """A toolset whose one tool needs its connection open."""

    def __init__(self, name: str = "echo", *, refuse: bool = False, fail: bool = False) -> None:
        self.name = name
        self.refuse = refuse
        self.fail = fail
        self.log: list[str] = []
        self.resolved: list[str] = []
        self.connection: Connection | None = None

    async def resolve(self, resources: RunResources) -> Sequence[Tool]:
        self.resolved.append(resources.run_id)
        await anyio.lowlevel.checkpoint()  # let concurrent callers pile up on the first resolution
        if self.refuse:
            await resources.enter(Refused())
        connection = self.connection = await resources.enter(Connection(self.log, self.fail))

        @tool(name=self.name)
        async def echo(text: str) -> str:
            """Echo through the connection.

            Args:
                text: What to echo.
            """
            assert connection.open
            return f"echo {text}"

        return [echo]


def _sub(remote: Remote, steps: int) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(
        [s for _ in range(steps) for s in (tool_call(remote.name, text="x"), text("sub done"))]
    )
    return Agent("Sub", model=model, tools=[remote]), model


async def test_a_toolset_is_resolved_once_per_root_run_and_closed_when_it_ends() -> None:
    remote = Remote()
    sub, sub_model = _sub(remote, steps=2)
    seen_at_finish: list[list[str]] = []
    root_model = ScriptedModel(
        [
            # Two parallel calls of the sub-agent: each resolves its toolsets in its own
            # task; the connection they share is entered once, in a task of the run's own.
            [tool_call("Sub", query="a"), tool_call("Sub", query="b")],
            text("root done"),
        ]
    )
    root = Agent("Root", model=root_model, tools=[sub.as_tool()])
    async with root.stream("go") as run:
        async for event in run:
            if isinstance(event, RunFinished):
                seen_at_finish.append(list(remote.log))
    assert run.result.output == "root done"
    assert remote.resolved == [run.run_id]
    assert seen_at_finish == [["open", "closed"]]  # closed before RunFinished went out
    # The model saw the toolset's tool beside nothing else.
    assert [d.name for d in sub_model.params[0].tools] == ["echo"]
    sub_model.assert_complete()

    sub_model.reset()
    root_model.reset()
    result = await root.run("again")
    assert remote.resolved == [run.run_id, result.run_id]  # a new root run resolves anew
    assert remote.log == ["open", "closed", "open", "closed"]


async def test_toolset_tools_come_after_the_agents_own() -> None:
    @tool
    def own(n: int) -> int:
        """Double.

        Args:
            n: A number.
        """
        return 2 * n

    remote = Remote()
    model = ScriptedModel([tool_call("own", n=2), tool_call("echo", text="y"), text("done")])
    agent = Agent("A", model=model, tools=[own, remote])
    assert list(agent.tools) == ["own"] and agent.toolsets == (remote,)
    result = await agent.run("go")
    assert result.output == "done"
    assert [d.name for d in model.params[0].tools] == ["own", "echo"]
    assert [m.content for m in result.messages if isinstance(m, ToolResultMessage)] == [
        "4",
        "echo y",
    ]
    assert remote.log == ["open", "closed"]


async def test_resources_close_when_the_run_fails_or_is_cancelled() -> None:
    remote = Remote()
    failing = Agent(
        "A", model=ScriptedModel([tool_call("echo", text="y")]), tools=[remote]
    )  # the script runs out on the second turn: the run fails
    with pytest.raises(Exception, match="made request #2"):
        await failing.run("go")
    assert remote.log == ["open", "closed"]

    started = anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        started.set()
        await anyio.sleep_forever()
        return ""

    remote2 = Remote()
    agent = Agent(
        "B",
        model=ScriptedModel([[tool_call("echo", text="y"), tool_call("wait_forever")]]),
        tools=[remote2, wait_forever],
    )
    async with agent.stream("go") as run:
        await started.wait()
        assert remote2.log == ["open"]
        run.cancel()
        async for _ in run:
            pass
    assert run.result.status == "cancelled"
    assert remote2.log == ["open", "closed"]


async def test_resources_close_when_the_run_is_interrupted() -> None:
    @tool
    async def ask(ctx: ToolContext) -> str:
        """Ask the human."""
        return await ctx.ask("which one?")

    remote = Remote()
    agent = Agent(
        "A",
        model=ScriptedModel([[tool_call("echo", text="y"), tool_call("ask")], text("done")]),
        tools=[remote, ask],
    )
    result = await agent.run("go", store=MemoryStore(), on_unhandled="interrupt")
    assert result.status == "interrupted"
    assert remote.log == ["open", "closed"]


async def test_an_agent_run_inside_a_plain_tool_keeps_its_resources_for_its_call() -> None:
    remote = Remote()
    sub, _ = _sub(remote, steps=1)

    @tool
    async def delegate(query: str) -> str:
        """Ask the sub-agent (the root run cannot see it: no Tool.agent).

        Args:
            query: The task.
        """
        result = await sub.run(query)
        assert remote.log == ["open", "closed"]  # closed when that agent call ended
        return str(result.output)

    root = Agent(
        "Root",
        model=ScriptedModel([tool_call("delegate", query="q"), text("root done")]),
        tools=[delegate],
    )
    result = await root.run("go")
    assert result.output == "root done"
    assert remote.log == ["open", "closed"]


async def test_runs_without_toolsets_open_nothing() -> None:
    seen: list[Any] = []

    @tool
    async def look(ctx: ToolContext) -> str:
        """Look."""
        seen.append(ctx.coordinator.services)
        return "ok"

    plain = Agent("P", model=ScriptedModel([tool_call("look"), text("done")]), tools=[look])
    await plain.run("go")
    remote = Remote()
    with_toolset = Agent(
        "T", model=ScriptedModel([tool_call("look"), text("done")]), tools=[look, remote]
    )
    await with_toolset.run("go")
    assert seen[0] is None
    assert seen[1] is not None


async def test_two_tools_of_one_name_fail_the_agent_call() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What.
        """
        return text

    agent = Agent("A", model=ScriptedModel([text("never")]), tools=[echo, Remote()])
    with pytest.raises(UserError, match=r"two tools named 'echo' \(one from Remote\)"):
        await agent.run("go")


async def test_a_resource_that_cannot_open_fails_the_call_and_one_that_breaks_later_does_not() -> (
    None
):
    refused = Agent("A", model=ScriptedModel([text("never")]), tools=[Remote(refuse=True)])
    with pytest.raises(ConnectionRefusedError, match="nothing listens"):
        await refused.run("go")

    # A resource failing on its own once it is open does not end the run.
    breaking = Remote(fail=True)
    agent = Agent(
        "B", model=ScriptedModel([tool_call("echo", text="y"), text("done")]), tools=[breaking]
    )
    result = await agent.run("go")
    assert result.output == "done"


async def test_resources_of_an_ended_run_cannot_be_entered() -> None:
    kept: list[RunResources] = []

    class Keeper(Toolset):
        async def resolve(self, resources: RunResources) -> Sequence[Tool]:
            kept.append(resources)
            return []

    agent = Agent("A", model=ScriptedModel([text("done")]), tools=[Keeper()])
    await agent.run("go")
    with pytest.raises(RuntimeError, match="closed"):
        await kept[0].enter(Connection([]))


async def test_a_question_asked_from_a_toolset_tool_reaches_the_root_stream() -> None:
    class Asking(Toolset):
        async def resolve(self, resources: RunResources) -> Sequence[Tool]:
            @tool
            async def pick(ctx: ToolContext) -> str:
                """Pick."""
                return await ctx.ask("which?")

            return [pick]

    sub = Agent("Sub", model=ScriptedModel([tool_call("pick"), text("sub done")]), tools=[Asking()])
    root = Agent(
        "Root",
        model=ScriptedModel([tool_call("Sub", query="q"), text("done")]),
        tools=[sub.as_tool()],
    )
    async with root.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert event.agent_path == ("Root", "Sub")
                await run.respond(event.request_id, "this one")
    assert run.result.output == "done"
