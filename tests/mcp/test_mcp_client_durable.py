"""Durable runs with MCP tools (a real SQLite file): an MCP call's result is journaled like
any tool's; a run interrupted while a server's question waits resumes with the answer. On
2026-07-28 the journaled ``requestState`` is retried (the server's round before the question
ran once, also across a server restart when the server keeps its sealing key); on 2025-11-25
the call is made again (at least once). Server side effects and model calls are counted."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_client_harness import Target, stdio_children, target

from hpd_agent import Agent, ClarificationRequest, Decline, ToolContext, tool
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import FunctionModel, text, tool_call

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def asking_agent(server: Target) -> tuple[Agent, FunctionModel]:
    """One turn calling the server's ``ask``, one answering with what it returned."""

    def step(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        done = _results(messages)
        if not done:
            return tool_call("ask", _id="call_ask")
        return text(f"got: {done[0].content}")

    model = FunctionModel(step)
    return Agent("Asker", model=model, tools=[server.tools()]), model


async def interrupted(agent: Agent, store: SQLiteStore) -> tuple[str, str]:
    """Run until the server's question is left pending; (run id, request id)."""
    result = await agent.run("go", store=store, on_unhandled="interrupt")
    assert result.status == "interrupted"
    [pending] = result.pending
    assert isinstance(pending, ClarificationRequest)
    assert pending.data is not None and pending.data["name"] == "mcp.elicitation"
    return result.run_id, pending.request_id


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_resume_retries_with_the_journaled_request_state(
    transport: str, tmp_path: Path
) -> None:
    with target("low", transport, "auto", tmp_path) as server:
        agent, model = asking_agent(server)
        store = SQLiteStore(tmp_path / "runs.db")
        run_id, request_id = await interrupted(agent, store)
        assert server.effects() == ["ask:start"]
        assert model.calls == 1
        assert stdio_children() == []  # the connection closed with the interrupted run

        # Resumed by a new store object (as another process would), with a new connection
        # (for stdio a new server process, which accepts the state: it keeps the key).
        store2 = SQLiteStore(tmp_path / "runs.db")
        result = await agent.resume(run_id, store=store2, answers={request_id: {"name": "Ada"}})
    assert result.status == "completed"
    assert result.output == 'got: ask accept {"name": "Ada"}'
    # The round before the question ran once, the retry once; the model's first turn was
    # replayed from the journal.
    assert server.effects() == ["ask:start", 'ask:done accept {"name": "Ada"}']
    assert model.calls == 2


async def test_a_decline_given_to_the_resume_reaches_the_server(tmp_path: Path) -> None:
    with target("low", "stdio", "auto", tmp_path) as server:
        agent, model = asking_agent(server)
        store = SQLiteStore(tmp_path / "runs.db")
        run_id, request_id = await interrupted(agent, store)
        result = await agent.resume(run_id, store=store, answers={request_id: Decline()})
    assert result.output == "got: ask decline"
    assert server.effects() == ["ask:start", "ask:done decline"]
    assert model.calls == 2


async def test_a_server_without_its_key_refuses_the_journaled_state(tmp_path: Path) -> None:
    # Why the server must keep its sealing key: one that made a new one on restart
    # (the SDK's default) refuses the retry, and the model reads that as the call's error.
    with target("low", "stdio", "auto", tmp_path, ephemeral=True) as server:
        agent, _ = asking_agent(server)
        store = SQLiteStore(tmp_path / "runs.db")
        run_id, request_id = await interrupted(agent, store)
        result = await agent.resume(run_id, store=store, answers={request_id: {"name": "Ada"}})
    assert result.status == "completed"
    [message] = _results(result.messages)
    assert message.is_error
    assert "Invalid or expired requestState" in message.content
    assert server.effects() == ["ask:start"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2025_resume_makes_the_call_again_and_asks_nobody_twice(
    transport: str, tmp_path: Path
) -> None:
    with target("low", transport, "legacy", tmp_path) as server:
        agent, model = asking_agent(server)
        store = SQLiteStore(tmp_path / "runs.db")
        run_id, request_id = await interrupted(agent, store)
        assert server.effects() == ["ask:start"]
        asked_again: list[ClarificationRequest] = []
        async with agent.resume_stream(
            run_id, store=store, answers={request_id: {"name": "Ada"}}
        ) as run:
            async for event in run:
                if isinstance(event, ClarificationRequest) and not event.replayed:
                    asked_again.append(event)
    assert run.result.output == 'got: ask accept {"name": "Ada"}'
    # At least once: the server's part before its question ran again; the question got the
    # same id, so the stored answer was given back at once: the human was not asked again.
    assert server.effects() == ["ask:start", "ask:start", 'ask:done accept {"name": "Ada"}']
    assert asked_again == []
    assert model.calls == 2


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_finished_mcp_call_is_journaled_and_not_made_again(
    mode: str, tmp_path: Path
) -> None:
    @tool
    async def confirm(ctx: ToolContext) -> str:
        """Ask the human to confirm."""
        return await ctx.ask("Shall I go on?")

    def step(messages: Sequence[Message], params: ModelRequestParams) -> Any:
        done = _results(messages)
        if not done:
            return tool_call("add", a=2, b=2)
        if len(done) == 1:
            return tool_call("confirm")
        return text(f"{done[0].content}, {done[1].content}")

    with target("low", "stdio", mode, tmp_path) as server:
        model = FunctionModel(step)
        agent = Agent("Adder", model=model, tools=[server.tools(), confirm])
        store = SQLiteStore(tmp_path / "runs.db")
        first = await agent.run("go", store=store, on_unhandled="interrupt")
        assert first.status == "interrupted"
        [pending] = first.pending
        result = await agent.resume(first.run_id, store=store, answers={pending.request_id: "yes"})
    assert result.output == "4, yes"
    assert server.effects() == ["add"]  # exactly once: the resume replayed its result
    assert model.calls == 3


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_answer_or_a_decline_from_another_process_reaches_the_server(
    mode: str, tmp_path: Path
) -> None:
    # The run waits (a store, nobody answering here); `hpd-agent answer` in another
    # process answers through the store and the waiting call goes on.
    db = tmp_path / "runs.db"
    outputs: list[str] = []
    with target("low", "stdio", mode, tmp_path) as server:
        for cli_args in (['{"name": "Ada"}', "--json"], ["--decline"]):
            agent, _ = asking_agent(server)
            async with agent.stream("go", store=SQLiteStore(db)) as run:
                async for event in run:
                    if isinstance(event, ClarificationRequest):
                        done = await anyio.run_process(
                            [
                                sys.executable,
                                "-m",
                                "hpd_agent.cli",
                                "answer",
                                event.request_id,
                                *cli_args,
                                "--db",
                                str(db),
                            ],
                            check=False,
                        )
                        assert done.returncode == 0, done.stderr
            outputs.append(str(run.result.output))
    assert outputs == ['got: ask accept {"name": "Ada"}', "got: ask decline"]
    assert server.effects() == [
        "ask:start",
        'ask:done accept {"name": "Ada"}',
        "ask:start",
        "ask:done decline",
    ]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_expired_question_cancels_the_elicitation(mode: str, tmp_path: Path) -> None:
    with target("low", "stdio", mode, tmp_path) as server:
        agent, _ = asking_agent(server)
        store = SQLiteStore(tmp_path / "runs.db")
        run_id, _ = await interrupted(agent, store)
        # Resumed with max_age=0: the pending question is expired first; the server is
        # told "cancel" (the retry on 2026-07-28, the reply on 2025-11-25).
        result = await agent.resume(run_id, store=store, max_age=0)
    assert result.output == "got: ask cancel"
    assert server.effects()[-1] == "ask:done cancel"
