"""Real a2a-sdk servers for the client tests: agent executors written here (not ours), served
by uvicorn on 127.0.0.1 in a thread of the test process.

The socket is bound and listening before uvicorn starts, so a client can connect at once:
the kernel queues the connection until the server accepts it (no readiness wait, no sleep).
``Recorder`` keeps every JSON-RPC call the server received (method and params), so a test
can count what the remote saw: queries, answers, ``GetTask``, ``CancelTask``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.helpers import get_data_parts, get_text_parts, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

QUERY_METHODS = ("SendMessage", "SendStreamingMessage", "message/send", "message/stream")


# -- what the server saw ---------------------------------------------------------------------
class Recorder:
    """ASGI middleware keeping each JSON-RPC request's method and params."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()

        async def recorded() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    self.calls.append(json.loads(bytes(body)))
            return message

        await self.app(scope, recorded, send)

    def methods(self) -> list[str]:
        return [c.get("method", "") for c in self.calls]

    def queries(self) -> list[dict[str, Any]]:
        """Messages that started a task (no task id): what the caller asked."""
        return [
            c["params"]["message"]
            for c in self.calls
            if c.get("method") in QUERY_METHODS and not c["params"]["message"].get("taskId")
        ]

    def answers(self) -> list[dict[str, Any]]:
        """Messages sent into an existing task."""
        return [
            c["params"]["message"]
            for c in self.calls
            if c.get("method") in QUERY_METHODS and c["params"]["message"].get("taskId")
        ]


# -- executors -------------------------------------------------------------------------------
def _answer_of(context: RequestContext) -> Any:
    message = context.message
    assert message is not None
    data = get_data_parts(message.parts)
    return data[0] if data else "\n".join(get_text_parts(message.parts))


def _metadata(context: RequestContext) -> dict[str, Any]:
    message = context.message
    assert message is not None
    return MessageToDict(message.metadata) if message.metadata.fields else {}


async def _updater(context: RequestContext, queue: EventQueue) -> tuple[TaskUpdater, bool]:
    """The task's updater; True when this execution starts the task (a new query)."""
    task = context.current_task
    new = task is None
    if task is None:
        assert context.message is not None
        task = new_task_from_user_message(context.message)
        await queue.enqueue_event(task)
    return TaskUpdater(queue, task.id, task.context_id), new


@dataclass
class Asking(AgentExecutor):
    """Asks ``questions`` one after the other in each task (each a text and its status
    metadata), then completes with an artifact: ``"<query> -> <answer>, <answer>"``."""

    questions: Sequence[tuple[str, dict[str, Any]]]
    executions: int = 0
    queries: list[str] = field(default_factory=list[str])
    answers: list[Any] = field(default_factory=list[Any])
    answer_metadata: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    tasks: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    cancels: list[str] = field(default_factory=list[str])
    _by_task: dict[str, list[Any]] = field(default_factory=dict[str, list[Any]])

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.executions += 1
        updater, new = await _updater(context, event_queue)
        self.tasks.append((updater.task_id, updater.context_id))
        mine = self._by_task.setdefault(updater.task_id, [])
        if new:
            self.queries.append(context.get_user_input())
            mine.append(context.get_user_input())
        else:
            self.answers.append(_answer_of(context))
            self.answer_metadata.append(_metadata(context))
            mine.append(_answer_of(context))
        await updater.start_work()
        asked = len(mine) - 1
        if asked < len(self.questions):
            text, metadata = self.questions[asked]
            message = updater.new_agent_message([new_text_part(text)], metadata=metadata)
            await updater.requires_input(message)
            return
        result = f"{mine[0]} -> {', '.join(map(str, mine[1:]))}"
        await updater.add_artifact([new_text_part(result)], name="result")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancels.append(context.task_id or "")


@dataclass
class Ending(AgentExecutor):
    """Ends every task at once in ``state`` ("completed", "failed", "canceled", "rejected"), saying
    ``text`` (as an artifact when completed with ``artifact``, else as the status message)."""

    state: str
    text: str
    artifact: bool = True

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater, _ = await _updater(context, event_queue)
        await updater.start_work()
        message = updater.new_agent_message([new_text_part(self.text)])
        if self.state == "completed":
            if self.artifact:
                await updater.add_artifact([new_text_part(self.text)], name="result")
                await updater.complete()
            else:
                await updater.complete(message)
        elif self.state == "failed":
            await updater.failed(message)
        elif self.state == "canceled":
            await updater.cancel(message)
        else:
            await updater.reject(message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass


@dataclass
class NeedsAuth(AgentExecutor):
    """Asks the caller to sign in at ``url`` (in-band: the next message goes on), then
    completes."""

    url: str | None
    executions: int = 0
    follow_ups: list[Any] = field(default_factory=list[Any])

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.executions += 1
        updater, new = await _updater(context, event_queue)
        if new:
            text = "Sign in first." + (f" Open {self.url}" if self.url else "")
            metadata = {"url": self.url} if self.url else None
            await updater.requires_auth(updater.new_agent_message([new_text_part(text)], metadata))
            return
        self.follow_ups.append(_answer_of(context))
        await updater.start_work()
        await updater.add_artifact([new_text_part("signed in, work done")], name="result")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass


@dataclass
class Pending:
    request_id: str
    question: str
    agent_path: list[str]
    options: list[str] | None = None


@dataclass
class ManyPending(AgentExecutor):
    """Keeps several questions pending at once, as hpd_agent's own server does: the status
    lists them all in metadata ``requests``; a message answers the one its metadata
    ``request_id`` names; done when every one is answered."""

    pending: list[Pending]
    answered: list[tuple[str, Any]] = field(default_factory=list[tuple[str, Any]])
    got_an_answer: threading.Event = field(default_factory=threading.Event)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater, new = await _updater(context, event_queue)
        await updater.start_work()
        if not new:
            request_id = _metadata(context).get("request_id")
            self.answered.append((str(request_id), _answer_of(context)))
            self.got_an_answer.set()
            self.pending = [p for p in self.pending if p.request_id != request_id]
        if self.pending:
            await updater.requires_input(self._status(updater))
            return
        text = ", ".join(f"{rid}={answer}" for rid, answer in self.answered)
        await updater.add_artifact([new_text_part(text)], name="result")
        await updater.complete()

    def _status(self, updater: TaskUpdater) -> Any:
        first = self.pending[0]
        requests = [
            {
                "request_id": p.request_id,
                "question": p.question,
                "question_kind": "text",
                "options": p.options,
                "schema": None,
                "agent_path": p.agent_path,
            }
            for p in self.pending
        ]
        metadata = {**requests[0], "requests": requests}
        del metadata["question"]
        return updater.new_agent_message([new_text_part(first.question)], metadata)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass


# -- serving ---------------------------------------------------------------------------------
@dataclass
class A2AServer:
    url: str
    recorder: Recorder
    executor: AgentExecutor


def agent_card(url: str, *, name: str, streaming: bool) -> AgentCard:
    return AgentCard(
        name=name,
        description=f"{name}: a test agent served with a2a-sdk.",
        version="1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="work", name="work", description="Does the work.", tags=["test"])],
    )


@contextlib.contextmanager
def a2a_server(
    executor: AgentExecutor, *, name: str = "Planner", streaming: bool = True
) -> Iterator[A2AServer]:
    """Serve ``executor`` with a2a-sdk's own request handler on 127.0.0.1 (a free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    card = agent_card(url, name=name, streaming=streaming)
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
    ]
    recorder = Recorder(Starlette(routes=routes, lifespan=lifespan))
    config = uvicorn.Config(recorder, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield A2AServer(url, recorder, executor)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def parts_text(parts: Sequence[Part]) -> str:
    return "\n".join(get_text_parts(parts))


@dataclass
class Scripted(AgentExecutor):
    """Waits, execution after execution, for the questions of ``rounds`` (each round's
    pending list, described as hpd_agent's own server does: metadata ``requests``), then
    completes. A question asked again in a later round with a ``refused`` text is an
    answer refused: the status message says so."""

    rounds: list[list[Pending]]
    refused: str = ""
    answered: list[tuple[str, Any]] = field(default_factory=list[tuple[str, Any]])
    _round: int = 0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater, new = await _updater(context, event_queue)
        await updater.start_work()
        if not new:
            request_id = _metadata(context).get("request_id")
            self.answered.append((str(request_id), _answer_of(context)))
        if self._round < len(self.rounds):
            pending = self.rounds[self._round]
            self._round += 1
            await updater.requires_input(self._status(updater, pending))
            return
        text = ", ".join(f"{rid}={answer}" for rid, answer in self.answered)
        await updater.add_artifact([new_text_part(text)], name="result")
        await updater.complete()

    def _status(self, updater: TaskUpdater, pending: list[Pending]) -> Any:
        requests = [
            {"request_id": p.request_id, "question": p.question, "agent_path": p.agent_path}
            for p in pending
        ]
        first = pending[0]
        text = f"{self.refused} {first.question}".strip() if self.answered else first.question
        metadata = {"request_id": first.request_id, "agent_path": first.agent_path}
        if len(pending) > 1:
            metadata["requests"] = requests
        return updater.new_agent_message([new_text_part(text)], metadata)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass
