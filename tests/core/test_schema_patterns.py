"""A custom question's schema patterns are matched in bounded time (RE2, ``patterns.py``).

A pattern like ``^(\\w+\\s?)*$`` made Python's backtracking ``re`` run for hours on a
50-character answer, holding the whole process. The catastrophic cases run in a child
process with a generous timeout: far above what the check takes now (milliseconds), far
below what backtracking needs (hours), so a regression fails instead of hanging CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import anyio
import pytest
from _child import PYTHONPATH

from hpd_agent import Agent, ClarificationRequest, InvalidAnswerError, ToolContext, UserError, tool
from hpd_agent.events import dump_event, load_event
from hpd_agent.questions import CustomQuestion, validate_answer
from hpd_agent.testing import ScriptedModel, text, tool_call

CATASTROPHIC = r"^(\w+\s?)*$"
SENTENCE = "Supercalifragilistic words take far too long here!"  # 50 characters, no match
LONG = "word " * 999 + "last!"  # 5,000 characters, no match
CHILD_TIMEOUT = 60
# 599 alternatives: a program of about 180,000 RE2 instructions from a 3.6 KB pattern.
HUGE = "(?:" + "|".join(f"a{{{n}}}" for n in range(1, 600)) + ")b"
RE2_REFUSAL = "cannot be used: patterns are matched by RE2, a linear-time engine"


def _in_child(scenario: str) -> list[str]:
    """The lines ``scenario`` (a function of this file) prints, run in a child process."""
    code = f"import runpy; runpy.run_path({__file__!r})[{scenario!r}]()"
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            timeout=CHILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{scenario} was not decided within {CHILD_TIMEOUT} s: patterns backtrack")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def _stored(schema: dict[str, Any]) -> ClarificationRequest:
    """A custom question as a store loads it: never through CustomQuestion's checks."""
    event = ClarificationRequest(
        run_id="run_1",
        agent_path=("A",),
        depth=0,
        request_id="req_1",
        question="?",
        question_kind="custom",
        data={"name": "r", "payload": {}, "schema": schema},
    )
    loaded = load_event(dump_event(event))
    assert isinstance(loaded, ClarificationRequest)
    return loaded


# -- the catastrophic pattern, decided at once (in a child: the old code never returns) --------
async def ask_words(ctx: ToolContext) -> str:
    """Ask for some words."""
    schema = {"type": "string", "pattern": CATASTROPHIC}
    return str(await ctx.ask_custom("words", "Some words?", schema=schema))


async def _respond_scenario() -> None:
    words = tool(ask_words)
    agent = Agent("W", model=ScriptedModel([tool_call(words.name), text("done")]), tools=[words])
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                for answer in (SENTENCE, LONG):
                    with pytest.raises(InvalidAnswerError, match="does not match") as info:
                        await run.respond(event.request_id, answer)
                    print("refused", len(answer), "too large" in str(info.value))
                print("accepted", await run.respond(event.request_id, "plain words here"))
    print("status", run.result.status)


def _child_respond() -> None:
    anyio.run(_respond_scenario)


def test_a_catastrophic_pattern_is_decided_at_once_through_respond() -> None:
    assert _in_child("_child_respond") == [
        "refused 50 False",
        "refused 5000 False",
        "accepted plain words here",
        "status completed",
    ]


def _child_validate() -> None:
    by_key = _stored(
        {"type": "object", "patternProperties": {CATASTROPHIC: {}}, "additionalProperties": False}
    )
    for key in (SENTENCE, LONG):
        with pytest.raises(InvalidAnswerError, match="does not match the schema"):
            validate_answer(by_key, {key: 1})  # "... not match any of the regexes", cut
        print("key refused", len(key))
    print("key accepted", validate_answer(by_key, {"two words": 1}))
    typed = _stored({"type": "object", "patternProperties": {CATASTROPHIC: {"type": "string"}}})
    print("typed", validate_answer(typed, {SENTENCE: 1, "ok": "x"}))  # SENTENCE: not matched
    names = _stored({"type": "object", "propertyNames": {"pattern": CATASTROPHIC}})
    with pytest.raises(InvalidAnswerError, match="does not match"):
        validate_answer(names, {LONG: 1})
    print("name refused")


def test_pattern_properties_and_property_names_are_decided_at_once() -> None:
    assert _in_child("_child_validate") == [
        "key refused 50",
        "key refused 5000",
        "key accepted {'two words': 1}",
        "typed {'Supercalifragilistic words take far too long here!': 1, 'ok': 'x'}",
        "name refused",
    ]


# -- patterns RE2 cannot run are refused up front, naming the pattern ----------------------
@pytest.mark.parametrize(
    ("schema", "shown"),
    [
        ({"type": "string", "pattern": "^(?=.*[0-9]).{8,}$"}, "'^(?=.*[0-9]).{8,}$'"),
        ({"pattern": r"(?<!x)y"}, r"'(?<!x)y'"),
        ({"patternProperties": {r"^(a)\1$": {}}}, r"'^(a)\\1$'"),
        ({"items": {"pattern": "(?>a+)b"}}, "'(?>a+)b'"),
        ({"pattern": r"[\p{L}\p{N}]{1000}"}, r"'[\\p{L}\\p{N}]{1000}'"),  # over RE2's memory
        ({"pattern": "(?=" + "x" * 500 + ")"}, "'(?=" + "x" * 76 + " ... [truncated 426"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_when_asked(schema: dict[str, Any], shown: str) -> None:
    with pytest.raises(UserError, match=RE2_REFUSAL) as info:
        CustomQuestion(name="r", question="?", schema=schema)
    assert f"the pattern {shown}" in str(info.value)
    assert len(str(info.value)) < 500
    # Stored elsewhere (it never passed CustomQuestion): its answers are refused cleanly.
    with pytest.raises(InvalidAnswerError, match=f"JSON schema is invalid: .*{RE2_REFUSAL}"):
        validate_answer(_stored(schema), "y")


def test_unevaluated_properties_beside_pattern_properties_are_refused() -> None:
    # jsonschema's unevaluatedProperties matches patternProperties with Python's re itself.
    schema = {"patternProperties": {"^x": {}}, "unevaluatedProperties": False}
    with pytest.raises(UserError, match="unevaluatedProperties cannot be used beside"):
        CustomQuestion(name="r", question="?", schema=schema)
    CustomQuestion(name="r", question="?", schema={"unevaluatedProperties": False})


def test_a_pattern_in_data_or_named_like_a_keyword_is_judged_right() -> None:
    # In const/enum/default/examples a "pattern" is data, not a pattern.
    CustomQuestion(name="r", question="?", schema={"const": {"pattern": "(?=a)"}})
    # A property called "const" holds a schema, whose pattern is checked.
    named = {"properties": {"const": {"pattern": "(?=a)"}}}
    with pytest.raises(UserError, match=RE2_REFUSAL):
        CustomQuestion(name="r", question="?", schema=named)


# -- one answer's pattern work is bounded, refused past it, never turned into a pass -------
@pytest.mark.parametrize(
    ("schema", "answer"),
    [
        ({"pattern": HUGE}, "a" * 200),
        ({"not": {"pattern": HUGE}}, "a" * 200),  # an error under not would be a pass
        ({"anyOf": [{"pattern": HUGE}, {"type": "string"}]}, "a" * 200),
        ({"items": {"pattern": HUGE}}, ["a" * 20] * 10),  # the checks' sum is bounded
        ({"patternProperties": {HUGE: {}}}, {"a" * 20 * n: n for n in range(1, 5)}),
        ({"items": {"format": "regex"}}, [HUGE, HUGE]),  # compiling counts too
    ],
)
def test_pattern_work_past_the_budget_is_refused(schema: dict[str, Any], answer: Any) -> None:
    question = CustomQuestion(name="r", question="?", schema=schema)
    with pytest.raises(ValueError, match="too large to check in bounded time") as info:
        question.validate(answer)
    assert len(str(info.value)) < 500


def test_a_huge_pattern_still_checks_short_answers() -> None:
    question = CustomQuestion(name="r", question="?", schema={"pattern": HUGE})
    assert question.validate("a" * 20 + "b") == "a" * 20 + "b"
    with pytest.raises(ValueError, match="does not match"):
        question.validate("a" * 20)


# -- ordinary patterns still work, with RE2's (ECMA-262-like) meaning ----------------------
@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"^[a-z]+$", "abc", "abc1"),
        ("b", "abc", "xyz"),  # like re.search: anywhere unless anchored
        (r"^\d{3}-\d{4}$", "555-1234", "555-12345"),
        (r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", "ada@example.org", "ada@example"),
        (r"^(?i)yes$", "YeS", "yes!"),
        (r"^\p{Lu}\p{Ll}+$", "Élodie", "élodie"),  # Unicode classes (Python's re has none)
        (r"^[\u00c0-\u00ff]+$", "àéÿ", "abc"),  # ECMA-262 \u escapes
        (r"^\uD83D\uDE00$", "\U0001f600", "\ud83d\ude00x"),  # a surrogate pair: one character
        (r"^\u{1F600}$", "\U0001f600", ":)"),
        (r"^(?<year>\d{4})-(?P<month>\d{2})$", "2024-05", "24-05"),  # both named-group forms
        (r"^\d+$", "123", "١٢٣"),  # \d is ASCII, as in ECMA-262 (Python's re: any digit)
        (r"^abc$", "abc", "abc\n"),  # $ is the very end (Python's re: also before a "\n")
        (r"^\\u0041$", "\\u0041", "A"),  # an escaped backslash keeps "u0041" literal
    ],
)
def test_ordinary_patterns_check_answers(pattern: str, good: str, bad: str) -> None:
    question = CustomQuestion(name="r", question="?", schema={"type": "string", "pattern": pattern})
    assert question.validate(good) == good
    with pytest.raises(ValueError, match="does not match"):
        question.validate(bad)
    keyed = {"type": "object", "patternProperties": {pattern: {"const": 1}}}
    question = CustomQuestion(name="r", question="?", schema=keyed)
    assert question.validate({good: 1}) == {good: 1}
    with pytest.raises(ValueError, match="1 was expected"):
        question.validate({good: 2})


def test_the_regex_format_means_what_re2_runs() -> None:
    question = CustomQuestion(name="r", question="?", schema={"format": "regex"})
    assert question.validate(r"^\p{L}+$") == r"^\p{L}+$"
    with pytest.raises(ValueError, match="is not a 'regex'"):
        question.validate("(?=a)")


def test_an_answer_with_a_lone_surrogate_is_matched_not_crashed() -> None:
    question = CustomQuestion(name="r", question="?", schema={"pattern": "^x.a$"})
    assert question.validate("x\udc00a") == "x\udc00a"  # the half is one character, U+FFFD
    with pytest.raises(ValueError, match="does not match"):
        question.validate("x\udc00\udc00a")
