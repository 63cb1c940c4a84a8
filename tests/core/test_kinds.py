"""Question kinds are one registry: ``QuestionKind``, ``register_kind``, ``ctx.ask_kind``, the
answer schema that travels with the question, one answer check and one typed-text reader.

The ``rating`` kind of ``tests/rating_kind.py`` is the worked example; the other paths it
takes (a store answered from another process, ``hpd-agent answer``, the web, Temporal, MCP,
A2A, the console, the browser) are tested beside each path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import rating_kind
from rating_kind import QUESTION, RATING, rate_plan

from hpd_agent import (
    Agent,
    ClarificationRequest,
    InvalidAnswerError,
    ToolCallFinished,
    ToolContext,
    UserError,
    tool,
)
from hpd_agent.events import dump_event, load_event
from hpd_agent.questions import (
    QUESTION_KINDS,
    KindQuestion,
    Question,
    QuestionKind,
    answer_schema_of,
    check_answer,
    kind_named,
    parse_typed,
    register_kind,
    restore_question,
    validate_answer,
)
from hpd_agent.testing import ScriptedHuman, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "integer", "minimum": 1, "maximum": 5}


def _agent(*tools: Any) -> Agent:
    calls = [tool_call(t.name) for t in tools]
    return Agent("Planner", model=ScriptedModel([*calls, text("done")]), tools=list(tools))


def _question(kind: str = "rating", **fields: Any) -> ClarificationRequest:
    return ClarificationRequest(
        run_id="r", agent_path=("Planner",), depth=0, request_id="q1", question="?",
        question_kind=kind, **fields,
    )  # fmt: skip


# -- the registry ---------------------------------------------------------------------------
def test_the_built_in_kinds_are_registered_like_any_kind() -> None:
    assert QUESTION_KINDS == ("text", "input", "choice", "confirm", "action", "custom")
    for name in QUESTION_KINDS:
        kind = kind_named(name)
        assert isinstance(kind, QuestionKind) and kind.name == name and kind.label
        assert register_kind(kind) is kind  # the same object: nothing happens
    assert kind_named("rating") is RATING
    assert kind_named("no-such-kind") is None


def test_a_name_is_registered_once_and_a_built_in_kind_cannot_be_replaced() -> None:
    assert register_kind(RATING) is RATING  # a module imported twice registers it again
    with pytest.raises(UserError, match="another question kind named 'rating'"):
        register_kind(QuestionKind("rating", lambda data: SCHEMA))
    with pytest.raises(UserError, match="'confirm' is a built-in question kind"):
        register_kind(QuestionKind("confirm", lambda data: {"type": "boolean"}))
    with pytest.raises(UserError, match="takes a QuestionKind, got dict"):
        register_kind({"name": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"name": ""}, "a question kind's name is a letter"),
        ({"name": "1star"}, "a question kind's name is a letter"),
        ({"name": "x" * 65}, "a question kind's name is a letter"),
        ({"answer_schema": SCHEMA}, "answer_schema must be a function"),
        ({"parse_text": "4"}, "parse_text must be a function or None"),
        ({"label": ""}, "label must be text of 1 to 200 characters"),
    ],
)
def test_a_kind_is_checked_when_it_is_made(fields: dict[str, Any], why: str) -> None:
    given: dict[str, Any] = {"name": "stars", "answer_schema": rating_kind.rating_schema}
    with pytest.raises(UserError, match=why):
        QuestionKind(**{**given, **fields})


# -- asking one -----------------------------------------------------------------------------
async def test_ask_kind_carries_the_answer_schema_and_label_and_respond_checks_them() -> None:
    async with _agent(rate_plan).stream("plan") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert event.question_kind == "rating" and event.question == QUESTION
                assert (event.answer_schema, event.label) == (SCHEMA, "Rate 1–5")
                # The stored shape keeps them: a record loaded elsewhere has them too.
                assert load_event(dump_event(event)) == event
                with pytest.raises(InvalidAnswerError, match="9 is greater than the maximum of 5"):
                    await run.respond(event.request_id, 9)
                with pytest.raises(InvalidAnswerError, match="'4' is not of type 'integer'"):
                    await run.respond(event.request_id, "4")
                assert await run.respond(event.request_id, 4) == 4
            if isinstance(event, ToolCallFinished):
                assert event.result == "rated 4 of 5"
    assert run.result.status == "completed"


async def test_every_built_in_question_carries_its_answer_schema_too() -> None:
    @tool
    async def pick(ctx: ToolContext) -> str:
        return str(await ctx.ask_choice("Pick", ["a", "b"], multiple=True))

    human = ScriptedHuman().choose("Pick", [1])
    await _agent(pick).run("go", handler=human)
    (asked,) = human.asked
    assert isinstance(asked, ClarificationRequest) and asked.label == "Choice"
    assert asked.answer_schema == {
        "type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1,
    }  # fmt: skip


async def test_asking_a_kind_nobody_registered_says_how_to_register_one() -> None:
    @tool
    async def ask_stars(ctx: ToolContext) -> str:
        return str(await ctx.ask_kind("no-such-kind", "Stars?"))

    model = ScriptedModel([tool_call("ask_stars"), text("done")])
    await Agent("A", model=model, tools=[ask_stars]).run("go")
    told = str(model.requests[1][-1].content)  # type: ignore[union-attr]
    assert "no question kind named 'no-such-kind' is registered" in told
    assert "hpd_agent.questions.register_kind" in told


_REMOTE_REF = register_kind(QuestionKind("test.remote_ref", lambda d: {"$ref": "https://x.io/s"}))
_FAILING = register_kind(QuestionKind("test.failing", lambda d: 1 / 0))


def test_a_kind_whose_answer_schema_is_not_a_safe_schema_is_refused_when_asked() -> None:
    for kind, why in [(_REMOTE_REF, "points outside the schema"), (_FAILING, "division by zero")]:
        spec = KindQuestion(kind.name, question="?")
        with pytest.raises(UserError, match=why):
            spec.build(request_id="q", asker=_Asker())


class _Asker:
    run_id = "r"
    agent_path = ("A",)
    depth = 0
    tool_name = "t"
    tool_call_id = "c"
    invocation_id = "i"


class _Stars(Question):
    """What issue 33 found: accepted live, refused by every other path."""

    kind = "stars"
    __slots__ = ()

    def validate(self, answer: Any) -> Any:
        if answer in (1, 2, 3):
            return answer
        raise ValueError("one to three stars")


async def test_a_question_overriding_validate_without_a_registered_kind_is_refused() -> None:
    @tool
    async def ask_stars(ctx: ToolContext) -> str:
        return str(await ctx.request(_Stars(question="Stars?")))

    model = ScriptedModel([tool_call("ask_stars"), text("done")])
    human = ScriptedHuman().answer("Stars?", 2)
    await Agent("A", model=model, tools=[ask_stars]).run("go", handler=human)
    told = str(model.requests[1][-1].content)  # type: ignore[union-attr]
    assert "register a QuestionKind for 'stars' (hpd_agent.questions.register_kind)" in told
    assert "instead of overriding validate" in told
    assert human.asked == []  # refused before anyone was asked


# -- one check, from the event alone ----------------------------------------------------------
def test_an_event_of_a_kind_this_process_never_registered_is_checked_by_its_schema() -> None:
    event = _question("ticket.priority", answer_schema={"enum": ["low", "high"]}, label="Priority")
    assert kind_named("ticket.priority") is None
    assert validate_answer(event, "high") == "high"
    with pytest.raises(InvalidAnswerError, match="'urgent' is not one of"):
        validate_answer(event, "urgent")
    spec = restore_question(event)  # rebuilt elsewhere: the same question, the same check
    assert spec.build(request_id="q1", asker=_Asker()).answer_schema == event.answer_schema
    assert spec.validate("low") == "low"
    with pytest.raises(ValueError, match="is not one of"):
        spec.validate("urgent")
    # Without a schema (recorded before schemas travelled) a kind unknown here fits nothing.
    with pytest.raises(InvalidAnswerError, match=r"unknown question kind 'ticket\.priority'"):
        validate_answer(_question("ticket.priority"), "high")


def test_an_old_event_without_a_schema_falls_back_to_the_registered_kind() -> None:
    event = _question()
    assert event.answer_schema is None
    assert validate_answer(event, 3) == 3
    assert check_answer("rating", 5) == 5
    with pytest.raises(InvalidAnswerError, match="0 is less than the minimum of 1"):
        validate_answer(event, 0)
    assert answer_schema_of(event) == SCHEMA


def test_the_schema_carried_wins_over_this_process_kind_of_the_same_name() -> None:
    # A question relayed from elsewhere keeps the asker's schema, even where the name is known.
    event = _question(answer_schema={"type": "integer", "minimum": 1, "maximum": 10})
    assert validate_answer(event, 9) == 9


def test_a_relayed_question_keeps_its_schema_and_label() -> None:
    spec = KindQuestion(
        "ticket.priority", question="?", schema={"enum": ["low", "high"]}, label="Priority"
    )
    built = spec.build(request_id="q", asker=_Asker())
    assert isinstance(built, ClarificationRequest)
    assert (built.question_kind, built.answer_schema, built.label) == (
        "ticket.priority", {"enum": ["low", "high"]}, "Priority",
    )  # fmt: skip
    with pytest.raises(UserError, match="invalid answer schema for 'x'"):
        KindQuestion("x", question="?", schema={"type": "nonsense"})
    with pytest.raises(UserError, match="the question's data must be JSON data"):
        KindQuestion("rating", question="?", data={"when": object()})


# -- typed text -----------------------------------------------------------------------------
@pytest.mark.parametrize(("typed", "stars"), [("4", 4), (" 4/5 ", 4), ("****", 4), ("1", 1)])
def test_the_kinds_own_reader_reads_typed_text(typed: str, stars: int) -> None:
    assert parse_typed(_question(answer_schema=SCHEMA), typed) == stars


def test_where_the_kind_is_unknown_its_schema_reads_typed_text() -> None:
    event = _question("stars.elsewhere", answer_schema=SCHEMA)
    assert parse_typed(event, "4") == 4
    with pytest.raises(ValueError, match=r"^Type a whole number from 1 to 5\.$"):
        parse_typed(event, "4/5")
    with pytest.raises(ValueError, match="Rate from 1 to 5"):
        parse_typed(_question(answer_schema=SCHEMA), "lots")


def _schema_question(schema: Mapping[str, Any]) -> ClarificationRequest:
    return _question("test.by_schema", answer_schema=dict(schema))


@pytest.mark.parametrize(
    ("schema", "typed", "value"),
    [
        ({"type": "boolean"}, "Yes", True),
        ({"type": "boolean"}, "n", False),
        ({"enum": ["low", "mid", "high"]}, "2", "mid"),  # 1 is the first, as everywhere typed
        ({"enum": ["low", "mid", "high"]}, "HIGH", "high"),
        ({"enum": [10, 20, 30]}, "20", 20),  # a value first, then a number
        ({"enum": [10, 20, 30]}, "2", 20),
        ({"type": "array", "items": {"enum": ["a", "b", "c"]}}, "3, a", ["c", "a"]),
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "integer"}, "4.0", 4),
        ({"type": "string"}, '{"not": "parsed"}', '{"not": "parsed"}'),
        ({"type": "object"}, '{"a": 1}', {"a": 1}),
        ({}, "[1, 2]", [1, 2]),
        ({}, "plain words", "plain words"),  # no JSON, but any JSON takes text
    ],
)
def test_typed_text_follows_the_answer_schema(
    schema: dict[str, Any], typed: str, value: Any
) -> None:
    assert parse_typed(_schema_question(schema), typed) == value


@pytest.mark.parametrize(
    ("schema", "typed", "why"),
    [
        ({"type": "boolean"}, "maybe", "Answer y or n."),
        ({"enum": ["low", "high"]}, "3", "There is no option 3: type a number from 1 to 2"),
        ({"type": "number"}, "NaN", "Type a number."),
        ({"type": "object"}, "{nope", "That is not valid JSON"),
        ({"type": "array", "items": {"enum": ["a"]}}, " , ", "Pick at least one option."),
    ],
)
def test_typed_text_that_cannot_be_read_says_what_to_type(
    schema: dict[str, Any], typed: str, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        parse_typed(_schema_question(schema), typed)


def test_typed_numbers_pick_built_in_options_from_1_while_the_api_index_is_0_based() -> None:
    choice = _question("choice", options=("Express", "FastAPI"), data={"multiple": False})
    assert parse_typed(choice, "1") == "Express"  # typed: 1 is the first
    assert validate_answer(choice, 1) == "FastAPI"  # the API's int index: 0 is the first
    confirm = _question("confirm")
    assert (parse_typed(confirm, "y"), parse_typed(confirm, "0")) == (True, False)


def _broken(text: str, data: Mapping[str, Any]) -> Any:
    raise KeyError("stars")


register_kind(QuestionKind("test.broken_reader", rating_kind.rating_schema, parse_text=_broken))


def test_a_kinds_reader_that_fails_says_so_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"question kind 'test.broken_reader' could not read '4'"):
        parse_typed(_question("test.broken_reader"), "4")
