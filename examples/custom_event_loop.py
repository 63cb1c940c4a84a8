"""Your own event loop: iterate a run's events and answer requests yourself.

This is how a web server, a chat bot or a queue worker drives hpd_agent: no handler, just
``agent.stream(...)``, ``match`` on events, and ``run.respond(request_id, answer)``. Runs on
asyncio or trio (anyio).

    python examples/custom_event_loop.py [trio]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import anyio

from hpd_agent import Agent, Approve, ask_user, tool
from hpd_agent.events import (
    AgentFinished,
    ClarificationRequest,
    PermissionRequest,
    RunFinished,
    TextDelta,
    ToolCallStarted,
)
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call

written: dict[str, str] = {}


@tool(requires_approval=True)
def write_file(path: str, text: str) -> str:
    """Write a file.

    Args:
        path: Where.
        text: What.
    """
    written[path] = text
    return f"wrote {path}"


def coder(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = [m.content for m in messages if isinstance(m, ToolResultMessage)]
    if not got:
        return tool_call("ask_user", question="Which framework?", options=["Express", "FastAPI"])
    if len(got) == 1:
        return tool_call("write_file", path="app.py", text=f"# {got[0]} app\n")
    return text(f"Built a {got[0]} app and wrote app.py.")


agent = Agent(
    "CodingAgent", model=FunctionModel(coder, chunk_size=8), tools=[ask_user(), write_file]
)


async def main() -> None:
    async with agent.stream("Build an app") as run:
        async for event in run:
            match event:
                case ClarificationRequest():
                    print(f"\n? {event.question} {list(event.options or [])} -> FastAPI")
                    await run.respond(event.request_id, "FastAPI")
                case PermissionRequest():
                    print(
                        f"\n? may {event.agent_name} run {event.tool_name}{event.arguments}? -> yes"
                    )
                    await run.respond(event.request_id, Approve())
                case TextDelta():
                    print(event.text, end="", flush=True)
                case ToolCallStarted():
                    print(f"\n-> {event.tool_name}")
                case AgentFinished():
                    print(f"\n[{event.agent_name} {event.status}]")
                case RunFinished():
                    print(f"[run {event.status}; {event.usage.requests} model requests]")
                case _:
                    pass
    print("files:", written)


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
