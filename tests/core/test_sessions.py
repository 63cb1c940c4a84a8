"""A run given its session by an integration (``Agent.run/stream(session=...)``): the
public seam a workflow engine uses instead of a store."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, UserError, ask_user, tool
from hpd_agent.backend import Final, RequestBackend, Settlement
from hpd_agent.coordinator import Coordinator
from hpd_agent.events import RequestEvent
from hpd_agent.hooks import CallNext, Hook, ToolExecution, ToolOutcome
from hpd_agent.messages import Message
from hpd_agent.run import RunResult
from hpd_agent.sessions import RunSession
from hpd_agent.store import MemoryStore
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


class Requests:
    """A backend keeping requests its own way (an engine's request table): durable, so the
    coordinator writes every request and answer through it and waits on it."""

    durable = True

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.resolved: list[tuple[str, Final, Any]] = []
        self._ends: dict[str, tuple[anyio.Event, list[Settlement]]] = {}

    def alias_of(self, request_id: str) -> str | None:
        return None

    async def record_alias(self, request_id: str, first_id: str) -> None:
        return None

    async def open(
        self, event: RequestEvent, timeout: float | None
    ) -> tuple[Settlement | None, float | None]:
        self.opened.append(event.request_id)
        self._ends[event.request_id] = (anyio.Event(), [])
        return None, timeout

    async def wait(self, request_id: str) -> Settlement:
        done, outcome = self._ends[request_id]
        await done.wait()
        return outcome[0]

    async def resolve(self, request_id: str, status: Final, answer: Any) -> None:
        self.resolved.append((request_id, status, answer))
        done, outcome = self._ends[request_id]
        outcome.append(Settlement(status=status, answer=answer))
        done.set()

    async def settlement(self, request_id: str) -> tuple[RequestEvent, Settlement | None] | None:
        return None


class Calls(Hook):
    def __init__(self) -> None:
        self.tools: list[str] = []

    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        self.tools.append(execution.tool_name)
        return await call_next(execution)


class Session:
    """The smallest ``RunSession``: its hook sees every call first, its backend every
    request; it records how the run ended."""

    def __init__(self) -> None:
        self.requests = Requests()
        self.calls = Calls()
        self.held_while_running = False
        self.finished: RunResult | None = None
        self.attached: Coordinator | None = None

    prompt = "recorded prompt"
    history: list[Message] | None = None
    resumed = False

    @property
    def hooks(self) -> Sequence[Hook]:
        return (self.calls,)

    @property
    def backend(self) -> RequestBackend:
        return self.requests

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        self.held_while_running = True
        yield

    async def attach(self, coordinator: Coordinator) -> None:
        self.attached = coordinator

    async def finish(self, result: RunResult) -> None:
        self.finished = result

    def conversation(self, key: str) -> list[Message] | None:
        return None

    async def record_conversation(self, key: str, messages: list[Message]) -> None:
        return None


def _agent() -> Agent:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    return Agent(
        "A",
        model=ScriptedModel(
            [tool_call("add", a=1, b=2), tool_call("ask_user", question="ok?"), text("done")]
        ),
        tools=[add, ask_user()],
    )


async def test_a_given_session_brings_its_hooks_backend_and_bookkeeping() -> None:
    session = Session()
    _: RunSession = session  # the protocol, checked statically
    async with _agent().stream("ignored: the session has the prompt", session=session) as run:
        async for event in run:
            if event.kind == "run_started":
                assert event.prompt == "recorded prompt"
            if event.kind == "clarification_request":
                await run.respond(event.request_id, "yes")
    assert run.result.status == "completed"
    assert session.calls.tools == ["add", "ask_user"]
    [opened] = session.requests.opened
    assert session.requests.resolved == [(opened, "answered", "yes")]
    assert session.held_while_running and session.attached is not None
    assert session.finished is not None and session.finished.output == "done"


async def test_store_and_session_are_one_or_the_other() -> None:
    with pytest.raises(UserError, match="store= or session="):
        await _agent().run("go", store=MemoryStore(), session=Session())


async def test_interrupt_needs_a_durable_backend_from_the_session() -> None:
    session = Session()
    session.requests.durable = False  # type: ignore[misc]
    with pytest.raises(UserError, match="needs a store"):
        await _agent().run("go", session=session, on_unhandled="interrupt")
