"""When the journal writes what: a model response is in the store before anything outside
the framework acts on it (a tool's function, a question, the run's end), and what the
framework's own tools (agents, ``ask_user``) return waits to be written with the next fact,
in one transaction. Checked from a second store object on the same SQLite file or
PostgreSQL database, the way another process would see it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.events import ClarificationRequest, RunFinished
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.store import SQLiteStore, open_store
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio


def _last_result(messages: Sequence[Message]) -> ToolResultMessage | None:
    last = messages[-1]
    return last if isinstance(last, ToolResultMessage) else None


def _once(name: str, **arguments: Any) -> FunctionModel:
    """Call ``name`` once, then answer with what it returned."""

    def reply(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        last = _last_result(messages)
        if last is None:
            return tool_call(name, **arguments)
        return text(f"{params.agent_name}: {last.content}")

    return FunctionModel(reply)


async def _kinds(path: Path | str, run_id: str) -> dict[str, str]:
    """The run's journal as another process sees it: key -> kind."""
    other = open_store(path)
    try:
        return {k: e.kind for k, e in (await other.journal(run_id)).items()}
    finally:
        await other.aclose()


async def test_a_tool_runs_only_once_every_response_above_it_is_stored(location: str) -> None:
    path = location
    seen: dict[str, str] = {}

    @tool
    async def effect(ctx: ToolContext) -> str:
        """Do something outside."""
        seen.update(await _kinds(path, ctx.coordinator.run_id))
        return "done"

    worker = Agent("Worker", model=_once("effect"), tools=[effect])
    root = Agent("Root", model=_once("Worker", query="go"), tools=[worker.as_tool()])
    store = open_store(path)
    try:
        result = await root.run("go", store=store)
        after = await _kinds(path, result.run_id)
    finally:
        await store.aclose()
    assert result.output == "Root: Worker: done"
    # The root's response (calling Worker) and Worker's (calling effect) were both stored
    # before effect ran, though Worker's start acted on nothing outside.
    assert sorted(seen.values()) == ["model", "model"]
    # At the end: every response and every result, the last ones written with the record.
    assert sorted(after.values()) == ["model", "model", "model", "model", "tool", "tool"]
    record = await _record(path, result.run_id)
    assert record == "completed"


async def _pending(path: Path | str, run_id: str) -> list[str]:
    other = open_store(path)
    try:
        return [r.request_id for r in await other.list_requests(run_id=run_id)]
    finally:
        await other.aclose()


async def _record(path: Path | str, run_id: str) -> str | None:
    other = open_store(path)
    try:
        found = await other.get_run(run_id)
        return None if found is None else found.status
    finally:
        await other.aclose()


async def test_responses_are_stored_with_the_question_they_lead_to(location: str) -> None:
    path = location
    helper = Agent("Helper", model=_once("ask_user", question="Which colour?"), tools=[ask_user()])
    root = Agent("Root", model=_once("Helper", query="pick"), tools=[helper.as_tool()])
    store = open_store(path)
    seen: dict[str, str] = {}
    try:
        async with root.stream("go", store=store) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    seen = await _kinds(path, run.run_id)
                    assert await _pending(path, run.run_id) == [event.request_id]
                    await run.respond(event.request_id, "blue")
                elif isinstance(event, RunFinished):
                    assert event.status == "completed"
        after = await _kinds(path, run.run_id)
    finally:
        await store.aclose()
    assert run.result.output == "Root: Helper: blue"
    assert sorted(seen.values()) == ["model", "model"]  # the two responses that asked
    # ask_user's result and Helper's come back with the last response and the record.
    assert sorted(after.values()) == ["model", "model", "model", "model", "tool", "tool"]


async def test_responses_held_back_are_stored_when_the_run_is_interrupted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    helper = Agent("Helper", model=_once("ask_user", question="Which colour?"), tools=[ask_user()])
    root = Agent("Root", model=_once("Helper", query="pick"), tools=[helper.as_tool()])
    store = SQLiteStore(path)
    try:
        first = await root.run("go", store=store, on_unhandled="interrupt")
        assert first.status == "interrupted"
        assert sorted((await _kinds(path, first.run_id)).values()) == ["model", "model"]
        (pending,) = first.pending
        done = await root.resume(first.run_id, store=store, answers={pending.request_id: "red"})
    finally:
        await store.aclose()
    assert done.output == "Root: Helper: red"


async def test_a_response_held_back_when_the_process_dies_is_asked_again(tmp_path: Path) -> None:
    """An outer cancellation stands for a crash (nothing more is written): the root's
    response was held back while its nested agent thought, so the resume asks the root's
    model again; the tool with side effects ran once, after that."""
    path = tmp_path / "runs.db"
    calls = {"root": 0, "effect": 0}
    thinking = anyio.Event()
    go_on = anyio.Event()

    @tool
    async def effect() -> str:
        """Do something outside."""
        calls["effect"] += 1
        return "done"

    async def slow(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        if _last_result(messages) is None and not go_on.is_set():
            thinking.set()
            await anyio.sleep_forever()  # the process dies here (outer cancellation)
        return tool_call("effect") if _last_result(messages) is None else text("worked")

    def root_reply(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        calls["root"] += 1
        last = _last_result(messages)
        return tool_call("Worker", query="go") if last is None else text(f"root: {last.content}")

    worker = Agent("Worker", model=FunctionModel(slow), tools=[effect])
    root = Agent("Root", model=FunctionModel(root_reply), tools=[worker.as_tool()])
    store = SQLiteStore(path)
    run_id = "run_held"
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: root.run("go", store=store, run_id=run_id))
            await thinking.wait()
            tg.cancel_scope.cancel()
        assert await _kinds(path, run_id) == {}  # the root's response was held back
        go_on.set()
        done = await root.resume(run_id, store=store)
    finally:
        await store.aclose()
    assert done.output == "root: worked"
    assert calls == {"root": 3, "effect": 1}  # asked again once; the effect ran once


async def test_a_life_keeps_only_what_it_reads_again_and_replays_what_an_earlier_wrote(
    tmp_path: Path,
) -> None:
    """A model response or tool result written by this life is in the store but not held by
    the journal while the run goes on (each is looked up once, before it is made); an
    alias, a conversation and a step are kept; an earlier life's entries replay."""
    import gc
    import weakref

    from hpd_agent.store import JournalEntry, RunRecord
    from hpd_agent.store._journal import Journal

    class Value(dict[str, Any]):  # JSON data a weak reference can watch
        pass

    store = SQLiteStore(tmp_path / "runs.db")
    try:
        await store.put_run(RunRecord(run_id="run_1", agent_name="A", prompt="go", history=[]))
        journal = Journal(store, "run_1")
        written = [
            JournalEntry(key="a@1", kind="model", value=Value(text="hi", tool_calls=[])),
            JournalEntry(key="a!0:t", kind="tool", value=Value(result="ok", is_error=False)),
            JournalEntry(key="req_1", kind="alias", value="req_0"),
            JournalEntry(key="a!0:t!0:s", kind="step", value={"result": 1}),
        ]
        refs = [weakref.ref(e.value) for e in written[:2]]
        while written:
            await journal.put(written.pop(0))
        gc.collect()
        assert [r() for r in refs] == [None, None]  # not held: a run in flight stays small
        assert journal.entry("a@1", "model") is None and journal.entry("a!0:t", "tool") is None
        assert journal.entry("req_1", "alias") is not None
        assert journal.entry("a!0:t!0:s", "step") is not None
        assert not journal.replaying  # this life's own writes are not an earlier life's
        stored = await store.journal("run_1")
        assert {k: e.kind for k, e in stored.items()} == {
            "a@1": "model", "a!0:t": "tool", "req_1": "alias", "a!0:t!0:s": "step",
        }  # fmt: skip
        again = Journal(store, "run_1", stored)  # the next life
        assert again.replaying
        response = again.recorded_response("a@1")
        assert response is not None and response.text == "hi"
        assert again.entry("a!0:t", "tool") is not None
    finally:
        await store.aclose()
