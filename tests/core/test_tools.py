"""@tool: schema from signature and docstring, argument validation, sync and async calls."""

from __future__ import annotations

import threading
from typing import Literal

import pytest
from dirty_equals import IsStr
from inline_snapshot import snapshot

from hpd_agent import Agent, Tool, ToolContext, ToolDefinitionError, ask_user, tool
from hpd_agent.testing import ScriptedModel
from hpd_agent.tools import ToolArgumentsError, result_to_text


@tool
async def search(query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast") -> list[str]:
    """Search the knowledge base.

    Looks through every document.

    Args:
        query: What to look for.
        limit: At most this many hits,
            counted after dedup.
        mode: How hard to look.

    Returns:
        The hits.
    """
    return [query] * limit


def test_schema_from_signature_and_docstring() -> None:
    assert search.name == "search"
    assert search.description == "Search the knowledge base.\n\nLooks through every document."
    assert search.parameters == snapshot(
        {
            "properties": {
                "query": {"description": "What to look for.", "type": "string"},
                "limit": {
                    "default": 5,
                    "description": "At most this many hits, counted after dedup.",
                    "type": "integer",
                },
                "mode": {
                    "default": "fast",
                    "description": "How hard to look.",
                    "enum": ["fast", "deep"],
                    "type": "string",
                },
            },
            "required": ["query"],
            "type": "object",
        }
    )
    assert search.definition.to_openai()["function"]["name"] == "search"


def test_context_parameter_is_not_in_schema() -> None:
    @tool
    async def t(ctx: ToolContext, x: int) -> int:
        """T."""
        return x

    assert list(t.parameters["properties"]) == ["x"]
    # What an integration asks before running a tool outside the run (Temporal's activities).
    assert t.takes_context and not search.takes_context


def test_validation_fills_defaults_and_coerces() -> None:
    assert search.validate_arguments('{"query": "a"}') == {"query": "a", "limit": 5, "mode": "fast"}
    assert search.validate_arguments('{"query": "a", "limit": "3"}')["limit"] == 3


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"query": ', "Invalid arguments for tool 'search'"),
        ('{"limit": 3}', "query: Field required"),
        ('{"query": "a", "mode": "slow"}', "mode: Input should be 'fast' or 'deep'"),
        ("[1, 2]", "Invalid arguments for tool 'search'"),
    ],
)
def test_invalid_arguments_get_a_message_for_the_model(raw: str, expected: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        search.validate_arguments(raw)
    assert expected in str(info.value)


def test_no_parameter_tool_accepts_empty_object_only() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert ping.validate_arguments("") == {}
    assert ping.validate_arguments("{}") == {}
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        ping.validate_arguments("{oops")
    with pytest.raises(ToolArgumentsError, match="expected a JSON object"):
        ping.validate_arguments('"x"')


async def test_sync_tools_run_off_the_event_loop() -> None:
    seen: list[str] = []

    @tool
    def blocking(x: int) -> int:
        """Runs in a worker thread."""
        seen.append(threading.current_thread().name)
        return x * 2

    ctx = _ctx()
    assert await blocking.call(ctx, {"x": 21}) == 42
    assert seen and seen[0] != threading.main_thread().name


def test_decorator_options_and_names() -> None:
    @tool(name="write-file", description="Write.", requires_approval=True, timeout=3)
    async def write(path: str) -> None:
        """Ignored description."""

    assert (write.name, write.description, write.requires_approval, write.timeout) == (
        "write-file",
        "Write.",
        True,
        3,
    )
    assert repr(write) == "Tool('write-file')"


def test_bad_definitions_are_user_errors() -> None:
    with pytest.raises(ToolDefinitionError, match="must be 1-64"):
        Tool(lambda: None, name="has space")

    def star(*args: int) -> None: ...

    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        Tool(star)

    def uses(x: Opaque) -> None: ...

    with pytest.raises(ToolDefinitionError, match="unsupported parameter type"):
        Tool(uses)

    def unknown(x: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ToolDefinitionError, match="NoSuchType"):
        Tool(unknown)


def test_a_tool_factory_passed_uncalled_is_refused() -> None:
    # ``tools=[ask_user]`` instead of ``[ask_user()]``: the model would call the factory
    # (its arguments are timeout/name/description), get a Tool object back as text, and no
    # question would ever reach the human.
    with pytest.raises(ToolDefinitionError, match=r"pass ask_user\(\)"):
        Agent("a", model=ScriptedModel([]), tools=[ask_user])  # type: ignore[list-item]
    assert "ask_user" in Agent("a", model=ScriptedModel([]), tools=[ask_user()]).tools


def test_types_local_to_a_function_resolve() -> None:
    from pydantic import BaseModel

    class Point(BaseModel):
        x: int
        y: int

    @tool
    async def move(to: Point) -> str:
        """Move."""
        return f"{to.x},{to.y}"

    assert move.validate_arguments('{"to": {"x": 1, "y": 2}}')["to"] == Point(x=1, y=2)


class Opaque:
    """A type pydantic cannot describe."""


def test_approval_policy_callable() -> None:
    t = Tool(lambda path: None, name="rm", requires_approval=lambda a: a["path"].startswith("/"))
    assert t.needs_approval({"path": "/etc"}) is True
    assert t.needs_approval({"path": "tmp"}) is False


def test_result_to_text() -> None:
    assert result_to_text("plain") == "plain"
    assert result_to_text({"a": [1, 2]}) == '{"a":[1,2]}'
    assert result_to_text(None) == "null"
    assert result_to_text(object()) == IsStr(regex=r"<object object at .*>")


def _ctx() -> ToolContext:
    from hpd_agent.coordinator import Coordinator

    return ToolContext(
        coordinator=Coordinator("run_x"),
        agent_path=("A",),
        tool_name="t",
        tool_call_id="c1",
        call_path="run_x@0:c1",
        scope_path="run_x",
    )


def test_a_tool_context_shows_its_agent_path_as_people_read_it() -> None:
    from hpd_agent.coordinator import Coordinator

    ctx = ToolContext(
        coordinator=Coordinator("run_x"),
        agent_path=("Root", "Coder"),
        tool_name="t",
        tool_call_id="c1",
        call_path="run_x@0:c1",
        scope_path="run_x",
    )
    assert repr(ctx) == "ToolContext('t', path='Root > Coder')"


def test_results_with_lone_surrogates_become_storable_text() -> None:
    assert result_to_text("bad \ud800 text") == "bad \\ud800 text"
    as_text = result_to_text({"k": "\udfff"})
    assert "\\udfff" in as_text
    as_text.encode()  # UTF-8 now: a store can write it
    assert result_to_text("fine ✓ 😀") == "fine ✓ 😀"  # plain non-ASCII text is left alone


def test_argument_text_over_the_bound_is_refused_before_parsing() -> None:
    from hpd_agent.tools import MAX_ARGUMENT_CHARS

    raw = '{"query": "' + "q" * MAX_ARGUMENT_CHARS + '"}'
    with pytest.raises(ToolArgumentsError, match="more than the 1,000,000 allowed"):
        search.validate_arguments(raw)
    assert search.validate_arguments('{"query": "' + "q" * 1000 + '"}')["query"] == "q" * 1000
