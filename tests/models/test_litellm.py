"""LiteLLMModel, for real through litellm, against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest
import trio
from _openai_server import Error, OpenAIServer, Stream, chunk, text_stream, tool_call_stream
from _openai_server import litellm_model as _model

from hpd_agent import Agent, tool
from hpd_agent.events import AgentFinished, RunFinished, TextDelta, ToolCallFinished
from hpd_agent.exceptions import (
    ContextWindowExceededError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
    UserError,
)
from hpd_agent.messages import UserMessage
from hpd_agent.models import LiteLLMModel, ModelRequestParams, infer_model

# Marked here (not only by the conftest hook) so parametrized tests keep their parameters.
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # litellm runs on asyncio only


async def test_text_deltas_arrive_while_the_response_is_still_streaming(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    # The server holds back the last chunks until the test has seen the first TextDelta:
    # if the model buffered the response, the run would stall until the gate's bound.
    seen_first = threading.Event()
    reply = text_stream(["Hel", "lo, ", "world"], usage=(12, 5))
    reply.gate = (3, seen_first)
    server.push(reply)
    agent = Agent("Greeter", model=_model(server), instructions="Be brief.")
    deltas: list[str] = []
    async with agent.stream("Say hello") as run:
        async for event in run:
            if isinstance(event, TextDelta):
                deltas.append(event.text)
                seen_first.set()
            if isinstance(event, (AgentFinished, RunFinished)):
                assert event.usage.input_tokens == 12
                assert event.usage.output_tokens == 5
    assert deltas == ["Hel", "lo, ", "world"]
    assert run.result.output == "Hello, world"
    assert run.result.usage.input_tokens == 12
    assert run.result.usage.output_tokens == 5
    assert run.result.usage.requests == 1
    body = server.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello"},
    ]


async def test_parallel_tool_calls_with_interleaved_fragments_are_assembled(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    weather_args = json.dumps({"city": "Paris", "unit": "celsius"})
    time_args = json.dumps({"timezone": "Europe/Paris"})
    server.push(
        tool_call_stream(
            [("call_w", "get_weather", weather_args), ("call_t", "get_time", time_args)],
            fragment=3,
            text=["Checking both."],
            usage=(30, 10),
        ),
        text_stream(["It is 21C ", "at noon."], usage=(50, 6)),
    )
    got: list[tuple[str, Any]] = []

    @tool
    def get_weather(city: str, unit: str = "celsius") -> str:
        """Weather now.

        Args:
            city: The city.
            unit: celsius or fahrenheit.
        """
        got.append(("weather", (city, unit)))
        return f"21C in {city}"

    @tool
    def get_time(timezone: str) -> str:
        """Time now.

        Args:
            timezone: IANA name.
        """
        got.append(("time", timezone))
        return "12:00"

    agent = Agent("Assistant", model=_model(server), tools=[get_weather, get_time])
    finished: dict[str, str] = {}
    async with agent.stream("Weather and time in Paris?") as run:
        async for event in run:
            if isinstance(event, ToolCallFinished):
                finished[event.tool_call_id] = event.result
    assert sorted(got) == [("time", "Europe/Paris"), ("weather", ("Paris", "celsius"))]
    assert finished == {"call_w": "21C in Paris", "call_t": "12:00"}
    assert run.result.output == "It is 21C at noon."
    assert run.result.usage.input_tokens == 80
    assert run.result.usage.output_tokens == 16
    assert run.result.usage.requests == 2
    # The second request carries the assembled calls and their results, keyed by id.
    second = server.requests[1]["messages"]
    assistant = second[-3]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "Checking both."
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in assistant["tool_calls"]
    ] == [
        ("call_w", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("call_t", "get_time", {"timezone": "Europe/Paris"}),
    ]
    assert second[-2:] == [
        {"role": "tool", "tool_call_id": "call_w", "content": "21C in Paris"},
        {"role": "tool", "tool_call_id": "call_t", "content": "12:00"},
    ]
    tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert tools == {"get_weather", "get_time"}


async def test_calls_numbered_zero_by_the_provider_are_kept_apart_by_id(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    def call(cid: str, name: str, args: str) -> dict[str, Any]:
        return chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                ]
            }
        )

    server.push(
        Stream(
            [
                call("a1", "echo", '{"text": "one"}'),
                call("a2", "echo", '{"text": "two"}'),
                chunk({}, "tool_calls"),
            ],
            usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        ),
        text_stream(["done"]),
    )
    echoed: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What to echo.
        """
        echoed.append(text)
        return text

    result = await Agent("A", model=_model(server), tools=[echo]).run("go")
    assert sorted(echoed) == ["one", "two"]
    assert result.output == "done"


async def test_non_streaming_mode(server: OpenAIServer, allow_model_requests: None) -> None:
    server.push(("", [("add", '{"a": 2, "b": 3}')]), ("The sum is 5.", []))

    @tool
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: First.
            b: Second.
        """
        return a + b

    agent = Agent("Calc", model=_model(server, stream=False), tools=[add])
    deltas: list[str] = []
    async with agent.stream("2+3?") as run:
        async for event in run:
            if isinstance(event, TextDelta):
                deltas.append(event.text)
    assert run.result.output == "The sum is 5."
    assert deltas == ["The sum is 5."]  # the loop still emits the whole text once
    assert "stream" not in server.requests[0] or server.requests[0]["stream"] is False
    assert server.requests[1]["messages"][-1]["content"] == "5"
    assert run.result.usage.input_tokens == 22


async def test_model_string_resolves_to_litellm_and_settings_pass_through(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(text_stream(["ok"]))
    agent = Agent(
        "A",
        model="openai/gpt-4o-mini",
        model_settings={"api_base": server.url, "api_key": "sk-test", "temperature": 0.25},
    )
    assert isinstance(agent.model, LiteLLMModel)
    assert (await agent.run("hi")).output == "ok"
    assert server.requests[0]["temperature"] == 0.25
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert isinstance(infer_model("openai/gpt-4o"), LiteLLMModel)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            Error(
                401,
                "Incorrect API key provided",
                type="invalid_request_error",
                code="invalid_api_key",
            ),
            ModelAuthenticationError,
        ),
        (Error(404, "The model does not exist", code="model_not_found"), ModelNotFoundError),
        (Error(400, "Invalid value for 'messages'"), ModelBadRequestError),
        (
            Error(
                400,
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.",
                code="context_length_exceeded",
            ),
            ContextWindowExceededError,
        ),
        (Error(429, "Rate limit reached", type="rate_limit_error"), ModelRateLimitError),
        (
            Error(503, "The engine is currently overloaded", type="server_error"),
            ModelUnavailableError,
        ),
    ],
)
async def test_provider_errors_map_to_clear_exceptions(
    server: OpenAIServer, allow_model_requests: None, reply: Error, expected: type[ModelError]
) -> None:
    server.push(reply)
    model = _model(server)
    with pytest.raises(expected) as info:
        await model.request([UserMessage(content="hi")], ModelRequestParams())
    assert type(info.value) is expected
    assert info.value.status_code == reply.status
    assert reply.message in str(info.value)
    assert "openai/gpt-4o-mini" in str(info.value)
    assert len(server.requests) == 1


async def test_failed_model_call_fails_the_run_with_the_mapped_error(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(Error(401, "Incorrect API key provided"))
    agent = Agent("A", model=_model(server, max_retries=5, retry_base_delay=0.001))
    with pytest.raises(ModelAuthenticationError):
        await agent.run("hi")
    assert len(server.requests) == 1  # not transient: never retried


@pytest.mark.parametrize("stream", [True, False])
async def test_transient_errors_are_retried_then_succeed(
    server: OpenAIServer, allow_model_requests: None, stream: bool
) -> None:
    server.push(
        Error(429, "Rate limit reached", type="rate_limit_error"),
        Error(503, "overloaded", type="server_error"),
        ("Recovered.", []),
    )
    model = _model(server, stream=stream, max_retries=2, retry_base_delay=0.001)
    result = await Agent("A", model=model).run("hi")
    assert result.output == "Recovered."
    assert len(server.requests) == 3
    assert result.usage.requests == 1  # only the successful request counts


async def test_retries_give_up_after_max_retries(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(*[Error(429, "Rate limit reached", type="rate_limit_error")] * 4)
    model = _model(server, max_retries=2, retry_base_delay=0.001)
    with pytest.raises(ModelRateLimitError):
        await model.request([UserMessage(content="hi")], ModelRequestParams())
    assert len(server.requests) == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


async def test_refused_connection_fails_at_once_naming_the_address(
    allow_model_requests: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = f"http://127.0.0.1:{_free_port()}/v1"
    model = LiteLLMModel("openai/gpt-4o-mini", api_base=address, api_key="sk-test", max_retries=3)
    delays: list[int] = []
    monkeypatch.setattr(model, "_delay", lambda attempt, *_: delays.append(attempt) or 0.0)
    with pytest.raises(ModelUnavailableError) as info:
        await model.request([UserMessage(content="hi")], ModelRequestParams())
    assert delays == []  # not retried: nobody listens, waiting would not change that
    message = str(info.value)
    assert message == (
        f"openai/gpt-4o-mini: nothing is listening at {address} (connection refused): "
        "is the server running?"
    )
    # One line, not litellm's chain of wrappers (which called it a timeout).
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert not isinstance(info.value, ModelTimeoutError)


async def test_refused_connection_fails_the_run_at_once(allow_model_requests: None) -> None:
    address = f"http://127.0.0.1:{_free_port()}/v1"
    agent = Agent("Local", model="openai/served", api_base=address)
    with pytest.raises(ModelUnavailableError, match="nothing is listening at"):
        await agent.run("hi")


async def test_slow_provider_times_out(server: OpenAIServer, allow_model_requests: None) -> None:
    never = threading.Event()
    reply = text_stream(["late"])
    reply.gate = (0, never)
    server.push(reply)
    model = _model(server, timeout=0.3)
    try:
        with pytest.raises(ModelTimeoutError):
            await model.request([UserMessage(content="hi")], ModelRequestParams())
    finally:
        never.set()


async def test_real_requests_are_refused_unless_allowed(server: OpenAIServer) -> None:
    server.push(text_stream(["never sent"]))
    with pytest.raises(ModelError, match="disabled"):
        await _model(server).request([UserMessage(content="hi")], ModelRequestParams())
    assert server.requests == []


def test_trio_is_refused_with_a_clear_error(allow_model_requests: None) -> None:
    model = LiteLLMModel("openai/gpt-4o-mini", api_key="sk-test")
    with pytest.raises(UserError, match="asyncio"):
        trio.run(model.request, [UserMessage(content="hi")], ModelRequestParams())


def test_bad_settings_are_refused() -> None:
    with pytest.raises(UserError):
        LiteLLMModel("")
    with pytest.raises(UserError):
        LiteLLMModel("openai/gpt-4o-mini", max_retries=-1)


def test_importing_the_package_does_not_import_litellm() -> None:
    code = (
        "import sys, hpd_agent, hpd_agent.models, hpd_agent.testing, hpd_agent.cli\n"
        "from hpd_agent import ConsoleHandler\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
        "from hpd_agent.models import LiteLLMModel\n"
        "assert 'litellm' in sys.modules\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _failing_stream(pieces: list[str]) -> Stream:
    """Streams ``pieces``, then an error event in the middle of the stream."""
    reply = text_stream(pieces)
    error = {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
        }
    }
    reply.chunks.insert(1 + len(pieces), error)
    return reply


async def test_failure_after_text_was_streamed_is_not_retried(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(_failing_stream(["Hello ", "wor"]), text_stream(["never requested"]))
    model = _model(server, max_retries=3, retry_base_delay=0.001)
    shown: list[str] = []
    with pytest.raises(ModelUnavailableError, match="server had an error"):
        await model.request([UserMessage(content="hi")], ModelRequestParams(on_text=shown.append))
    # The user saw "Hello wor" already: a retry would show a second, different answer.
    assert shown == ["Hello ", "wor"]
    assert len(server.requests) == 1


async def test_failure_before_any_text_is_retried(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(_failing_stream([]), text_stream(["fine ", "now"]))
    model = _model(server, max_retries=1, retry_base_delay=0.001)
    shown: list[str] = []
    response = await model.request(
        [UserMessage(content="hi")], ModelRequestParams(on_text=shown.append)
    )
    assert response.text == "fine now"
    assert shown == ["fine ", "now"]
    assert len(server.requests) == 2
