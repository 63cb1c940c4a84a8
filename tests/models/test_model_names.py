"""Model strings in the ``provider:model`` form other frameworks use: accepted when litellm
knows the provider (turned into litellm's ``provider/model``), refused with litellm's
spelling otherwise."""

from __future__ import annotations

import pytest
from _openai_server import OpenAIServer, text_stream

from hpd_agent import Agent, UserError
from hpd_agent.models import LiteLLMModel, infer_model, litellm_name

PROVIDERS = frozenset({"openai", "anthropic", "ollama"})


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("openai:gpt-4o", "openai/gpt-4o"),
        ("anthropic:claude-3-5-sonnet-latest", "anthropic/claude-3-5-sonnet-latest"),
        ("ollama:llama3:8b", "ollama/llama3:8b"),  # the tag keeps its colon
        ("OpenAI:gpt-4o", "openai/gpt-4o"),
        # Already litellm's spelling, or names litellm reads as they are: unchanged.
        ("openai/gpt-4o", "openai/gpt-4o"),
        ("ollama/llama3:8b", "ollama/llama3:8b"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("ft:gpt-4o-mini:my-org:custom:id", "ft:gpt-4o-mini:my-org:custom:id"),
        ("bedrock.anthropic.claude-v2:1", "bedrock.anthropic.claude-v2:1"),
    ],
)
def test_names_litellm_can_read(given: str, expected: str) -> None:
    assert litellm_name(given, PROVIDERS) == expected


def test_an_unknown_provider_is_refused_with_litellms_spelling() -> None:
    with pytest.raises(UserError) as caught:
        litellm_name("nosuch:some-model", PROVIDERS)
    message = str(caught.value)
    assert "'nosuch' is not a provider litellm knows" in message
    assert "'provider/model'" in message
    assert "'nosuch/some-model'" in message


def test_the_resolver_checks_against_litellms_own_provider_list() -> None:
    model = infer_model("openai:gpt-4o")
    assert isinstance(model, LiteLLMModel)
    assert model.model == "openai/gpt-4o"
    groq = infer_model("groq:llama-3.1-8b-instant", api_key="k")
    assert isinstance(groq, LiteLLMModel) and groq.model == "groq/llama-3.1-8b-instant"
    with pytest.raises(UserError, match="'openia/gpt-4o'"):
        infer_model("openia:gpt-4o")


def test_an_agent_resolves_its_model_string_lazily() -> None:
    agent = Agent("A", model="openia:gpt-4o")  # built without complaint: nothing resolved yet
    with pytest.raises(UserError, match="not a provider litellm knows"):
        agent.run_sync("hi")


@pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")
def test_a_colon_name_runs_against_a_server(
    server: OpenAIServer, allow_model_requests: None
) -> None:
    server.push(text_stream(["Hi ", "there"]))
    agent = Agent("A", model="openai:gpt-4o-mini", api_base=server.url, api_key="sk-test")
    assert agent.run_sync("hello").output == "Hi there"
    assert [body["model"] for body in server.requests] == ["gpt-4o-mini"]
