"""One vocabulary across events and answers (see CHANGELOG.md, "Unreleased").

- ``ToolCallStarted.arguments`` is always a dict; text that did not parse is kept beside it
  in ``raw_arguments`` (bounded), and the event round-trips through ``event_adapter``.
- A request's id is ``request_id`` everywhere: ``RequestRecord.request_id`` (``.id`` and
  ``RequestRecord(id=...)`` still work for one release, with a ``DeprecationWarning``).
- A text question with options takes an option's 0-based index, however the answer
  arrives (``run.respond``, a store's ``respond``, ``resume(answers=...)``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from hpd_agent import Agent, ask_user, tool
from hpd_agent.events import (
    ClarificationRequest,
    Event,
    ToolCallStarted,
    dump_event,
    event_adapter,
    load_event,
)
from hpd_agent.exceptions import InvalidAnswerError
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import RequestRecord, SQLiteStore, respond
from hpd_agent.testing import FunctionModel, ScriptedModel, text, tool_call
from hpd_agent.tools import MAX_ARGUMENT_CHARS

_NESTED = '{"value": ' + "[" * 100_000 + "]" * 100_000 + "}"
_HUGE = '{"value": "' + "a" * 1_100_000 + '"}'


@tool
def take(value: Any = None) -> str:
    """Takes a value.

    Args:
        value: Anything.
    """
    return f"took {value!r}"


async def _started(raws: Sequence[str]) -> list[ToolCallStarted]:
    """The ``ToolCallStarted`` events of one streamed turn calling ``take`` with each text."""
    calls = [tool_call("take", _id=f"c{i}", _raw=raw) for i, raw in enumerate(raws)]
    agent = Agent("A", model=ScriptedModel([calls, text("done")]), tools=[take])
    with anyio.fail_after(30):
        async with agent.stream("go") as run:
            events = [e async for e in run]
    assert run.result.status == "completed"
    return [e for e in events if isinstance(e, ToolCallStarted)]


def _round_trips(event: Event) -> None:
    assert load_event(dump_event(event)) == event
    as_python = event_adapter().dump_python(event, mode="json")
    assert event_adapter().validate_python(as_python) == event


# -- tool-call arguments: always a dict -----------------------------------------------------
async def test_parsed_arguments_are_a_dict_and_round_trip() -> None:
    sent = {"value": {"nested": [1, 2.5, None, True, "ü"]}, "n": 3}
    [event] = await _started([json.dumps(sent)])
    assert event.arguments == sent and event.raw_arguments is None
    _round_trips(event)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ('{"value": "unterminated', "broken JSON"),
        ("[1, 2]", "JSON that is not an object"),
        ('{"value": NaN}', "NaN is not JSON"),
        ('{"value": "\\ud800"}', "escaped lone surrogate"),
    ],
)
async def test_unparsed_arguments_are_empty_with_the_text_kept(raw: str, why: str) -> None:
    [event] = await _started([raw])
    assert event.arguments == {}, why
    assert event.raw_arguments == raw, why
    _round_trips(event)


async def test_hostile_argument_text_is_kept_bounded_and_encodable() -> None:
    raw_surrogate = '{"value": "a\ud800b"}'
    nested, huge, surrogate, fine = await _started([_NESTED, _HUGE, raw_surrogate, '{"value": 1}'])
    assert nested.arguments == {} and nested.raw_arguments == _NESTED  # too deep: not parsed
    assert huge.arguments == {} and huge.raw_arguments == _HUGE[:MAX_ARGUMENT_CHARS]
    # Text holding a lone surrogate cannot be encoded: it is shown, replaced.
    assert surrogate.arguments == {} and surrogate.raw_arguments == '{"value": "a\ufffdb"}'
    assert fine.arguments == {"value": 1}
    for event in (nested, huge, surrogate, fine):
        _round_trips(event)


async def test_empty_argument_text_is_an_empty_object() -> None:
    [event] = await _started([""])
    assert event.arguments == {} and event.raw_arguments is None


def test_arguments_json_is_deprecated_and_gives_the_json_text() -> None:
    base: dict[str, Any] = {"run_id": "r", "agent_path": ("A",), "depth": 0}
    parsed = ToolCallStarted(**base, tool_call_id="c", tool_name="t", arguments={"x": [1, "é"]})
    raw = ToolCallStarted(
        **base, tool_call_id="c", tool_name="t", arguments={}, raw_arguments='{"x": '
    )
    with pytest.warns(DeprecationWarning, match="arguments_json is deprecated"):
        assert json.loads(parsed.arguments_json) == {"x": [1, "é"]}
    with pytest.warns(DeprecationWarning, match="arguments_json is deprecated"):
        assert raw.arguments_json == '{"x": '


def test_arguments_given_as_text_are_deprecated_and_parsed() -> None:
    base: dict[str, Any] = {"run_id": "r", "agent_path": ("A",), "depth": 0}
    with pytest.warns(DeprecationWarning, match=r"arguments=<str>\) is deprecated"):
        old = ToolCallStarted(**base, tool_call_id="c", tool_name="t", arguments='{"x": 1}')  # pyright: ignore[reportArgumentType]
    assert old.arguments == {"x": 1} and old.raw_arguments is None
    with pytest.warns(DeprecationWarning):
        broken = ToolCallStarted(**base, tool_call_id="c", tool_name="t", arguments="{x")  # pyright: ignore[reportArgumentType]
    assert broken.arguments == {} and broken.raw_arguments == "{x"


# -- request ids: request_id everywhere -----------------------------------------------------
def _record(**extra: Any) -> RequestRecord:
    return RequestRecord(
        run_id="run_1",
        agent_path=("A",),
        kind="text",
        question="Q?",
        payload={},
        **extra,
    )


def test_request_record_id_is_a_deprecated_alias_of_request_id() -> None:
    record = _record(request_id="req_1")
    assert record.request_id == "req_1"
    with pytest.warns(DeprecationWarning, match="RequestRecord.id is deprecated"):
        assert record.id == "req_1"
    with pytest.warns(DeprecationWarning, match=r"RequestRecord\(id=...\) is deprecated"):
        old = _record(id="req_2")
    assert old.request_id == "req_2"
    with pytest.raises(TypeError, match="both request_id and id"), pytest.warns(DeprecationWarning):
        _record(request_id="req_1", id="req_2")
    with pytest.raises(TypeError, match="needs request_id"):
        _record()


# -- a text question with options, answered by 0-based index --------------------------------
def _picker() -> Agent:
    """Asks a text question with options, then says which option it got."""

    def model(messages: Sequence[Message], info: ModelRequestParams):
        if info.turn == 0:
            return tool_call(
                "ask_user", _id="ask", question="Which database?", options=["Postgres", "SQLite"]
            )
        [result] = [m.content for m in messages if isinstance(m, ToolResultMessage)]
        return text(f"picked {result}")

    return Agent("Picker", model=FunctionModel(model), tools=[ask_user()])


async def _answer_live(answer: Any) -> tuple[str | None, list[str]]:
    refusals: list[str] = []
    with anyio.fail_after(10):
        async with _picker().stream("go") as run:
            async for event in run:
                if isinstance(event, ClarificationRequest):
                    for bad in (True, 2, -1, 1.0):
                        with pytest.raises(InvalidAnswerError) as refused:
                            await run.respond(event.request_id, bad)
                        refusals.append(str(refused.value))
                    await run.respond(event.request_id, answer)
    return run.result.output, refusals


async def test_text_question_takes_an_index_through_run_respond() -> None:
    output, refusals = await _answer_live(1)
    assert output == "picked SQLite"
    assert "got a bool" in refusals[0]
    assert "index 2 is out of range: there are 2 options" in refusals[1]
    assert "index -1 is out of range" in refusals[2]
    assert "got float" in refusals[3]
    output, _ = await _answer_live(0)
    assert output == "picked Postgres"
    output, _ = await _answer_live("sqlite")  # by text, any case, as before
    assert output == "picked SQLite"


async def _interrupted(store: SQLiteStore) -> tuple[str, RequestRecord]:
    result = await _picker().run("go", store=store, on_unhandled="interrupt")
    assert result.status == "interrupted"
    [record] = await store.list_requests(run_id=result.run_id)
    return result.run_id, record


async def test_text_question_takes_an_index_through_the_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        run_id, record = await _interrupted(store)
        with pytest.raises(InvalidAnswerError, match="got a bool"):
            await respond(store, record.request_id, False)
        with pytest.raises(InvalidAnswerError, match="out of range"):
            await respond(store, record.request_id, 5)
        still = await store.get_request(record.request_id)
        assert still is not None and still.status == "pending"  # refused: nothing changed
        answered = await respond(store, record.request_id, 1)
        assert answered.answer == "SQLite"  # stored in the option's own spelling
        done = await _picker().resume(run_id, store=store)
        assert done.output == "picked SQLite"
    finally:
        await store.aclose()


async def test_text_question_takes_an_index_through_resume_answers(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        run_id, record = await _interrupted(store)
        with pytest.raises(InvalidAnswerError, match="got a bool"):
            await _picker().resume(run_id, store=store, answers={record.request_id: True})
        done = await _picker().resume(run_id, store=store, answers={record.request_id: 0})
        assert done.output == "picked Postgres"
    finally:
        await store.aclose()
