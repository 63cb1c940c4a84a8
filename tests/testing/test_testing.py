"""The shipped test doubles behave as documented, and real model requests are impossible."""

from __future__ import annotations

import pytest

from hpd_agent import Agent, ModelError, ask_user
from hpd_agent.exceptions import ScriptExhaustedError
from hpd_agent.messages import UserMessage
from hpd_agent.models import check_allow_model_requests
from hpd_agent.testing import (
    FunctionModel,
    ScriptedHuman,
    ScriptedModel,
    UnexpectedRequestError,
    text,
    tool_call,
)


async def test_scripted_model_records_and_checks_completeness() -> None:
    model = ScriptedModel([text("one"), text("two")], name="m")
    agent = Agent("A", model=model)
    await agent.run("first")
    with pytest.raises(AssertionError, match="2 steps scripted, 1 requests made"):
        model.assert_complete()
    await agent.run("second")
    model.assert_complete()
    assert model.requests[1][-1] == UserMessage(content="second")
    assert model.params[0].agent_name == "A"
    with pytest.raises(ScriptExhaustedError, match="has 2 steps but agent 'A' made request #3"):
        await agent.run("third")


async def test_scripted_model_streams_in_chunks() -> None:
    model = ScriptedModel([text("abcdefg")], chunk_size=3)
    deltas: list[str] = []
    async with Agent("A", model=model).stream("go") as run:
        async for event in run:
            if event.kind == "text_delta":
                deltas.append(event.text)  # type: ignore[union-attr]
    assert deltas == ["abc", "def", "g"]


async def test_function_model_sync_and_async() -> None:
    def sync_fn(messages, info):  # type: ignore[no-untyped-def]
        return text(f"sync turn {info.turn}")

    async def async_fn(messages, info):  # type: ignore[no-untyped-def]
        return text(f"async {messages[-1].content}")

    assert (await Agent("A", model=FunctionModel(sync_fn)).run("x")).output == "sync turn 0"
    model = FunctionModel(async_fn)
    assert (await Agent("B", model=model).run("x")).output == "async x"
    assert model.calls == 1


async def test_scripted_human_fails_on_unexpected_questions() -> None:
    agent = Agent(
        "A", model=ScriptedModel([tool_call("ask_user", question="Secret?")]), tools=[ask_user()]
    )
    with pytest.raises(
        UnexpectedRequestError, match="no rule for text question 'Secret\\?' from A"
    ):
        await agent.run("go", handler=ScriptedHuman({"other": "x"}))


def test_scripted_human_assert_all_asked() -> None:
    human = ScriptedHuman({"never": "x"})
    with pytest.raises(AssertionError, match="never asked about"):
        human.assert_all_asked()


def test_real_model_requests_are_blocked_in_tests() -> None:
    # The conftest guard: the check every real model runs before a request refuses.
    with pytest.raises(ModelError, match="Real model requests are disabled"):
        check_allow_model_requests("openai/gpt-4o-mini")


async def test_scripted_model_continues_across_runs_until_reset() -> None:
    model = ScriptedModel([text("first"), text("second")])
    agent = Agent("A", model=model)
    assert (await agent.run("one")).output == "first"
    assert (await agent.run("two")).output == "second"
    with pytest.raises(ScriptExhaustedError, match=r"call reset\(\) to play it again"):
        await agent.run("three")
    model.reset()
    assert model.remaining == 2
    assert (await agent.run("again")).output == "first"
