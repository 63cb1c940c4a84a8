"""Our A2A server (``hpd_agent.a2a.create_app``) on 127.0.0.1 for the server tests, and the
a2a-sdk client calls they make against it.

Served by uvicorn in a thread of the test process; the socket is bound and listening
before uvicorn starts, so a client can connect at once (no readiness wait, no sleep).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from a2a.client import Client, ClientConfig, create_client
from a2a.helpers import new_data_part, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from starlette.authentication import SimpleUser
from starlette.types import ASGIApp, Receive, Scope, Send

from hpd_agent import Agent
from hpd_agent.a2a import create_app


@contextlib.contextmanager
def our_server(
    agent: Agent, *, wrap: Callable[[ASGIApp], ASGIApp] | None = None, **options: Any
) -> Iterator[str]:
    """Serve ``agent`` with ``create_app(agent, **options)`` (inside ``wrap`` when given);
    its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app: ASGIApp = create_app(agent, **options)
    config = uvicorn.Config(
        app if wrap is None else wrap(app), log_level="warning", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


async def sdk_client(
    url: str, *, streaming: bool = True, headers: dict[str, str] | None = None
) -> Client:
    http = httpx.AsyncClient(headers=headers) if headers else None
    config = ClientConfig(streaming=streaming, httpx_client=http)
    return await create_client(url, client_config=config)


def named_callers(app: ASGIApp) -> ASGIApp:
    """``app`` behind a stand-in for an authentication middleware: the caller named by the
    ``X-Test-User`` header is the request's user (what a2a-sdk files tasks by)."""

    async def named(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            name = dict(scope["headers"]).get(b"x-test-user", b"").decode()
            if name:
                scope["user"] = SimpleUser(name)
        await app(scope, receive, send)

    return named


@contextlib.asynccontextmanager
async def served_client(
    agent: Agent, *, streaming: bool = True, **options: Any
) -> AsyncIterator[Client]:
    """``agent`` served (``our_server(agent, **options)``) and an SDK client of it."""
    with our_server(agent, **options) as url:
        yield await sdk_client(url, streaming=streaming)


def user_message(
    answer: Any = "", *, task: Task | None = None, metadata: dict[str, Any] | None = None
) -> Message:
    part = new_text_part(answer) if isinstance(answer, str) else new_data_part(answer)
    return Message(
        role=Role.ROLE_USER,
        message_id=f"m-{id(part)}-{answer!r}"[:60],
        parts=[part],
        task_id=task.id if task else "",
        context_id=task.context_id if task else "",
        metadata=metadata,
    )


@dataclass
class Sent:
    """What one ``send_message`` gave: the states seen, and the task at the end."""

    states: list[int]
    task: Task


async def send(client: Client, message: Message) -> Sent:
    """Send ``message`` and read every event; the task as it stands then (``GetTask``)."""
    states: list[int] = []
    task_id = message.task_id
    async for event in client.send_message(SendMessageRequest(message=message)):
        if event.HasField("task"):
            task_id = event.task.id
            states.append(event.task.status.state)
        elif event.HasField("status_update"):
            task_id = event.status_update.task_id
            states.append(event.status_update.status.state)
    task = await client.get_task(GetTaskRequest(id=task_id))
    return Sent(states, task)


async def cancel(client: Client, task: Task) -> Task:
    return await client.cancel_task(CancelTaskRequest(id=task.id))


def status_metadata(task: Task) -> dict[str, Any]:
    message = task.status.message
    return MessageToDict(message.metadata) if message.metadata.fields else {}


def status_text(task: Task) -> str:
    return "\n".join(p.text for p in task.status.message.parts if p.HasField("text"))


def artifact_text(task: Task) -> str:
    return "\n".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text"))


INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED
CANCELED = TaskState.TASK_STATE_CANCELED
