"""The served agent on trio as on asyncio, and the forms' rules: which custom schemas go to
the client as they are, how a form's content becomes an answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_server_agents as agents
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from hpd_agent.events import ClarificationRequest, PermissionRequest
from hpd_agent.mcp import mcp_server
from hpd_agent.mcp._server_forms import form_for, is_flat
from hpd_agent.permissions import Approve, Deny

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_round_trip_on_each_backend(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPD_MCP_TEST_DIR", str(tmp_path))
    asked: list[str] = []

    async def answer(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "SQLite"})

    server = mcp_server(agents.planner)
    async with Client(server, mode=mode, elicitation_callback=answer) as client:
        result = await client.call_tool("Planner", {"query": "x"})
    assert not result.is_error
    assert asked == ["Planner > Clarifier: Which database should the plan assume?"]
    assert agents.counted("model") == ["Planner", "Clarifier", "Clarifier", "Clarifier", "Planner"]


FLAT_ONES: list[dict[str, Any]] = [
    {"type": "object", "properties": {}},
    {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "title": "E-mail"},
            "n": {"type": "number", "minimum": 0, "maximum": 9},
            "ok": {"type": "boolean", "default": False},
            "size": {"type": "string", "enum": ["s", "m"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "pick": {"type": "string", "oneOf": [{"const": "x", "title": "X"}]},
        },
        "required": ["email", "n"],
    },
]
NOT_FLAT: list[dict[str, Any]] = [
    {"type": "array", "items": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}},
    {"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "properties": {"a": {"$ref": "#/defs/x"}}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
]


@pytest.mark.parametrize("schema", FLAT_ONES)
def test_a_flat_schema_mcp_allows_goes_as_it_is(schema: dict[str, Any]) -> None:
    assert is_flat(schema)


@pytest.mark.parametrize("schema", NOT_FLAT)
def test_anything_else_is_asked_as_json_text(schema: dict[str, Any]) -> None:
    assert not is_flat(schema)
    form = form_for(_question("custom", data={"name": "n", "payload": {}, "schema": schema}))
    assert form.schema["properties"]["answer"]["type"] == "string"
    assert form.read({"answer": '{"a": 1}'}) == {"a": 1}
    with pytest.raises(ValueError, match="the answer is not JSON"):
        form.read({"answer": "{nope"})


def test_a_form_without_its_answer_is_refused() -> None:
    form = form_for(_question("text"))
    with pytest.raises(ValueError, match="the form has no answer"):
        form.read({})
    with pytest.raises(ValueError, match="the form has no answer"):
        form.read(None)


def test_the_context_and_the_refusal_are_in_the_message() -> None:
    form = form_for(_question("text", context="for the invoice"), note="too short")
    assert form.message == (
        "Root > Sub: What?\nfor the invoice\n(Your last answer was not accepted: too short)"
    )


def _permission() -> PermissionRequest:
    return PermissionRequest(
        run_id="r",
        agent_path=("Root",),
        depth=0,
        invocation_id="i",
        request_id="p1",
        tool_name="rm",
        arguments={"path": "/tmp/x"},
        tool_call_id="c",
    )


def test_permission_decisions() -> None:
    form = form_for(_permission())
    assert form.read({"decision": "approve_once"}) == Approve(scope="once")
    assert form.read({"decision": "approve_run"}) == Approve(scope="run")
    assert isinstance(form.read({"decision": "deny"}), Deny)
    with pytest.raises(ValueError, match="decision must be one of"):
        form.read({"decision": "maybe"})


def _question(kind: str, **fields: Any) -> ClarificationRequest:
    return ClarificationRequest(
        run_id="r",
        agent_path=("Root", "Sub"),
        depth=1,
        invocation_id="i",
        request_id="q1",
        question="What?",
        question_kind=kind,
        **fields,
    )


def test_a_refusal_quotes_at_most_200_characters_of_what_came() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    form = form_for(_permission())
    said = "decision must be one of approve_once, approve_run, deny, got "
    for decision, quoted in [("x" * 2_000_000, "'xxx"), (deep, "<list too large to show>")]:
        with pytest.raises(ValueError, match="decision must be one of") as refused:
            form.read({"decision": decision})
        assert str(refused.value).startswith(said + quoted)
        assert len(str(refused.value)) < len(said) + 250
    nested = form_for(_question("custom", data={"name": "n", "payload": {}, "schema": NOT_FLAT[1]}))
    with pytest.raises(ValueError, match=r"^the answer nests too deeply to be read as JSON$"):
        nested.read({"answer": "[" * 100_000 + "]" * 100_000})


RATING_SCHEMA = {"type": "integer", "minimum": 1, "maximum": 5}


def test_a_kind_of_the_apps_own_is_one_field_drawn_from_its_answer_schema() -> None:
    form = form_for(_question("rating", answer_schema=RATING_SCHEMA, label="Rate 1–5"))
    assert form.schema == {
        "type": "object",
        "properties": {"answer": {"title": "Answer", **RATING_SCHEMA}},
        "required": ["answer"],
    }
    assert form.read({"answer": 4}) == 4
    # A schema no single MCP field can hold: its answer as JSON text, as a custom one's.
    nested = form_for(_question("plan.steps", answer_schema={"type": "array", "items": {}}))
    assert nested.schema["properties"]["answer"]["description"] == "the answer as JSON"
    assert nested.read({"answer": "[1, 2]"}) == [1, 2]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_rating_is_asked_as_a_number_and_checked_by_the_served_run(mode: str) -> None:
    from rating_kind import QUESTION, rate_plan

    from hpd_agent import Agent
    from hpd_agent.testing import ScriptedModel, text, tool_call

    agent = Agent(
        "Planner",
        description="Plans, then asks for a rating.",
        model=ScriptedModel([tool_call("rate_plan"), text("done")]),
        tools=[rate_plan],
    )
    asked: list[types.ElicitRequestParams] = []

    async def rate(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        asked.append(params)
        stars = 9 if len(asked) == 1 else 4
        return types.ElicitResult(action="accept", content={"answer": stars})

    async with Client(mcp_server(agent), mode=mode, elicitation_callback=rate) as client:
        result = await client.call_tool("Planner", {"query": "x"})
    assert not result.is_error
    assert [p.message.splitlines()[0] for p in asked] == [f"Planner: {QUESTION}"] * 2
    schema = asked[0].requested_schema  # type: ignore[union-attr]
    assert schema["properties"]["answer"]["type"] == "integer"
    assert "9 is greater than the maximum of 5" in asked[1].message
    assert agent.model.requests[-1][-1].content == "rated 4 of 5"  # type: ignore[union-attr]
