"""The peer side of benchmarks/bench_web_fanout.py: its fan-out tree in pydantic-ai, served
through pydantic-ai's AG-UI adapter (``AGUIAdapter.dispatch_request``) by uvicorn.

The root's FunctionModel streams A ``speaker`` tool calls in one response (pydantic-ai runs
them in parallel); the tool runs the sub-agent with ``run_stream_events`` (a FunctionModel
streaming T ``"tok "`` pieces) and forwards its text to the client as AG-UI events through
``ctx.emit`` (a ``CustomEvent`` whose payload is an ``ag_ui.core`` event is sent as it is):
SUBAGENT_STARTED, TEXT_MESSAGE_START, one TEXT_MESSAGE_CONTENT per piece,
TEXT_MESSAGE_END, SUBAGENT_FINISHED, the events hpd_agent sends for a sub-agent. Prompt:
``fanout A T``. Needs ``pydantic-ai-slim[ag-ui]`` (the ``bench`` extra).

Run by bench_web_fanout.py as a child process: prints ``Serving pydantic-ai on URL``.
"""

# No ``from __future__ import annotations``: pydantic-ai reads the tool's signature.
import json
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from ag_ui.core import (
    BaseEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from pydantic_ai import Agent, CustomEvent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from pydantic_ai.usage import UsageLimits
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

TOKEN = "tok "


@dataclass(kw_only=True)
class Forward(CustomEvent):
    """An AG-UI event of the sub-agent, passed to the client as it is."""

    event: Any

    def to_payload(self) -> BaseEvent:
        return self.event


def _prompt(messages: list[ModelMessage]) -> str:
    for m in messages:
        if isinstance(m, ModelRequest):
            for part in m.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


async def speak(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    for _ in range(int(_prompt(messages))):
        yield TOKEN


async def fan(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    answered = any(
        isinstance(p, ToolReturnPart)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
    )
    if answered:
        yield "done"
        return
    _, agents, tokens = _prompt(messages).split()
    args = json.dumps({"query": tokens})
    yield {i: DeltaToolCall("speaker", args, tool_call_id=f"c{i}") for i in range(int(agents))}


sub = Agent(FunctionModel(stream_function=speak))
root = Agent(FunctionModel(stream_function=fan))


@root.tool
async def speaker(ctx: RunContext[None], query: str) -> str:
    """Say the query's number of tokens."""
    sid, mid = uuid.uuid4().hex, uuid.uuid4().hex
    started = SubagentStartedEvent(subagent_run_id=sid, name="speaker", description=query)
    await ctx.emit(Forward(event=started))
    said: list[str] = []
    async with sub.run_stream_events(query) as stream:
        async for ev in stream:
            piece = None
            if isinstance(ev, PartStartEvent) and isinstance(ev.part, TextPart):
                start = TextMessageStartEvent(message_id=mid, subagent_run_id=sid)
                await ctx.emit(Forward(event=start))
                piece = ev.part.content
            elif isinstance(ev, PartDeltaEvent) and isinstance(ev.delta, TextPartDelta):
                piece = ev.delta.content_delta
            if piece:
                said.append(piece)
                content = TextMessageContentEvent(message_id=mid, delta=piece, subagent_run_id=sid)
                await ctx.emit(Forward(event=content))
    await ctx.emit(Forward(event=TextMessageEndEvent(message_id=mid, subagent_run_id=sid)))
    answer = "".join(said)
    outcome = SubagentFinishedSuccessOutcome()
    finished = SubagentFinishedEvent(subagent_run_id=sid, result=answer, outcome=outcome)
    await ctx.emit(Forward(event=finished))
    return answer


async def endpoint(request: Request) -> Response:
    limits = UsageLimits(request_limit=10)
    return await AGUIAdapter.dispatch_request(request, agent=root, usage_limits=limits)


def main() -> None:
    app = Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"Serving pydantic-ai on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
