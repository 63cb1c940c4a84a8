"""The seed scenario, offline: a sub-agent's question reaches the user mid-turn.

Orchestrator calls CodingAgent; CodingAgent answers with a question; Orchestrator asks the
user with ask_user; the answer comes back in the same turn; Orchestrator calls CodingAgent
again with it. One root run, no model call repeated.

Run: python examples/seed_scenario.py [ANSWER]
(ANSWER: an option, Express, FastAPI or Django, or its number from 1; default: Express)
"""

from __future__ import annotations

import sys

import anyio

from hpd_agent import Agent, ask_user
from hpd_agent.events import ClarificationRequest, TextDelta, ToolCallStarted, format_path
from hpd_agent.messages import ToolResultMessage, UserMessage
from hpd_agent.testing import FunctionModel, text, tool_call

QUESTION = "Which framework: Express, FastAPI or Django?"


def coding_model(messages, info):  # type: ignore[no-untyped-def]
    """CodingAgent: asks for the framework unless the task names one."""
    task = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
    for framework in ("Express", "FastAPI", "Django"):
        if framework.lower() in task.lower():
            return text(
                f"Built the auth system with {framework}: login, signup, JWT sessions, tests."
            )
    return text(QUESTION)


def orchestrator_model(messages, info):  # type: ignore[no-untyped-def]
    """Orchestrator: delegates, relays the sub-agent's question to the user, delegates again."""
    last = messages[-1]
    if not isinstance(last, ToolResultMessage):
        return tool_call("CodingAgent", query="Build an auth system")
    if last.name == "CodingAgent" and last.content == QUESTION:
        return tool_call("ask_user", question=QUESTION, options=["Express", "FastAPI", "Django"])
    if last.name == "ask_user":
        return tool_call("CodingAgent", query=f"Build the auth system with {last.content}")
    return text(f"Done. {last.content}")


async def main(answer: str) -> None:
    coder = Agent("CodingAgent", model=FunctionModel(coding_model), tools=[ask_user()])
    orchestrator = Agent(
        "Orchestrator",
        model=FunctionModel(orchestrator_model),
        instructions="You coordinate tasks. Ask the user when a sub-agent needs their choice.",
        tools=[coder.as_tool(), ask_user()],
    )
    async with orchestrator.stream("Build an auth system") as run:
        async for event in run:
            who = format_path(event.agent_path)
            if isinstance(event, ToolCallStarted):
                print(f"[{who}] -> {event.tool_name}({event.arguments})")
            elif isinstance(event, TextDelta):
                print(f"[{who}] {event.text}")
            elif isinstance(event, ClarificationRequest):
                options = event.options or ()
                if answer.isdecimal() and 1 <= int(answer) <= len(options):
                    answer = options[int(answer) - 1]  # numbered from 1, as people count
                print(f"[{who}] asks: {event.question}  (user answers: {answer})")
                await run.respond(event.request_id, answer)
    print(f"\nResult: {run.result.output}")
    print(f"Model requests in the whole tree: {run.result.usage.requests}")


if __name__ == "__main__":
    from hpd_agent.exceptions import InvalidAnswerError

    try:
        anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "Express")
    except InvalidAnswerError as e:  # an answer that is not one of the options
        sys.exit(f"error: {e}")
