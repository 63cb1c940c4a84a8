"""The journal is off the generic hook path: the core calls a durable run's ``RunJournal``
directly, so a run with a store and no hooks builds no ``ModelCall`` and no
``ToolExecution`` (a call object per model request and tool call, and a chain link, was
half of the durable run's Python machinery: issue 37). A hook still sees every call that
is really made, and none that is replayed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hpd_agent import Agent, tool
from hpd_agent._core import loop, model_request
from hpd_agent.hooks import CallNext, Hook, ModelCall, ToolExecution, ToolOutcome
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.sessions import RunJournal
from hpd_agent.store import MemoryStore, SQLiteStore, Store
from hpd_agent.store._session import StoreSession
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


def _turns(n: int) -> FunctionModel:
    def reply(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        if params.turn < n:
            return tool_call("noop")
        last = messages[-1]
        assert isinstance(last, ToolResultMessage)
        return text(f"done after {params.turn} turns")

    return FunctionModel(reply)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")


async def test_a_durable_run_without_hooks_builds_no_call_objects(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []

    def counting(real: Any, name: str) -> Any:
        def make(**fields: Any) -> Any:
            built.append(name)
            return real(**fields)

        return make

    monkeypatch.setattr(model_request, "ModelCall", counting(ModelCall, "ModelCall"))
    monkeypatch.setattr(loop, "ToolExecution", counting(ToolExecution, "ToolExecution"))
    agent = Agent("a", model=_turns(3), tools=[noop])
    try:
        result = await agent.run("go", store=store)
        assert result.output == "done after 3 turns"
        journal = await store.journal(result.run_id)
        assert sorted(e.kind for e in journal.values()) == ["model"] * 4 + ["tool"] * 3
    finally:
        await store.aclose()
    assert built == []  # before: a ModelCall per model request, a ToolExecution per call


async def test_the_session_brings_its_journal_not_a_hook(store: Store) -> None:
    try:
        session = await store.open_session(
            run_id="run_1", agent_name="a", prompt="go", history=None
        )
        assert isinstance(session, StoreSession)
        assert session.hooks == ()
        journal: RunJournal = session.journal  # the core's protocol, called directly
        assert journal.recorded_response("run_1@0") is None
    finally:
        await store.aclose()


async def test_a_hook_sees_calls_made_and_not_calls_replayed(tmp_path: Path) -> None:
    seen: list[str] = []

    class Watch(Hook):
        async def wrap_model_request(
            self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
        ) -> ModelResponse:
            seen.append(f"model {call.key.rsplit('@', 1)[1]}")
            return await call_next(call)

        async def wrap_tool_call(
            self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
        ) -> ToolOutcome:
            seen.append(f"tool {execution.call_path.rsplit('@', 1)[1].split(':')[0]}")
            return await call_next(execution)

    store = SQLiteStore(tmp_path / "runs.db")
    try:
        agent = Agent("a", model=_turns(2), tools=[noop])
        result = await agent.run("go", store=store, hooks=[Watch()])
        assert seen == ["model 0", "tool 0", "model 1", "tool 1", "model 2"]
        # Replayed from the journal: the model is not called, the tool does not run, and
        # the hook sees neither.
        seen.clear()
        again = await agent.resume(result.run_id, store=store, hooks=[Watch()])
        assert again.output == "done after 2 turns"
        assert seen == []
    finally:
        await store.aclose()
