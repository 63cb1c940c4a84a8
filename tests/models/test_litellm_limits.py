"""LiteLLMModel at a provider's limits, against a loopback OpenAI-compatible server: token limit
(``finish_reason="length"``), ``Retry-After``, missing and rejected keys, ``api_base``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from _openai_server import (
    Error,
    OpenAIServer,
    Reply,
    completion,
    text_stream,
    tool_call_stream,
)
from _openai_server import litellm_model as _model
from _trees import write_file_tool as _write_tool

from hpd_agent import Agent
from hpd_agent.events import AgentFinished, RunFinished, ToolCallFinished
from hpd_agent.exceptions import ModelAuthenticationError, ModelBadRequestError, UserError
from hpd_agent.messages import UserMessage
from hpd_agent.models import LiteLLMModel, ModelRequestParams, infer_model
from hpd_agent.testing import ScriptedModel, text

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")]

CUT_ARGS = '{"path": "notes.txt", "content": "a long text that the token limit cuts he'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # litellm runs on asyncio only


def _like_llama_cpp(reply: Reply) -> Any:
    """A script that fails every request echoing unparsable tool-call arguments with HTTP 500
    (what llama.cpp does), and otherwise sends ``reply``."""

    def answer(body: dict[str, Any]) -> Reply:
        for m in body["messages"]:
            for c in m.get("tool_calls") or ():
                try:
                    json.loads(c["function"]["arguments"])
                except ValueError:
                    return Error(500, "Failed to parse tool call arguments as JSON", "server_error")
        return reply

    return answer


# -- the token limit ---------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
async def test_a_tool_call_cut_off_by_the_token_limit_is_not_run_and_not_echoed(
    server: OpenAIServer, allow_model_requests: None, stream: bool
) -> None:
    if stream:
        server.push(tool_call_stream([("call_1", "write_file", CUT_ARGS)], finish="length"))
    else:
        server.push(completion(None, [("write_file", CUT_ARGS)], finish="length"))
    server.script(_like_llama_cpp(("I will retry with less.", [])))
    written: list[str] = []
    agent = Agent("Writer", model=_model(server, stream=stream), tools=[_write_tool(written)])
    results: list[ToolCallFinished] = []
    async with agent.stream("Write notes") as run:
        async for event in run:
            if isinstance(event, ToolCallFinished):
                results.append(event)
    assert written == []  # never run with half its arguments
    assert len(results) == 1 and results[0].is_error
    assert "cut off by the token limit" in results[0].result
    assert "shorter arguments" in results[0].result
    # The next turn was accepted: the broken arguments were not sent back.
    assert run.result.status == "completed"
    assert run.result.output == "I will retry with less."
    second = server.requests[1]["messages"]
    call = second[-2]["tool_calls"][0]
    assert call["function"]["name"] == "write_file"
    assert json.loads(call["function"]["arguments"]) == {}
    assert second[-1]["role"] == "tool"
    assert "cut off by the token limit" in second[-1]["content"]


async def test_a_whole_call_next_to_a_cut_one_still_runs(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    whole = json.dumps({"path": "a.txt", "content": "short"})
    server.push(
        tool_call_stream(
            [("call_a", "write_file", whole), ("call_b", "write_file", CUT_ARGS)],
            finish="length",
        )
    )
    server.script(_like_llama_cpp(("done", [])))
    written: list[str] = []
    agent = Agent("Writer", model=_model(server), tools=[_write_tool(written)])
    result = await agent.run("Write two files")
    assert written == ["a.txt"]
    calls = server.requests[1]["messages"][-3]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "a.txt", "content": "short"},
        {},
    ]
    assert result.output == "done"


@pytest.mark.parametrize("stream", [True, False])
async def test_an_answer_cut_off_by_the_token_limit_is_reported_truncated(
    server: OpenAIServer, allow_model_requests: None, stream: bool
) -> None:
    cut: Reply = (
        text_stream(["The answer is a long ", "story that"], finish="length")
        if stream
        else completion("The answer is a long story that", finish="length")
    )
    server.push(cut, ("A whole answer.", []))
    agent = Agent("A", model=_model(server, stream=stream))
    finished: list[AgentFinished] = []
    async with agent.stream("Tell me") as run:
        async for event in run:
            if isinstance(event, AgentFinished):
                finished.append(event)
    assert run.result.output == "The answer is a long story that"
    assert run.result.truncated is True
    assert [f.truncated for f in finished] == [True]
    again = await agent.run("Tell me")
    assert again.output == "A whole answer."
    assert again.truncated is False


async def test_finish_reason_is_read_from_the_response(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(
        text_stream(["hi"]),
        tool_call_stream([("c", "write_file", "{}")]),
        completion("hi", finish="content_filter"),
    )
    params = ModelRequestParams()
    messages = [UserMessage(content="hi")]
    streamed = _model(server)
    assert (await streamed.request(messages, params)).finish_reason == "stop"
    assert (await streamed.request(messages, params)).finish_reason == "tool_calls"
    whole = _model(server, stream=False)
    assert (await whole.request(messages, params)).finish_reason == "content_filter"


# -- usage of a failed agent -------------------------------------------------------------------
async def test_a_failed_agent_reports_the_usage_it_spent(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(
        tool_call_stream(
            [("call_1", "write_file", '{"path": "a", "content": "b"}')], usage=(20, 9)
        ),
        Error(400, "Invalid value for 'messages'"),
    )
    agent = Agent("A", model=_model(server), tools=[_write_tool([])])
    finished: list[AgentFinished | RunFinished] = []
    with pytest.raises(ModelBadRequestError):
        async with agent.stream("go") as run:
            async for event in run:
                if isinstance(event, (AgentFinished, RunFinished)):
                    finished.append(event)
    assert [(f.kind, f.status) for f in finished] == [
        ("agent_finished", "failed"),
        ("run_finished", "failed"),
    ]
    for f in finished:
        assert (f.usage.requests, f.usage.input_tokens, f.usage.output_tokens) == (1, 20, 9)


# -- Retry-After -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "header", "stream"),
    [
        (429, {"Retry-After": "1"}, True),
        (503, {"Retry-After": "1"}, False),
        (429, {"retry-after-ms": "1000"}, True),
    ],
)
async def test_retry_after_sets_the_wait_before_the_retry(
    server: OpenAIServer,
    allow_model_requests: None,
    status: int,
    header: dict[str, str],
    stream: bool,
) -> None:
    server.push(Error(status, "slow down", "rate_limit_error", headers=header), ("ok", []))
    model = _model(server, stream=stream, max_retries=1, retry_base_delay=0.001)
    response = await model.request([UserMessage(content="hi")], ModelRequestParams())
    assert response.text == "ok"
    waited = server.times[1] - server.times[0]
    assert 0.9 <= waited < 10  # not the 1 ms backoff: what the provider asked for


async def test_retry_after_is_capped_by_retry_max_delay(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(
        Error(429, "slow down", "rate_limit_error", headers={"Retry-After": "3600"}), ("ok", [])
    )
    model = _model(server, max_retries=1, retry_base_delay=0.001, retry_max_delay=0.5)
    await model.request([UserMessage(content="hi")], ModelRequestParams())
    waited = server.times[1] - server.times[0]
    assert 0.45 <= waited < 10


async def test_retry_after_as_an_http_date(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    from email.utils import formatdate

    # Two seconds ahead, at the header's one-second resolution: at least one second's wait.
    when = formatdate(time.time() + 2, usegmt=True)
    server.push(Error(503, "busy", "server_error", headers={"Retry-After": when}), ("ok", []))
    model = _model(server, max_retries=1, retry_base_delay=0.001)
    await model.request([UserMessage(content="hi")], ModelRequestParams())
    assert 0.9 <= server.times[1] - server.times[0] < 10


# -- API keys ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "variable"),
    [("openai/gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-3-5-haiku", "ANTHROPIC_API_KEY")],
)
async def test_a_missing_key_fails_at_once_naming_the_variable(
    allow_model_requests: None, monkeypatch: pytest.MonkeyPatch, model: str, variable: str
) -> None:
    monkeypatch.delenv(variable, raising=False)
    # Retries would take minutes at this delay: the error must come before any of them.
    slow = LiteLLMModel(model, max_retries=5, retry_base_delay=60)
    started = time.monotonic()
    with pytest.raises(ModelAuthenticationError) as info:
        await Agent("A", model=slow).run("hi")
    assert time.monotonic() - started < 30
    message = str(info.value)
    assert f"no API key: set the {variable} environment variable" in message
    assert "\n" not in message


_KEYED_MODELS = [
    "openai/gpt-4o-mini",
    "openai:gpt-4o",
    "anthropic/claude-3-5-haiku",
    "Anthropic:claude-3-5-haiku",
    "gemini/gemini-1.5-flash",
    "groq/llama3-8b-8192",
    "mistral/mistral-small",
    "deepseek/deepseek-chat",
    "openrouter/openai/gpt-4o",
    "xai/grok-2",
    "cohere/command-r",
    "together_ai/meta-llama/Llama-3-8b",
    "cerebras/llama3.1-8b",
    "ollama/llama3:8b",
    "ollama_chat/llama3",
]
_KEY_VARIABLES = sorted(
    {"ANTHROPIC_AUTH_TOKEN", "GOOGLE_API_KEY", "GEMINI_API_KEY", "TOGETHERAI_API_KEY"}
    | {f"{p.upper()}_API_KEY" for p in ["openai", "anthropic", "groq", "mistral", "deepseek"]}
    | {f"{p.upper()}_API_KEY" for p in ["openrouter", "xai", "cohere", "cerebras"]}
)


@pytest.mark.parametrize("model", _KEYED_MODELS)
@pytest.mark.parametrize("given", [None, *_KEY_VARIABLES])
def test_the_key_check_without_litellm_agrees_with_litellms(
    monkeypatch: pytest.MonkeyPatch, model: str, given: str | None
) -> None:
    # hpd-agent says a missing key before litellm has loaded (models/_keys): where it tells
    # at all, it tells what litellm's own check tells, in the same words.
    from hpd_agent.models import litellm_name
    from hpd_agent.models._keys import missing_key, no_key_error
    from hpd_agent.models.litellm import check_credentials, litellm

    for variable in _KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    if given is not None:
        monkeypatch.setenv(given, "sk-x")
    missing = missing_key(model)
    assert missing is not None, f"{model}: the table tells no key for it"
    providers = frozenset(str(getattr(p, "value", p)) for p in litellm.provider_list)
    try:
        check_credentials(litellm_name(model, providers), {}, hint="HINT")
    except ModelAuthenticationError as e:
        assert missing, f"{model} with {given}: litellm misses a key, the table none"
        mine = no_key_error(litellm_name(model, providers), missing, "HINT")
        assert str(mine) == str(e)
    else:
        assert missing == (), f"{model} with {given}: the table misses {missing}, litellm none"


async def test_a_rejected_key_fails_at_once_naming_the_variable(
    server: OpenAIServer, allow_model_requests: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-revoked")
    server.push(Error(401, "Incorrect API key provided", code="invalid_api_key"))
    model = LiteLLMModel("openai/gpt-4o-mini", api_base=server.url, max_retries=5)
    with pytest.raises(ModelAuthenticationError) as info:
        await model.request([UserMessage(content="hi")], ModelRequestParams())
    assert "OPENAI_API_KEY" in str(info.value)
    assert "Incorrect API key provided" in str(info.value)
    assert len(server.requests) == 1  # never retried
    assert server.headers[0]["authorization"] == "Bearer sk-revoked"


async def test_a_keyless_local_server_needs_no_key(
    server: OpenAIServer, allow_model_requests: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.push(("local", []), Error(401, "this server wants a key"))
    agent = Agent("A", model="openai/smollm2", api_base=server.url)
    assert (await agent.run("hi")).output == "local"
    assert server.requests[0]["model"] == "smollm2"
    # A local server that does want a key says so in one clear error.
    with pytest.raises(ModelAuthenticationError, match="api_key="):
        await agent.run("hi")


# -- api_base / api_key on Agent ---------------------------------------------------------------
async def test_agent_takes_api_base_and_api_key(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(("from the local server", []))
    agent = Agent("A", model="openai/local-model", api_base=server.url, api_key="sk-local")
    result = await agent.run("hi")
    assert result.output == "from the local server"
    assert server.headers[0]["authorization"] == "Bearer sk-local"
    assert isinstance(agent.model, LiteLLMModel)


def test_api_base_with_a_model_object_is_refused() -> None:
    with pytest.raises(UserError, match="api_base"):
        Agent("A", model=ScriptedModel([text("x")]), api_base="http://127.0.0.1:1/v1")
    with pytest.raises(UserError, match="api_key"):
        infer_model(ScriptedModel([text("x")]), api_key="sk-x")


# -- the CLI -----------------------------------------------------------------------------------
def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base.pop("OPENAI_API_BASE", None)
    # Real requests allowed: the key check comes first, and the only server is on loopback.
    base.pop("COLUMNS", None)  # written to a pipe: each message on one line
    base.update(env, PYTHONPATH=os.getcwd(), HPD_AGENT_ALLOW_MODEL_REQUESTS="1")
    return subprocess.run(
        [sys.executable, "-m", "hpd_agent.cli", *args],
        capture_output=True,
        text=True,
        env=base,
        timeout=120,
        input="hello\n",
    )


def _one_failure_line(out: subprocess.CompletedProcess[str]) -> str:
    both = out.stdout + out.stderr
    assert "Traceback" not in both
    lines = [line for line in both.splitlines() if "ModelAuthenticationError" in line]
    assert len(lines) == 1, both
    return lines[0]


@pytest.mark.parametrize("command", ["demo", "chat"])
def test_cli_reports_a_missing_key_once_in_one_line(command: str) -> None:
    out = _cli([command, "--model", "openai/gpt-4o-mini", "--yes"], {})
    line = _one_failure_line(out)
    assert "OPENAI_API_KEY" in line
    if command == "demo":
        assert out.returncode == 1


def test_cli_reports_a_rejected_key_once_in_one_line(server: OpenAIServer) -> None:
    server.script(lambda body: Error(401, "Incorrect API key provided", code="invalid_api_key"))
    env = {"OPENAI_API_KEY": "sk-revoked", "OPENAI_API_BASE": server.url}
    out = _cli(["demo", "--model", "openai/gpt-4o-mini", "--yes"], env)
    line = _one_failure_line(out)
    assert "OPENAI_API_KEY" in line and "Incorrect API key provided" in line
    assert out.returncode == 1
    assert len(server.requests) == 1
