"""Nested clarification: an agent three levels down asks the human, mid-turn.

Manager -> Architect -> Engineer. The Engineer calls ask_user; the question reaches the
root run's stream tagged with the full path, the Engineer's turn waits, the answer comes back
by request id, and every level carries on in the same turn: nothing is re-run.

    python examples/nested_clarification.py
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from hpd_agent import Agent, ask_user
from hpd_agent.events import ClarificationRequest, format_path
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, ScriptedHuman, Step, text, tool_call


def results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def engineer(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = results(messages)
    if not got:
        return tool_call(
            "ask_user",
            question="Which language should the service use?",
            options=["Go", "Rust", "Python"],
        )
    return text(f"Service scaffolded in {got[-1]}.")


def delegate(to: str, query: str) -> FunctionModel:
    def fn(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        got = results(messages)
        if not got:
            return tool_call(to, query=query)
        return text(f"{info.agent_name} reports: {got[-1]}")

    return FunctionModel(fn)


engineer_agent = Agent("Engineer", model=FunctionModel(engineer), tools=[ask_user()])
architect = Agent(
    "Architect",
    model=delegate("Engineer", "Scaffold the service"),
    tools=[engineer_agent.as_tool()],
)
manager = Agent(
    "Manager", model=delegate("Architect", "Design the service"), tools=[architect.as_tool()]
)


class LoggingHuman(ScriptedHuman):
    async def on_event(self, event: object) -> None:
        if isinstance(event, ClarificationRequest):
            print(
                f"question from {format_path(event.agent_path)} (depth {event.depth}): {event.question}"
            )


async def main() -> None:
    human = LoggingHuman({"language": "Rust"})
    result = await manager.run("Build the billing service", handler=human)
    request, answer = human.answered[0]
    print(f"answered {answer!r} to request {request.request_id}")
    print("Result:", result.output)


if __name__ == "__main__":
    anyio.run(main)
