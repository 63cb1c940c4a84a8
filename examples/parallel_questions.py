"""Parallel questions: two sub-agents run at once and both ask the human.

Both questions are pending together. This loop answers them in the opposite order from
the one they were asked in: answers are routed by request id, never by position.

    python examples/parallel_questions.py
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from hpd_agent import Agent, ask_user
from hpd_agent.events import ClarificationRequest, RequestEvent
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call

ANSWERS = {"Frontend": "React", "Backend": "FastAPI"}


def results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def specialist(question: str) -> FunctionModel:
    def fn(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        got = results(messages)
        if not got:
            return tool_call("ask_user", question=question)
        return text(f"{info.agent_name} will use {got[-1]}.")

    return FunctionModel(fn)


frontend = Agent("Frontend", model=specialist("Which UI library?"), tools=[ask_user()])
backend = Agent("Backend", model=specialist("Which API framework?"), tools=[ask_user()])


def lead(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = results(messages)
    if not got:
        # Two calls in one turn run in parallel.
        return [
            tool_call("Frontend", query="Pick the UI"),
            tool_call("Backend", query="Pick the API"),
        ]
    return text(" ".join(got))


orchestrator = Agent(
    "Lead", model=FunctionModel(lead), tools=[frontend.as_tool(), backend.as_tool()]
)


async def main() -> None:
    async with orchestrator.stream("Plan the app") as run:
        waiting: list[RequestEvent] = []
        async for event in run:
            if isinstance(event, ClarificationRequest):
                print(f"{event.agent_name} asks: {event.question} ({event.request_id})")
                waiting.append(event)
                if len(waiting) == 2:
                    print(
                        "both questions are pending at once:", [r.request_id for r in run.pending]
                    )
                    for request in reversed(waiting):
                        answer = ANSWERS[request.agent_name]
                        print(f"answering {request.agent_name} with {answer}")
                        await run.respond(request.request_id, answer)
    print("Result:", run.result.output)


if __name__ == "__main__":
    anyio.run(main)
