"""What a remote question round trip costs through ``RemoteAgent`` over the a2a-sdk's own
client/server round trip.

One a2a-sdk server (its ``DefaultRequestHandler``, served by uvicorn on 127.0.0.1, in a
child process) runs an executor that asks one question, then completes with an artifact. Two ways
of driving the same round trip (query -> ``input-required`` -> answer in the same task ->
``completed``), interleaved so that both see the same noise:

- ``sdk``: the SDK's own client (``create_client``, streaming), made once and reused: send
  the query, read the stream to ``input-required``, send the answer in the same task and
  context, read the stream to ``completed``;
- ``hpd_agent``: an Orchestrator agent (a scripted model: one tool call, then text) whose
  tool is ``RemoteAgent(url).as_tool()``: the question reaches the run's stream as a
  ``ClarificationRequest``, is answered with ``run.respond``, the answer goes back, the
  tool's result reaches the model and the run ends. Everything the framework adds is in it:
  the run, two model turns, the tool call, the relayed question, a fresh HTTP client per
  call;
- ``hpd_agent_both``: the same Orchestrator run, its ``RemoteAgent`` calling an hpd_agent
  Planner served by ``hpd_agent.a2a.create_app`` (a second child process): an agent run on
  each side, the question asked by the remote agent's ``ask_user`` and carried back as
  ``input-required`` once the remote run has settled.

Each figure is the median over ``--repeat`` round trips (after ``--warmup``), in ms; the
ratios are hpd_agent / sdk and hpd_agent_both / sdk (target <= 1.2). The three compared
alternate, each going first in turn; then, for reference, the SDK's client reading each stream to its end (as a plain
``async for`` does: the server's stream ends some 40 ms after its last event here), over at
most 50 round trips.

Usage: ``python benchmarks/bench_a2a.py [--repeat 200] [--warmup 20]``; prints a table and
one ``RESULT_JSON {...}`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anyio  # noqa: E402
import uvicorn  # noqa: E402
from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.helpers import new_task_from_user_message, new_text_part  # noqa: E402
from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.events import EventQueue  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater  # noqa: E402
from a2a.types import (  # noqa: E402
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from starlette.applications import Starlette  # noqa: E402

from hpd_agent import Agent, ClarificationRequest, ask_user  # noqa: E402
from hpd_agent.a2a import RemoteAgent, create_app  # noqa: E402
from hpd_agent.testing import FunctionModel, text, tool_call  # noqa: E402


class AskOnce(AgentExecutor):
    """Asks "Which city?" in a new task; completes with the answer as an artifact."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            question = updater.new_agent_message([new_text_part("Which city?")])
            await updater.requires_input(question)
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part(f"to {context.get_user_input()}")])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass


def planner() -> Agent:
    """The hpd_agent Planner ``create_app`` serves: asks "Which city?", answers "to <city>"."""

    def reply(messages: list[Any], params: Any) -> Any:
        last = messages[-1]
        if last.kind == "tool":
            return text(f"to {last.content}")
        return tool_call("ask_user", question="Which city?")

    return Agent("Planner", model=FunctionModel(reply), tools=[ask_user()])


@contextmanager
def serve_ours() -> Iterator[str]:
    """``create_app(planner())`` on 127.0.0.1, in a thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(create_app(planner()), log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def sdk_app(url: str) -> Starlette:
    """The a2a-sdk's own minimal server at ``url``: its request handler running ``AskOnce``,
    tasks in memory."""
    card = AgentCard(
        name="Planner",
        description="Plans trips.",
        version="1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="plan", name="plan", description="Plans.", tags=["plan"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=AskOnce(), task_store=InMemoryTaskStore(), agent_card=card
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes, lifespan=lifespan)


@contextmanager
def serve() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(sdk_app(url), log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


async def sdk_round_trip(client: Any, *, stop: bool) -> str:
    """The SDK's own round trip: query, input-required, answer in the same task, completed.

    ``stop``: leave each stream at the state waited for (as ``RemoteAgent`` does), else
    read it to its end (as a plain ``async for`` does).
    """
    query = Message(role=Role.ROLE_USER, message_id=uuid4().hex, parts=[Part(text="plan a trip")])
    task_id = context_id = ""
    events = client.send_message(SendMessageRequest(message=query))
    async for event in events:
        if event.HasField("task"):
            task_id, context_id = event.task.id, event.task.context_id
        elif event.HasField("status_update"):
            assert event.status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            if stop:
                break
    await events.aclose()
    answer = Message(
        role=Role.ROLE_USER,
        message_id=uuid4().hex,
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text="Rome")],
    )
    result = ""
    events = client.send_message(SendMessageRequest(message=answer))
    async for event in events:
        if event.HasField("artifact_update"):
            result = event.artifact_update.artifact.parts[0].text
        elif event.HasField("status_update"):
            assert event.status_update.status.state == TaskState.TASK_STATE_COMPLETED
            if stop:
                break
    await events.aclose()
    return result


def orchestrator(remote: RemoteAgent) -> Agent:
    def reply(messages: list[Any], params: Any) -> Any:
        last = messages[-1]
        if last.kind == "tool":
            return text(str(last.content))
        return tool_call("Planner", query="plan a trip")

    return Agent("Orchestrator", model=FunctionModel(reply), tools=[remote.as_tool()])


async def hpd_round_trip(agent: Agent) -> str:
    """The same round trip as a tool call of an agent, the question answered on the stream."""
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, "Rome")
    return str(run.result.output)


async def measure(url: str, ours_url: str, repeat: int, warmup: int) -> dict[str, list[float]]:
    # One client per way of reading: a stream read to its end leaves its connection in a
    # state that slows the next request on it, which would blur the other figure.
    stopping = await create_client(url, client_config=ClientConfig(streaming=True))
    reading = await create_client(url, client_config=ClientConfig(streaming=True))
    remote = RemoteAgent(url)
    await remote.read_card()
    agent = orchestrator(remote)
    ours = RemoteAgent(ours_url)
    await ours.read_card()
    both = orchestrator(ours)
    kinds = ("sdk_stop", "hpd_agent", "hpd_agent_both")
    times: dict[str, list[float]] = {k: [] for k in (*kinds, "sdk_read_to_end")}

    async def one(kind: str, i: int) -> None:
        start = time.perf_counter()
        if kind == "hpd_agent":
            out = await hpd_round_trip(agent)
        elif kind == "hpd_agent_both":
            out = await hpd_round_trip(both)
        else:
            stop = kind == "sdk_stop"
            out = await sdk_round_trip(stopping if stop else reading, stop=stop)
        elapsed = (time.perf_counter() - start) * 1000
        assert out == "to Rome", (kind, out)
        if i >= warmup:
            times[kind].append(elapsed)

    try:
        # The three compared, alternating (each goes first in turn): the same noise for all.
        for i in range(warmup + repeat):
            shift = i % len(kinds)
            for kind in (*kinds[shift:], *kinds[:shift]):
                await one(kind, i)
        # Then the SDK read the way a plain `async for` reads (for reference: much slower).
        for i in range(warmup + min(repeat, 50)):
            await one("sdk_read_to_end", i)
    finally:
        await stopping.close()
        await reading.close()
    return times


@contextmanager
def server_process(flag: str = "--serve") -> Iterator[str]:
    """The server in a child process of its own (``--serve``, ``--serve-ours``): the remote
    is another process, as it is in use, and the client's work does not slow it (one GIL
    each)."""
    child = subprocess.Popen(
        [sys.executable, __file__, flag],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        yield child.stdout.readline().strip()
    finally:
        child.stdin.close()  # the child serves until its stdin ends
        child.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-ours", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve or args.serve_ours:
        with serve_ours() if args.serve_ours else serve() as url:
            print(url, flush=True)
            sys.stdin.read()
        return
    with server_process() as url, server_process("--serve-ours") as ours_url:
        times = anyio.run(measure, url, ours_url, args.repeat, args.warmup)
    sdk = statistics.median(times["sdk_stop"])
    to_end = statistics.median(times["sdk_read_to_end"])
    ours = statistics.median(times["hpd_agent"])
    ratio = ours / sdk
    both = statistics.median(times["hpd_agent_both"])
    print(f"remote question round trip, median of {args.repeat} (ms):")
    print(f"  a2a-sdk client, each stream left at its state   {sdk:8.3f}")
    print(f"  a2a-sdk client, each stream read to its end     {to_end:8.3f}")
    print(f"  hpd_agent run via RemoteAgent                   {ours:8.3f}")
    print(f"  added by hpd_agent (run, model turns, relay)    {ours - sdk:8.3f}")
    print(f"  ratio hpd_agent / sdk (left at its state)       {ratio:8.3f}  (target <= 1.2)")
    print(f"  hpd_agent run via RemoteAgent -> create_app     {both:8.3f}")
    print(f"  ratio both sides hpd_agent / sdk                {both / sdk:8.3f}  (target <= 1.2)")
    result = {
        "repeat": args.repeat,
        "sdk_ms": round(sdk, 4),
        "sdk_read_to_end_ms": round(to_end, 4),
        "hpd_agent_ms": round(ours, 4),
        "added_ms": round(ours - sdk, 4),
        "ratio": round(ratio, 4),
        "hpd_agent_both_ms": round(both, 4),
        "ratio_both": round(both / sdk, 4),
        "target": 1.2,
    }
    print("RESULT_JSON " + json.dumps(result))


if __name__ == "__main__":
    main()
