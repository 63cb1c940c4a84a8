"""The bridge every adapter stands on (``hpd_agent.hosting``): a hosted run's events for any
number of readers (late ones too), its requests answered or ended, the run cancelled with a
reason, conversations turn after turn, one way to drive a run, how it ended (``Outcome``),
a permission's options; and a tiny adapter written with public names only."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from hpd_agent import (
    Agent,
    ConversationBusyError,
    Event,
    MaxTurnsExceededError,
    RequestEvent,
    RunFinished,
    RunLeasedError,
    RunResult,
    RunStarted,
    ask_user,
    tool,
)
from hpd_agent.hosting import (
    DECISIONS,
    PERMISSION_OPTIONS,
    STOPPED,
    HostedRun,
    MemoryHistories,
    Outcome,
    RunHost,
    ThreadHistories,
    decision_of,
    drive,
    outcome_of,
)
from hpd_agent.messages import Message, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.permissions import Approve, Deny
from hpd_agent.store import MemoryStore, RunRecord
from hpd_agent.testing import FunctionModel, Step, text, tool_call
from hpd_agent.text import error_text

pytestmark = pytest.mark.anyio


@tool(requires_approval=True)
async def deploy() -> str:
    """Deploy."""
    return "deployed"


def _reply(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return text(f"{last.name}: {last.content}")
    assert isinstance(last, UserMessage)
    if last.content == "ask":
        return tool_call("ask_user", question="Which database?")
    if last.content == "deploy":
        return tool_call("deploy")
    heard = [m.content for m in messages if isinstance(m, UserMessage)]
    return text("heard: " + " | ".join(heard))


def _agent() -> Agent:
    model = FunctionModel(_reply, chunk_size=4)
    return Agent("Echo", model=model, tools=[ask_user(), deploy])


@asynccontextmanager
async def _host(store: MemoryStore | None = None) -> AsyncGenerator[RunHost]:
    async with anyio.create_task_group() as tg:
        yield RunHost(_agent(), store, tg, HostedRun)
        tg.cancel_scope.cancel()


async def _read(hosted: HostedRun) -> list[Event]:
    return [event async for event in hosted.events()]


# -- the event tap ---------------------------------------------------------------------------
async def test_every_reader_gets_every_event_from_the_first() -> None:
    async with _host() as host:
        hosted = await host.start("ask")
        early: list[list[Event]] = []
        late_while_waiting: list[Event] = []
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                early.append(await _read(hosted))

            tg.start_soon(read)
            tg.start_soon(read)
            pending = await hosted.wait_settled()
            assert isinstance(pending, list)
            late_while_waiting += [e async for e in _until_request(hosted)]
            assert await hosted.answer_request(pending[0].request_id, lambda: "SQLite") is None
        late = await _read(hosted)  # after the end: all of it, then it stops
    assert early[0] == early[1] == late
    assert isinstance(late[0], RunStarted) and isinstance(late[-1], RunFinished)
    assert late_while_waiting == late[: len(late_while_waiting)]
    assert hosted.outcome.status == "completed"
    assert hosted.outcome.output == "ask_user: SQLite"


async def _until_request(hosted: HostedRun) -> AsyncIterator[Event]:
    async for event in hosted.events():
        yield event
        if isinstance(event, RequestEvent):
            return


async def test_an_answer_refused_says_why_and_the_question_stays() -> None:
    async with _host() as host:
        hosted = await host.start("ask")
        pending = await hosted.wait_settled()
        assert isinstance(pending, list)
        rid = pending[0].request_id

        def unreadable() -> Any:
            raise ValueError("the form has no answer")

        assert await hosted.answer_request(rid, unreadable) == "the form has no answer"
        assert await hosted.wait_settled() == pending  # still asked
        await hosted.cancel_request(rid)
        await hosted.cancel_request(rid)  # ended already: left as it is
        outcome = await hosted.wait_settled()
    assert isinstance(outcome, Outcome) and outcome.status == "completed"
    assert outcome.output is not None and outcome.output.startswith("ask_user: ")


async def test_a_cancel_keeps_the_first_reason() -> None:
    async with _host() as host:
        hosted = await host.start("ask")
        await hosted.wait_settled()
        hosted.cancel_nowait("the client went away")
        outcome = await hosted.cancel("a second reason")
    assert outcome.status == "cancelled" and outcome.error is None
    assert hosted.reason == "the client went away"
    events = await _read(hosted)
    assert isinstance(events[-1], RunFinished) and events[-1].status == "cancelled"


# -- conversations ---------------------------------------------------------------------------
async def test_a_conversation_continues_its_completed_turns() -> None:
    async with _host() as host:

        async def turn(prompt: str, conversation: str) -> Outcome:
            hosted = await host.start(prompt, conversation=conversation)
            settled = await hosted.wait_settled()
            assert isinstance(settled, Outcome)
            return settled

        assert (await turn("one", "a")).output == "heard: one"
        assert (await turn("two", "a")).output == "heard: one | two"
        assert (await turn("three", "b")).output == "heard: three"  # its own history
        asking = await host.start("ask", conversation="a")
        assert host.turn("a") is asking
        with pytest.raises(ConversationBusyError):
            await host.start("four", conversation="a")
        await asking.wait_settled()
        assert (await asking.cancel("stop")).status == "cancelled"
        assert host.turn("a") is None
        # The cancelled turn left the history as it was.
        assert (await turn("four", "a")).output == "heard: one | two | four"


class _Tables:
    """Thread tables as a store declares them (``ThreadTables``: rows upserted, an item
    index written once keeps its text), for a store that does not offer them here."""

    def __init__(self) -> None:
        self.threads: dict[tuple[str, str], tuple[dict[str, str], dict[int, str]]] = {}

    async def write_thread(
        self,
        space: str,
        thread_id: str,
        *,
        rows: Mapping[str, str] | None = None,
        items: Sequence[str] = (),
        first: int = 0,
    ) -> None:
        kept_rows, kept_items = self.threads.setdefault((space, thread_id), ({}, {}))
        kept_rows.update(rows or {})
        for i, item in enumerate(items):
            kept_items.setdefault(first + i, item)

    async def read_thread(self, space: str, thread_id: str) -> Any:
        found = self.threads.get((space, thread_id))
        if found is None:
            return None
        rows, items = found
        return SimpleNamespace(rows=dict(rows), items=[items[i] for i in sorted(items)])


def _tables() -> Any:
    try:
        from hpd_agent.store import MemoryThreadTables  # type: ignore[attr-defined]
    except ImportError:
        return _Tables()
    return MemoryThreadTables()  # pyright: ignore[reportUnknownVariableType]


class _SlowHistories(MemoryHistories):
    """Histories whose reads wait until two are under way (as a store's read would)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.both = anyio.Event()

    async def history(self, conversation: str) -> list[Message]:
        self.reads += 1
        if self.reads == 2:
            self.both.set()
        await self.both.wait()
        return await super().history(conversation)


async def test_two_starts_of_one_conversation_at_once_run_one_turn() -> None:
    """Both pass the "is a turn running" check before either has read the history: the
    second to finish reading is refused (two turns would each extend the same history)."""
    got: list[tuple[str, HostedRun | ConversationBusyError]] = []
    async with anyio.create_task_group() as tg:
        host = RunHost(_agent(), None, tg, HostedRun, histories=_SlowHistories())

        async def start(prompt: str) -> None:
            try:
                got.append((prompt, await host.start(prompt, conversation="a")))
            except ConversationBusyError as e:
                got.append((prompt, e))

        async with anyio.create_task_group() as starting:
            starting.start_soon(start, "one")
            starting.start_soon(start, "two")
        # which one wins is the scheduler's choice (asyncio and trio differ): exactly one does
        assert [type(g) for _, g in got] == [HostedRun, ConversationBusyError]
        prompt, first = got[0]
        assert isinstance(first, HostedRun)
        settled = await first.wait_settled()
        assert isinstance(settled, Outcome) and settled.output == f"heard: {prompt}"
        await first.ended.wait()
        after = await (await host.start("three", conversation="a")).wait_settled()
        assert isinstance(after, Outcome) and after.output == f"heard: {prompt} | three"
        tg.cancel_scope.cancel()


async def test_memory_histories_keep_the_conversations_used_last() -> None:
    """With a ``limit`` the conversation unused longest is forgotten (a fresh start, not an
    error); reading one counts as using it. Without one, all are kept."""
    said = [UserMessage(content="hello")]
    bounded = MemoryHistories(limit=2)
    await bounded.keep("a", said)
    await bounded.keep("b", said)
    assert await bounded.history("a") == said  # "a" used: "b" is now the oldest
    await bounded.keep("c", said)
    assert [await bounded.history(c) for c in "abc"] == [said, [], said]
    unbounded = MemoryHistories()
    for c in "abcd":
        await unbounded.keep(c, said)
    assert [await unbounded.history(c) for c in "abcd"] == [said] * 4


async def test_conversations_kept_in_thread_tables_outlive_the_server() -> None:
    tables = _tables()
    async with anyio.create_task_group() as tg:
        host = RunHost(_agent(), None, tg, HostedRun, histories=ThreadHistories(tables))
        for prompt in ("one", "two"):
            hosted = await host.start(prompt, conversation="a")
            await hosted.ended.wait()
        tg.cancel_scope.cancel()
    outputs: list[str | None] = []
    async with anyio.create_task_group() as tg:  # a restarted server, the same tables
        host = RunHost(_agent(), None, tg, HostedRun, histories=ThreadHistories(tables))
        third = await host.start("three", conversation="a")
        await third.ended.wait()
        outputs.append(third.outcome.output)
        tg.cancel_scope.cancel()
    assert outputs == ["heard: one | two | three"]
    history = await ThreadHistories(tables).history("a")
    assert [m.content for m in history if isinstance(m, UserMessage)] == ["one", "two", "three"]
    assert await ThreadHistories(tables).history("b") == []


async def test_a_store_with_thread_tables_keeps_its_servers_conversations() -> None:
    store = MemoryStore()
    if getattr(store.capabilities(), "threads", None) is None:
        pytest.skip("this store declares no thread tables")
    outputs: list[str | None] = []
    for prompt in ("one", "two"):  # each turn on a server of its own: the store remembers
        async with _host(store) as host:
            assert isinstance(host.histories, ThreadHistories)
            hosted = await host.start(prompt, conversation="a")
            await hosted.ended.wait()
            outputs.append(hosted.outcome.output)
    assert outputs == ["heard: one", "heard: one | two"]


# -- driving a run -----------------------------------------------------------------------------
class _Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.writes: list[int] = []
        self.wrote = anyio.Event()
        self.closed: list[tuple[Outcome, Exception | None]] = []

    def take(self, event: Event) -> Any:
        self.events.append(event)
        if isinstance(event, RequestEvent):
            return self._write(len(self.events))
        return None

    async def _write(self, at: int) -> None:
        await anyio.lowlevel.checkpoint()
        self.writes.append(at)
        self.wrote.set()

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        await anyio.lowlevel.checkpoint()  # shielded: it runs even while cancelled
        self.closed.append((outcome, raised))


async def test_drive_hands_each_event_then_the_end_even_on_shutdown() -> None:
    sink = _Sink()
    run = _agent().stream("ask", store=MemoryStore())
    async with anyio.create_task_group() as tg:
        tg.start_soon(drive, run, sink)
        await sink.wrote.wait()
        tg.cancel_scope.cancel()  # the server shuts down while the question waits
    (at,) = sink.writes
    assert isinstance(sink.events[at - 1], RequestEvent)
    assert sink.closed == [(STOPPED, None)]


async def test_drive_without_listening_ends_interrupted() -> None:
    sink = _Sink()
    await drive(_agent().stream("ask", store=MemoryStore(), on_unhandled="interrupt"), sink,
                listening=False)  # fmt: skip
    ((outcome, raised),) = sink.closed
    assert outcome.status == "interrupted" and raised is None
    assert outcome.result is not None and len(outcome.result.pending) == 1


# -- how a run ended -------------------------------------------------------------------------
RUN_ID = "run_" + "ab" * 16


def test_a_failure_reads_the_same_from_the_run_and_from_its_record() -> None:
    error = MaxTurnsExceededError(f"run {RUN_ID} went past 3 turns")
    live = outcome_of(RunResult(run_id=RUN_ID, status="failed", error=error))
    stored = outcome_of(
        RunRecord(
            run_id=RUN_ID, agent_name="A", prompt="p", status="failed", error=error_text(error)
        )
    )
    assert live.error == stored.error == "MaxTurnsExceededError: run the run went past 3 turns"
    assert live.error_type == stored.error_type == "MaxTurnsExceededError"
    assert live.result is not None and stored.result is None


def test_no_lease_holder_reaches_a_client() -> None:
    leased = RunLeasedError(
        f"run {RUN_ID!r} held by vm:9296:x", run_id=RUN_ID, holder="vm:9296:x", expires_at=1.0
    )
    for outcome in (
        outcome_of(RunResult(run_id=RUN_ID, status="failed", error=leased)),
        outcome_of(
            RunRecord(
                run_id=RUN_ID, agent_name="A", prompt="p", status="failed", error=error_text(leased)
            )
        ),
        Outcome.failed(leased, RUN_ID),
    ):
        assert outcome.error is not None and "another process" in outcome.error
        assert "9296" not in outcome.error and RUN_ID not in outcome.error


def test_completed_rejected_and_structured_outcomes() -> None:
    done = outcome_of(RunResult(run_id=RUN_ID, status="completed", output={"n": 1}))
    assert (done.status, done.output, done.error) == ("completed", '{"n":1}', None)
    rejected = outcome_of(RunResult(run_id=RUN_ID, status="rejected"))
    assert rejected.error == "the user rejected the proposed plan"
    record = RunRecord(run_id=RUN_ID, agent_name="A", prompt="p", status="completed", output="x")
    assert outcome_of(record) == Outcome("completed", "x")


def test_a_stored_failure_reaches_an_mcp_client_without_the_run_id() -> None:
    pytest.importorskip("mcp")
    from hpd_agent.mcp._server_results import record_result

    record = RunRecord(
        run_id=RUN_ID, agent_name="A", prompt="p", status="failed",
        error=f"UserError: no run {RUN_ID!r} in the store",
    )  # fmt: skip
    result = record_result(record)
    assert result.is_error and RUN_ID not in result.content[0].text  # type: ignore[union-attr]


def test_a_permission_has_three_options() -> None:
    assert DECISIONS == ("approve_once", "approve_run", "deny")
    assert [o.acp_kind for o in PERMISSION_OPTIONS] == ["allow_once", "allow_always", "reject_once"]
    assert decision_of("approve_once") == Approve(scope="once")
    assert decision_of(" Approve_Run ") == Approve(scope="run")
    assert decision_of("deny", by="the ACP client") == Deny(reason="denied by the ACP client")
    assert decision_of("maybe") is None and decision_of(3) is None


# -- a tiny adapter, public names only ---------------------------------------------------------
ADAPTER = Path(__file__).with_name("line_adapter.py")


def test_the_tiny_adapter_imports_public_names_only() -> None:
    found: list[str] = []
    for node in ast.walk(ast.parse(ADAPTER.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hpd_agent"):
            module = node.module or ""
            if any(part.startswith("_") for part in module.split(".")):
                found.append(module)
            found += [a.name for a in node.names if a.name.startswith("_")]
    assert found == []


class _Client:
    def __init__(self, send: ObjectSendStream[str], lines: ObjectReceiveStream[str]) -> None:
        self.send_stream = send
        self.lines = lines

    async def send(self, **message: Any) -> None:
        await self.send_stream.send(json.dumps(message))

    async def until(self, key: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The next line holding ``key``, and the lines before it."""
        before: list[dict[str, Any]] = []
        async for line in self.lines:
            message: dict[str, Any] = json.loads(line)
            if key in message:
                return message, before
            before.append(message)
        raise AssertionError(f"the server closed before a {key!r} line")


@asynccontextmanager
async def _served() -> AsyncGenerator[_Client]:
    from line_adapter import LineServer

    to_server, server_in = anyio.create_memory_object_stream[str](100)
    server_out, from_server = anyio.create_memory_object_stream[str](100)
    async with anyio.create_task_group() as tg:
        tg.start_soon(LineServer(_agent(), server_out).serve, server_in)
        yield _Client(to_server, from_server)
        await to_server.aclose()


async def test_a_tiny_adapter_over_run_host() -> None:
    async with _served() as client:
        await client.send(prompt="ask", conversation="c")
        question, _ = await client.until("question")
        assert question["message"] == "Echo: Which database?"
        assert question["schema"]["required"] == ["answer"]
        await client.send(answer=question["question"], content={})
        refused, _ = await client.until("refused")
        assert refused == {"refused": "the form has no answer", "question": question["question"]}
        await client.send(answer=question["question"], content={"answer": "SQLite"})
        end, streamed = await client.until("end")
        assert end == {"end": "completed", "output": "ask_user: SQLite", "error": None}
        assert "".join(m["text"] for m in streamed) == "ask_user: SQLite"

        await client.send(prompt="next", conversation="c")  # the conversation goes on
        end, _ = await client.until("end")
        assert end["output"] == "heard: ask | next"

        await client.send(prompt="deploy", conversation="d")
        permission, _ = await client.until("question")
        assert permission["schema"]["properties"]["decision"]["enum"] == list(DECISIONS)
        await client.send(prompt="again", conversation="d")
        assert (await client.until("busy"))[0] == {"busy": "d"}
        await client.send(answer=permission["question"], content={"decision": "deny"})
        end, _ = await client.until("end")
        assert end["output"].startswith("deploy: ") and "denied by the line client" in end["output"]

        await client.send(prompt="ask", conversation="e")
        await client.until("question")
        await client.send(cancel="e")
        end, _ = await client.until("end")
        assert end == {"end": "cancelled", "output": None, "error": None}
