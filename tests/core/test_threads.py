"""Sync tools in threads: timeouts and cancellation do not wait for a blocked thread, and the
store's I/O never queues behind tool threads (anyio's default limiter has 40 of them)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hpd_agent import Agent, ClarificationRequest, ToolCallFinished, ToolCallStarted, ask_user, tool
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

# Bounds for "promptly": far below how long a blocked tool would hold the run if it waited.
PROMPT = 20.0
BLOCKED_FOR = 120.0


class Gate:
    """Blocking tools wait here; the test opens it in teardown (threads cannot be killed)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Semaphore(0)
        self.returned = 0
        self._lock = threading.Lock()

    def block(self) -> str:
        self.entered.release()
        self.opened.wait(BLOCKED_FOR)
        with self._lock:
            self.returned += 1
        return "unblocked"

    async def wait_entered(self, n: int = 1) -> None:
        """Wait (bounded) until ``n`` more calls are blocked in their thread."""
        own = anyio.CapacityLimiter(1)  # the default threads may all be blocked tools
        for _ in range(n):
            got = await anyio.to_thread.run_sync(self.entered.acquire, True, PROMPT, limiter=own)
            assert got, "a blocking tool never started"


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.opened.set()


async def test_sync_tool_timeout_does_not_wait_for_the_thread(gate: Gate) -> None:
    @tool(timeout=0.2)
    def stuck() -> str:
        """Blocks until the test ends."""
        return gate.block()

    model = ScriptedModel([tool_call("stuck"), text("gave up")])
    with anyio.fail_after(PROMPT):
        result = await Agent("A", model=model, tools=[stuck]).run("go")
    assert result.output == "gave up"
    (answer,) = [m for m in model.requests[1] if getattr(m, "name", None) == "stuck"]
    assert answer.content == "Error: tool 'stuck' timed out after 0.2 seconds."  # type: ignore[attr-defined]
    # The thread is still blocked: the run ended without it.
    assert gate.returned == 0 and not gate.opened.is_set()


async def test_cancelling_a_run_does_not_wait_for_a_blocked_sync_tool(gate: Gate) -> None:
    @tool
    def stuck() -> str:
        """Blocks until the test ends."""
        return gate.block()

    agent = Agent("A", model=ScriptedModel([tool_call("stuck"), text("never")]), tools=[stuck])
    with anyio.fail_after(PROMPT):
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ToolCallStarted):
                    await gate.wait_entered()
                    run.cancel()
    assert run.result.status == "cancelled"
    assert gate.returned == 0


async def test_a_question_gets_through_while_45_sync_tools_block(
    gate: Gate, tmp_path: Path
) -> None:
    blockers = 45

    @tool
    def stuck(i: int) -> str:
        """Blocks until the question was answered.

        Args:
            i: Which one.
        """
        return gate.block()

    calls = [tool_call("stuck", i=i) for i in range(blockers)]
    model = ScriptedModel([[*calls, tool_call("ask_user", question="Go on?")], text("done")])
    agent = Agent("A", model=model, tools=[stuck, ask_user()])
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with anyio.fail_after(PROMPT * 2):
            async with agent.stream("go", store=store) as run:
                async for event in run:
                    if isinstance(event, ClarificationRequest):
                        # Every tool thread anyio lends by default (40) is taken by now.
                        await gate.wait_entered(40)
                        await run.respond(event.request_id, "yes")
                    elif isinstance(event, ToolCallFinished) and event.tool_name == "ask_user":
                        assert event.result == "yes"
                        # Stored and answered, all while every blocker still blocks.
                        (stored,) = await store.list_requests(status="answered")
                        assert stored.answer == "yes"
                        assert gate.returned == 0
                        gate.opened.set()
        assert run.result.output == "done"
        assert gate.returned == blockers
    finally:
        await store.aclose()
