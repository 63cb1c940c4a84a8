"""Property: whatever a model sends (ids, tool names, argument text, nesting), a run ends in
bounded time, fails only with a documented error, and every request is answered at most
once and only with its own answer."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hpd_agent import Agent, HpdAgentError, ToolContext, tool
from hpd_agent.events import ClarificationRequest, ToolCallFinished
from hpd_agent.messages import Message, ToolCall, ToolResultMessage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.testing import FunctionModel

IDS = st.one_of(
    st.sampled_from(["", "a", "x", "call_1", "hpd_0_0", "hpd_1_1", "x/Sub@0:a", "a?0", "a|b"]),
    st.text(max_size=6),
)
NAMES = st.sampled_from(["ask", "echo", "Sub", "nope", ""])
ARGS = st.sampled_from(["valid", "malformed", "empty", "nested", "wrong_type", "extra", "huge"])
CALL = st.tuples(IDS, NAMES, ARGS)
SCRIPT = st.lists(st.lists(CALL, max_size=4), max_size=4)


def _arguments(name: str, kind: str, question: str) -> str:
    valid = {"ask": {"question": question}, "echo": {"text": "hi"}, "Sub": {"query": "go"}}
    body = valid.get(name, {"x": 1})
    if kind == "valid":
        return json.dumps(body)
    if kind == "malformed":
        return json.dumps(body)[:-3]
    if kind == "empty":
        return ""
    if kind == "nested":
        return "[" * 3000 + "]" * 3000
    if kind == "wrong_type":
        return json.dumps({k: 5 for k in body})
    if kind == "extra":
        return json.dumps({**body, "unexpected": [1, 2, 3]})
    return json.dumps({**body, "pad": "x" * 200_000})


def _model(script: Sequence[Sequence[tuple[str, str, str]]], counter: Any) -> FunctionModel:
    def fn(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        if params.turn >= len(script) or not script[params.turn]:
            done = [m.content for m in messages if isinstance(m, ToolResultMessage)]
            return ModelResponse(text=json.dumps(done)[:200])
        calls = tuple(
            ToolCall(id=cid, name=name, arguments=_arguments(name, kind, f"q{next(counter)}"))
            for cid, name, kind in script[params.turn]
        )
        return ModelResponse(tool_calls=calls)

    return FunctionModel(fn)


def _agents(root_script: Any, sub_script: Any, crossed: list[str]) -> Agent:
    counter = itertools.count()

    @tool
    async def ask(ctx: ToolContext, question: str) -> str:
        """Ask the human.

        Args:
            question: The question.
        """
        answer = await ctx.ask(question)
        if answer != f"ans:{question}":
            crossed.append(f"{question!r} got {answer!r}")
        return answer

    @tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: Anything.
        """
        return text

    sub_tools = [ask, echo]
    sub = Agent("Sub", model=_model(sub_script, counter), tools=sub_tools, max_turns=6)
    return Agent(
        "Root", model=_model(root_script, counter), tools=[ask, echo, sub.as_tool()], max_turns=6
    )


async def _drive(agent: Agent) -> tuple[list[str], list[str]]:
    answered: list[str] = []
    finished_asks: list[str] = []
    with anyio.fail_after(20):
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    answered.append(event.request_id)
                    await run.respond(event.request_id, f"ans:{event.question}")
                elif isinstance(event, ToolCallFinished) and event.tool_name == "ask":
                    finished_asks.append(event.result)
    result = run.result
    assert result.status in ("completed", "failed")
    if result.status == "failed":
        assert isinstance(result.error, HpdAgentError), repr(result.error)
    return answered, finished_asks


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(root=SCRIPT, sub=SCRIPT)
# A call id spelling the path of a nested agent's call (a collision the random search
# rarely builds): it must still be a call of its own.
@example(
    root=[[("x", "Sub", "valid"), ("x/Sub@0:a", "ask", "valid")]], sub=[[("a", "ask", "valid")]]
)
def test_arbitrary_model_output_never_crosses_answers(backend: str, root: Any, sub: Any) -> None:
    crossed: list[str] = []

    async def main() -> tuple[list[str], list[str]]:
        return await _drive(_agents(root, sub, crossed))

    answered, asks = anyio.run(main, backend=backend)
    assert crossed == []
    assert len(answered) == len(set(answered))  # each request answered once
    ok = [r for r in asks if r.startswith("ans:")]
    assert len(ok) == len(set(ok))  # each answer reached one asker
