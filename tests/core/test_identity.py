"""Routing and identity: an answer reaches the question it was given to, and no other.

- Deduplication merges only requests that are the same question (kind, text, context,
  options, data): two confirmations with different context, or two custom questions with
  different payloads, are two requests with two answers.
- Tool-call ids from a model are untrusted: empty, repeated, or colliding ids (within a turn,
  across turns, or shaped like another call's path) still give every call its own request id
  and its own result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.events import ClarificationRequest, Event, ToolCallFinished
from hpd_agent.messages import Message, ToolCall, ToolResultMessage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio


async def _answer_each(agent: Agent, answer: Any) -> tuple[list[Event], str | None]:
    """Run ``agent``, answering every request with ``answer(event)``; bounded in time."""
    events: list[Event] = []
    with anyio.fail_after(10):
        async with agent.stream("go") as run:
            async for event in run:
                events.append(event)
                if isinstance(event, ClarificationRequest) and not event.replayed:
                    await run.respond(event.request_id, answer(event))
    return events, run.result.output


def _results(events: list[Event]) -> dict[str, str]:
    return {e.tool_call_id: e.result for e in events if isinstance(e, ToolCallFinished)}


async def test_confirmations_with_different_context_are_two_requests() -> None:
    @tool
    async def check(ctx: ToolContext, what: str) -> str:
        """Confirm something.

        Args:
            what: What to confirm.
        """
        ok = await ctx.confirm("Proceed?", context=f"about to {what}")
        return f"{what}: {ok}"

    model = ScriptedModel(
        [[tool_call("check", what="delete", _id="a"), tool_call("check", what="deploy", _id="b")],
         text("done")]
    )  # fmt: skip
    agent = Agent("A", model=model, tools=[check])
    events, _ = await _answer_each(agent, lambda e: "deploy" in (e.context or ""))
    asked = [e for e in events if isinstance(e, ClarificationRequest)]
    assert len(asked) == 2 and len({e.request_id for e in asked}) == 2
    assert _results(events) == {"a": "delete: False", "b": "deploy: True"}


async def test_custom_questions_with_different_payloads_are_two_requests() -> None:
    @tool
    async def pick(ctx: ToolContext, item: str) -> str:
        """Ask about an item.

        Args:
            item: The item.
        """
        answer = await ctx.ask_custom("review", "Review this", payload={"item": item})
        return json.dumps(answer)

    model = ScriptedModel(
        [[tool_call("pick", item="x", _id="a"), tool_call("pick", item="y", _id="b")],
         text("done")]
    )  # fmt: skip
    agent = Agent("A", model=model, tools=[pick])
    events, _ = await _answer_each(agent, lambda e: {"seen": e.data["payload"]["item"]})
    assert len([e for e in events if isinstance(e, ClarificationRequest)]) == 2
    assert _results(events) == {"a": '{"seen": "x"}', "b": '{"seen": "y"}'}


async def test_questions_of_one_kind_with_different_answer_schemas_are_two_requests() -> None:
    from hpd_agent.questions import KindQuestion

    @tool
    async def relay(ctx: ToolContext, top: int) -> str:
        """Relay a remote's question (its own kind, its own answer schema).

        Args:
            top: The largest answer the remote takes.
        """
        schema = {"type": "integer", "minimum": 1, "maximum": top}
        spec = KindQuestion("remote.score", question="Score?", schema=schema)
        return str(await ctx.request(spec))

    model = ScriptedModel(
        [[tool_call("relay", top=5, _id="a"), tool_call("relay", top=10, _id="b")],
         text("done")]
    )  # fmt: skip
    agent = Agent("A", model=model, tools=[relay])
    events: list[Event] = []
    with anyio.fail_after(10):
        async with agent.stream("go") as run:
            waiting = await run.settled()  # both calls wait for a human now
            assert len(waiting) == 2
            for request in waiting:
                assert isinstance(request, ClarificationRequest) and request.answer_schema
                await run.respond(request.request_id, request.answer_schema["maximum"])
            events = [event async for event in run]
    assert _results(events) == {"a": "5", "b": "10"}


def _asking_turns(ids_per_turn: Sequence[Sequence[str]]) -> FunctionModel:
    """Each turn asks one question per id (the question names its slot); then finishes."""

    def fn(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        if params.turn < len(ids_per_turn):
            calls = tuple(
                ToolCall(
                    id=cid,
                    name="ask_user",
                    arguments=json.dumps({"question": f"turn {params.turn} slot {i}"}),
                )
                for i, cid in enumerate(ids_per_turn[params.turn])
            )
            return ModelResponse(tool_calls=calls)
        got = [m.content for m in messages if isinstance(m, ToolResultMessage)]
        return ModelResponse(text=json.dumps(got))

    return FunctionModel(fn)


@pytest.mark.parametrize(
    "ids",
    [
        [["", "", ""]],
        [["dup", "dup", "dup"]],
        [["hpd_0_1", "x", "x"]],  # the generated id for the repeat is already taken
        [["a"], ["a"], ["a"]],  # the same id in every turn
        [["a/B@0:c", "a"], ["a?0", "a|b"]],  # ids shaped like call paths
        [["x" * 500, "x" * 500]],
    ],
)
async def test_untrusted_tool_call_ids_never_cross_answers(ids: list[list[str]]) -> None:
    agent = Agent("A", model=_asking_turns(ids), tools=[ask_user()])
    events, output = await _answer_each(agent, lambda e: f"answer to {e.question}")
    asked = [e for e in events if isinstance(e, ClarificationRequest)]
    assert len(asked) == sum(len(t) for t in ids)
    assert len({e.request_id for e in asked}) == len(asked)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len({e.tool_call_id for e in finished}) == len(finished)
    for e in finished:
        assert not e.is_error
    expected = [
        f"answer to turn {t} slot {i}" for t, turn in enumerate(ids) for i in range(len(turn))
    ]
    assert output is not None and json.loads(output) == expected


async def test_an_id_shaped_like_a_nested_call_path_does_not_collide_with_it() -> None:
    # The sub-agent's call "c" has call path ".../x/B@0:c"; a root call whose id spells that
    # path must still ask its own question.
    inner = Agent(
        "B",
        model=ScriptedModel(
            [tool_call("ask_user", question="inner?", _id="c"), text("inner done")]
        ),
        tools=[ask_user()],
    )
    outer_model = ScriptedModel(
        [[tool_call("B", query="go", _id="x"),
          tool_call("ask_user", question="outer?", _id="x/B@0:c")],
         text("all done")]
    )  # fmt: skip
    agent = Agent("A", model=outer_model, tools=[inner.as_tool(), ask_user()])
    events, _ = await _answer_each(agent, lambda e: f"re {e.question}")
    asked = {e.question: e.request_id for e in events if isinstance(e, ClarificationRequest)}
    assert set(asked) == {"inner?", "outer?"} and len(set(asked.values())) == 2
    results = sorted(_results(events).values())
    assert "re outer?" in results and "re inner?" in results
