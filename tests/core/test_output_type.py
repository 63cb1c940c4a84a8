"""Structured output: ``Agent(output_type=...)`` validates the final answer, sends an invalid
one back with the error, gives up with ``OutputValidationError``, and works nested."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
import pydantic
import pytest

from hpd_agent import (
    Agent,
    AgentFinished,
    Event,
    OutputValidationError,
    RunFinished,
    UserError,
    ask_user,
)
from hpd_agent.messages import Message, SystemMessage, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import MemoryStore, SQLiteStore, Store
from hpd_agent.testing import FunctionModel, ScriptedModel, Step, text, tool_call

pytestmark = pytest.mark.anyio


class City(pydantic.BaseModel):
    name: str
    population: int


PARIS = City(name="Paris", population=2_100_000)
PARIS_JSON = '{"name": "Paris", "population": 2100000}'


async def test_a_valid_answer_is_the_validated_output() -> None:
    model = ScriptedModel([text(PARIS_JSON)])
    agent = Agent("Geo", model=model, instructions="You know cities.", output_type=City)
    events: list[Event] = []
    async with agent.stream("Biggest French city?") as run:
        async for event in run:
            events.append(event)
    result = run.result
    assert result.status == "completed"
    assert result.output == PARIS
    assert isinstance(result.output, City)
    # The model was told the schema, after the agent's own instructions.
    system = model.requests[0][0]
    assert isinstance(system, SystemMessage)
    assert system.content.startswith("You know cities.\n\n")
    assert json.dumps(City.model_json_schema()) in system.content
    # Events carry the value as JSON text.
    finished = [e for e in events if isinstance(e, AgentFinished | RunFinished)]
    assert [json.loads(e.output or "") for e in finished] == [PARIS.model_dump()] * 2


@pytest.mark.parametrize(
    "answer",
    [
        f"Here it is:\n```json\n{PARIS_JSON}\n```\nAnything else?",
        f"The answer is {PARIS_JSON}, I am sure.",
        f"  {PARIS_JSON}  ",
        f'Not this {{"city": 1}} but this: {PARIS_JSON}',
    ],
)
async def test_the_value_is_found_in_prose_and_code_fences(answer: str) -> None:
    agent = Agent("Geo", model=ScriptedModel([text(answer)]), output_type=City)
    assert (await agent.run("city?")).output == PARIS


async def test_any_type_pydantic_validates() -> None:
    agent = Agent("Nums", model=ScriptedModel([text("[3, 1, 2]")]), output_type=list[int])
    assert (await agent.run("numbers?")).output == [3, 1, 2]
    plain = Agent("Plain", model=ScriptedModel([text("just text")]), output_type=str)
    assert (await plain.run("hi")).output == "just text"


async def test_an_invalid_answer_goes_back_with_the_error_and_is_fixed() -> None:
    model = ScriptedModel(
        [
            text('{"name": "Paris", "population": "lots"}'),
            text("I don't know the format."),
            text(PARIS_JSON),
        ]
    )
    agent = Agent("Geo", model=model, output_type=City, output_retries=2)
    result = await agent.run("city?")
    assert result.output == PARIS
    first_retry = model.requests[1][-1]
    assert isinstance(first_retry, UserMessage)
    assert "population" in first_retry.content
    assert "valid integer" in first_retry.content
    second_retry = model.requests[2][-1]
    assert isinstance(second_retry, UserMessage)
    assert "no JSON value was found" in second_retry.content
    assert result.usage.requests == 3
    # The conversation keeps the refused answers and the retry messages, in order.
    kinds = [m.kind for m in result.messages]
    assert kinds == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    model.assert_complete()


async def test_never_valid_ends_with_output_validation_error() -> None:
    model = ScriptedModel([text("nope"), text('{"name": 1}')])
    agent = Agent("Geo", model=model, output_type=City, output_retries=1)
    with pytest.raises(OutputValidationError) as caught:
        await agent.run("city?")
    error = caught.value
    assert error.agent_name == "Geo"
    assert error.attempts == 2
    assert "population" in error.last_error
    assert "'Geo'" in str(error) and "2 attempts" in str(error)
    model.assert_complete()

    # Streamed, the run ends failed with that error in RunFinished.
    streamed = Agent("Geo", model=ScriptedModel([text("nope")]), output_type=City, output_retries=0)
    events: list[Event] = []
    with pytest.raises(OutputValidationError):  # leaving the block raises the run's error
        async with streamed.stream("city?") as run:
            events.extend([e async for e in run])
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert last.status == "failed"
    assert "gave no valid output in 1 attempt" in (last.error or "")
    assert isinstance(run.result.error, OutputValidationError)


async def test_retries_do_not_use_up_max_turns() -> None:
    model = ScriptedModel([tool_call("lookup"), text("bad"), text(PARIS_JSON)])

    def lookup() -> str:
        """Look the city up."""
        return "Paris, 2.1M"

    agent = Agent("Geo", model=model, tools=[lookup], max_turns=2, output_type=City)
    assert (await agent.run("city?")).output == PARIS
    # The turns keep counting: a retry gets the next turn index.
    assert [p.turn for p in model.params] == [0, 1, 2]


async def test_a_nested_agent_gives_its_caller_the_json_of_the_value() -> None:
    child = Agent("Geo", model=ScriptedModel([text("bad"), text(PARIS_JSON)]), output_type=City)
    parent_model = ScriptedModel([tool_call("Geo", query="Biggest French city?"), text("Paris.")])
    parent = Agent("Root", model=parent_model, tools=[child.as_tool()])
    result = await parent.run("Tell me")
    assert result.output == "Paris."
    (tool_result,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert not tool_result.is_error
    assert json.loads(tool_result.content) == PARIS.model_dump()


async def test_nested_and_parent_both_with_output_type() -> None:
    class Report(pydantic.BaseModel):
        city: City
        verdict: str

    child = Agent("Geo", model=ScriptedModel([text(PARIS_JSON)]), output_type=City)

    def answer(messages: Sequence[Message], params: ModelRequestParams) -> Step:
        last = messages[-1]
        if isinstance(last, UserMessage) and last.content == "Report":
            return tool_call("Geo", query="city?")
        assert isinstance(last, ToolResultMessage)
        city = json.loads(last.content)
        return text(json.dumps({"city": city, "verdict": "big"}))

    parent = Agent("Root", model=FunctionModel(answer), tools=[child.as_tool()], output_type=Report)
    result = await parent.run("Report")
    assert result.output == Report(city=PARIS, verdict="big")


async def test_a_nested_agent_that_never_validates_is_its_callers_tool_error() -> None:
    child = Agent("Geo", model=ScriptedModel([text("bad")]), output_type=City, output_retries=0)
    parent = Agent(
        "Root",
        model=ScriptedModel([tool_call("Geo", query="city?"), text("Could not find out.")]),
        tools=[child.as_tool()],
    )
    result = await parent.run("Tell me")
    assert result.output == "Could not find out."
    (tool_result,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert tool_result.is_error
    assert "agent 'Geo' gave no valid output in 1 attempt" in tool_result.content


def test_bad_settings_are_refused_when_the_agent_is_built() -> None:
    with pytest.raises(UserError, match="output_retries"):
        Agent("A", model=ScriptedModel([]), output_type=City, output_retries=-1)
    with pytest.raises(UserError, match="not a type pydantic can validate"):
        Agent("A", model=ScriptedModel([]), output_type=anyio.Event)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")
    yield s
    anyio.run(s.aclose)


async def test_a_durable_run_replays_the_retries_identically(store: Store) -> None:
    calls: list[int] = []

    def answer(messages: Sequence[Message], params: ModelRequestParams) -> Step:
        calls.append(params.turn)
        return [
            text("not json"),  # refused: a retry message follows
            tool_call("ask_user", question="Which city?"),
            text(PARIS_JSON),
        ][params.turn]

    def build() -> Agent:
        return Agent("Geo", model=FunctionModel(answer), tools=[ask_user()], output_type=City)

    first = await build().run("city?", store=store, on_unhandled="interrupt")
    assert first.status == "interrupted"
    assert calls == [0, 1]
    (pending,) = first.pending
    resumed = await build().resume(first.run_id, store=store, answers={pending.request_id: "Paris"})
    assert resumed.output == PARIS
    # Turns 0 and 1 came from the journal; only turn 2 asked the model.
    assert calls == [0, 1, 2]
    record = await store.get_run(first.run_id)
    assert record is not None and record.status == "completed"
    assert json.loads(record.output or "") == PARIS.model_dump()
    retry = resumed.messages[3]
    assert isinstance(retry, UserMessage) and "no JSON value was found" in retry.content
    assert [m.kind for m in resumed.messages] == [
        "system", "user", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
