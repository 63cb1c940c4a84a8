"""A parked call is never seen as finished (issue: an interrupted batch yielded ``None``).

Under ``on_unhandled="interrupt"`` with a SQLite store, a root's first turn runs a quick
side-effect tool next to a depth-3 agent whose leaf asks. The interrupt must end the run at
once: no result for the parked call, no second model turn in the first run, and a resume
that replays to the same calls, the side effect run once. Run many times: the race that
broke it depended on which task anyio woke first.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio

RUNS = 50


def _strict(reply: Any) -> Any:
    """A model function that, like LiteLLMModel, reads every message before it awaits."""

    def fn(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        for m in messages:
            if m is None or not hasattr(m, "kind"):
                raise AssertionError(f"a non-message reached the model: {m!r}")
        return reply(messages, params)

    return fn


def _agents(workdir: Path, *, async_model: bool, blocking: bool) -> Agent:
    effects = workdir / "effects.txt"

    @tool
    async def record(note: str) -> str:
        """Append a note durably.

        Args:
            note: What to record.
        """
        if blocking:
            # A blocking sibling: the side effect happens without awaiting anything.
            with effects.open("a") as f:
                f.write(note + "\n")
                f.flush()
                os.fsync(f.fileno())
        else:

            def write() -> None:
                with effects.open("a") as f:
                    f.write(note + "\n")
                    f.flush()
                    os.fsync(f.fileno())

            await anyio.to_thread.run_sync(write)
        return "recorded"

    def leaf_reply(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return text(f"leaf done: {last.content}")
        return tool_call("ask_user", question="Which colour?")

    def middle_reply(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return text(f"middle done: {last.content}")
        return tool_call("Leaf", query="ask the human")

    def root_reply(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if results:
            return text("root done: " + json.dumps(sorted(r.content for r in results)))
        return [tool_call("record", note="effect"), tool_call("Middle", query="go deep")]

    def model(reply: Any) -> FunctionModel:
        fn = _strict(reply)
        if not async_model:
            return FunctionModel(fn)

        async def afn(messages: Sequence[Message], params: ModelRequestParams) -> Any:
            result = fn(messages, params)
            await anyio.lowlevel.checkpoint()
            return result

        return FunctionModel(afn)

    leaf = Agent("Leaf", model=model(leaf_reply), tools=[ask_user()])
    middle = Agent("Middle", model=model(middle_reply), tools=[leaf.as_tool()])
    return Agent("Root", model=model(root_reply), tools=[record, middle.as_tool()])


def _model_turns(events: list[Any]) -> int:
    return sum(1 for e in events if getattr(e, "kind", "") == "agent_started")


@pytest.mark.parametrize(
    ("async_model", "blocking"), [(False, False), (True, False), (False, True)]
)
async def test_an_interrupted_batch_never_yields_a_result_for_the_parked_call(
    tmp_path: Path, async_model: bool, blocking: bool
) -> None:
    for i in range(RUNS):
        workdir = tmp_path / f"run{i}"
        workdir.mkdir()
        root = _agents(workdir, async_model=async_model, blocking=blocking)
        store = SQLiteStore(workdir / "runs.db")
        try:
            first = await root.run("go", store=store, on_unhandled="interrupt")
            assert first.status == "interrupted", (i, first.status, first.error)
            (pending,) = first.pending
            assert pending.agent_path == ("Root", "Middle", "Leaf")
            # The root's model was asked once: the interrupted turn made no second call.
            journal = await store.journal(first.run_id)
            root_turns = [k for k in journal if re.fullmatch(rf"{first.run_id}@\d+", k)]
            assert root_turns == [f"{first.run_id}@0"], (i, sorted(journal))
            resumed = await root.resume(
                first.run_id, store=store, answers={pending.request_id: "blue"}
            )
            assert resumed.status == "completed", (i, resumed.error)
            assert resumed.output is not None and "middle done: leaf done: blue" in resumed.output
            assert (workdir / "effects.txt").read_text() == "effect\n", i
        finally:
            await store.aclose()


async def test_an_interrupt_waits_for_a_branch_still_working_its_way_to_a_question(
    tmp_path: Path,
) -> None:
    # The root asks at once while its other call goes two agents deep before asking too:
    # the run must not stop when the model calls of the deep branch hand over (they are
    # work in progress), but only once both questions wait, so both are pending together.
    def asks(question: str) -> Any:
        def reply(messages: Sequence[Message], params: ModelRequestParams) -> Any:
            last = messages[-1]
            if isinstance(last, ToolResultMessage):
                return text(f"got {last.content}")
            return tool_call("ask_user", question=question)

        return reply

    def delegates(to: str) -> Any:
        def reply(messages: Sequence[Message], params: ModelRequestParams) -> Any:
            last = messages[-1]
            if isinstance(last, ToolResultMessage):
                return text(f"{to} said {last.content}")
            return tool_call(to, query="go")

        return reply

    def root(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        if isinstance(messages[-1], ToolResultMessage):
            return text("all done")
        return [tool_call("ask_user", question="Root question?"), tool_call("Manager", query="go")]

    specialist = Agent(
        "Specialist", model=FunctionModel(asks("Deep question?")), tools=[ask_user()]
    )
    manager = Agent(
        "Manager", model=FunctionModel(delegates("Specialist")), tools=[specialist.as_tool()]
    )
    agent = Agent("Root", model=FunctionModel(root), tools=[ask_user(), manager.as_tool()])
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        first = await agent.run("go", store=store, on_unhandled="interrupt")
        assert first.status == "interrupted"
        assert sorted(p.agent_path for p in first.pending) == [
            ("Root",),
            ("Root", "Manager", "Specialist"),
        ]
    finally:
        await store.aclose()
