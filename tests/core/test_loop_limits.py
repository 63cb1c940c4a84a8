"""The loop at a model's token limit (``finish_reason="length"``), and the usage of failed
agents, with scripted models; plus what goes back to the provider for broken arguments."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from _trees import write_file_tool as _writer

from hpd_agent import Agent, tool
from hpd_agent.events import AgentFinished, RunFinished, ToolCallFinished
from hpd_agent.exceptions import ModelError
from hpd_agent.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    to_openai,
)
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call

CUT = '{"path": "notes.txt", "content": "the token limit cut this o'


def _cut_call(name: str = "write_file", arguments: str = CUT) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id="call_cut", name=name, arguments=arguments),),
        usage=Usage(requests=1, input_tokens=30, output_tokens=16),
        finish_reason="length",
    )


async def test_a_call_cut_off_by_the_token_limit_is_not_run() -> None:
    written: list[str] = []
    model = ScriptedModel([_cut_call(), text("I will write less.")])
    agent = Agent("Writer", model=model, tools=[_writer(written)])
    finished: list[ToolCallFinished] = []
    async with agent.stream("Write notes") as run:
        async for event in run:
            if isinstance(event, ToolCallFinished):
                finished.append(event)
    assert written == []
    assert [(f.tool_call_id, f.is_error) for f in finished] == [("call_cut", True)]
    assert "cut off by the token limit" in finished[0].result
    assert "shorter arguments" in finished[0].result
    second = model.requests[1]
    result = second[-1]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error and result.content == finished[0].result
    # The call stays in the conversation, marked, and goes back to a provider as "{}".
    assistant = second[-2]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls[0].truncated
    sent = to_openai(second)[-2]["tool_calls"][0]["function"]
    assert sent == {"name": "write_file", "arguments": "{}"}
    assert run.result.output == "I will write less."


async def test_a_whole_call_in_a_response_cut_off_later_still_runs() -> None:
    written: list[str] = []
    whole = ToolCall(id="a", name="write_file", arguments='{"path": "a.txt", "content": "x"}')
    cut = ToolCall(id="b", name="write_file", arguments=CUT)
    model = ScriptedModel(
        [ModelResponse(tool_calls=(whole, cut), finish_reason="length"), text("ok")]
    )
    await Agent("Writer", model=model, tools=[_writer(written)]).run("go")
    assert written == ["a.txt"]
    results = [m for m in model.requests[1] if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [("a", False), ("b", True)]
    assert "cut off by the token limit" in results[1].content


async def test_malformed_arguments_without_the_token_limit_are_an_argument_error() -> None:
    # Not cut off: the model wrote bad JSON. The tool's own argument error says so, and
    # the bad text is not sent back to the provider either.
    written: list[str] = []
    model = ScriptedModel([tool_call("write_file", _raw='{"path": "a.txt",}'), text("ok")])
    await Agent("Writer", model=model, tools=[_writer(written)]).run("go")
    assert written == []
    result = model.requests[1][-1]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert "cut off" not in result.content
    assert to_openai(model.requests[1])[-2]["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_a_cut_off_call_of_a_sub_agent_is_not_run_either() -> None:
    written: list[str] = []
    inner = Agent(
        "Inner",
        model=ScriptedModel([_cut_call(), text("could not write")]),
        tools=[_writer(written)],
    )
    outer = Agent(
        "Outer",
        model=ScriptedModel([tool_call("Inner", query="write notes"), text("done")]),
        tools=[inner.as_tool()],
    )
    result = await outer.run("go")
    assert written == []
    assert result.output == "done"


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_answer_cut_off_by_the_token_limit_is_reported_truncated(
    streamed: bool,
) -> None:
    cut = ModelResponse(text="Once upon a", finish_reason="length")
    model = ScriptedModel([cut, text("A whole answer.")], chunk_size=4 if streamed else None)
    agent = Agent("Teller", model=model)
    finished: list[AgentFinished] = []
    async with agent.stream("Tell a story") as run:
        async for event in run:
            if isinstance(event, AgentFinished):
                finished.append(event)
    assert run.result.output == "Once upon a"
    assert run.result.truncated is True
    assert [f.truncated for f in finished] == [True]
    again = await agent.run("Tell a story")
    assert again.truncated is False


async def test_a_truncated_sub_agent_answer_is_flagged_on_its_agent_finished() -> None:
    inner = Agent(
        "Inner", model=ScriptedModel([ModelResponse(text="half", finish_reason="length")])
    )
    outer = Agent(
        "Outer",
        model=ScriptedModel([tool_call("Inner", query="q"), text("done")]),
        tools=[inner.as_tool()],
    )
    flags: dict[str, bool] = {}
    async with outer.stream("go") as run:
        async for event in run:
            if isinstance(event, AgentFinished):
                flags[event.agent_path[-1]] = event.truncated
    assert flags == {"Inner": True, "Outer": False}
    assert run.result.truncated is False


async def test_scripted_models_report_their_finish_reason() -> None:
    model = ScriptedModel([tool_call("x"), text("done")])
    params = ModelRequestParams()
    assert (await model.request([], params)).finish_reason == "tool_calls"
    assert (await model.request([], params)).finish_reason == "stop"


# -- usage of failed agents --------------------------------------------------------------------
def _spends_then_fails(messages: Sequence[Message], info: ModelRequestParams) -> ModelResponse:
    if info.turn == 0:
        return ModelResponse(
            tool_calls=(ToolCall(id="c", name="noop", arguments="{}"),),
            usage=Usage(requests=1, input_tokens=40, output_tokens=7),
            finish_reason="tool_calls",
        )
    raise ModelError("the provider went away")


@tool
def noop() -> str:
    """Does nothing."""
    return "ok"


async def test_a_failed_agent_reports_the_usage_it_spent() -> None:
    agent = Agent("A", model=FunctionModel(_spends_then_fails), tools=[noop])
    events: list[AgentFinished | RunFinished] = []
    with pytest.raises(ModelError):
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, (AgentFinished, RunFinished)):
                    events.append(event)
    assert [(e.kind, e.status) for e in events] == [
        ("agent_finished", "failed"),
        ("run_finished", "failed"),
    ]
    assert all(e.usage == Usage(requests=1, input_tokens=40, output_tokens=7) for e in events)


async def test_a_failed_sub_agent_reports_its_own_usage() -> None:
    inner = Agent("Inner", model=FunctionModel(_spends_then_fails), tools=[noop])
    outer = Agent(
        "Outer",
        model=ScriptedModel([tool_call("Inner", query="q"), text("carried on")]),
        tools=[inner.as_tool()],
    )
    finished: dict[str, AgentFinished] = {}
    async with outer.stream("go") as run:
        async for event in run:
            if isinstance(event, AgentFinished):
                finished[event.agent_path[-1]] = event
    assert finished["Inner"].status == "failed"
    assert finished["Inner"].usage == Usage(requests=1, input_tokens=40, output_tokens=7)
    assert run.result.output == "carried on"
    # The run's total counts the failed agent's spending too.
    assert run.result.usage.input_tokens == 40


# -- what goes back to the provider ------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ("{}", "{}"),
        (CUT, "{}"),
        ("", "{}"),
        ("[1, 2]", "{}"),
        ("null", "{}"),
        ("[" * 100_000, "{}"),
    ],
)
def test_only_json_object_arguments_are_sent_back(arguments: str, sent: str) -> None:
    message = AssistantMessage(tool_calls=(ToolCall(id="c", name="t", arguments=arguments),))
    out = to_openai([message])[0]["tool_calls"][0]["function"]["arguments"]
    assert out == sent
    assert isinstance(json.loads(out), dict)


def test_an_empty_assistant_turn_is_sent_with_empty_content() -> None:
    # A turn cut off before any text: providers refuse an assistant message with neither.
    assert to_openai([AssistantMessage()]) == [{"role": "assistant", "content": ""}]


# -- durable runs ------------------------------------------------------------------------------
async def test_a_cut_off_call_and_a_truncated_answer_replay_from_the_journal(
    tmp_path: Path,
) -> None:
    written: list[str] = []
    steps = [_cut_call(), ModelResponse(text="Half an ans", finish_reason="length")]
    model = ScriptedModel(steps)
    agent = Agent("Writer", model=model, tools=[_writer(written)])
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        first = await agent.run("Write notes", store=store)
        assert first.truncated and first.output == "Half an ans"
        # Resuming the finished run replays it from the journal: no model call, no tool run,
        # and the same flags.
        replayed = await Agent("Writer", model=ScriptedModel([]), tools=[_writer(written)]).resume(
            first.run_id, store=store
        )
    finally:
        await store.aclose()
    assert replayed.status == "completed"
    assert replayed.output == "Half an ans" and replayed.truncated
    assert written == []
    calls = [m for m in replayed.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert calls[0].tool_calls[0].truncated
