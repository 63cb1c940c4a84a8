"""The agent tree ``hpd-agent serve tests.web.browser_agents:root`` serves to the browser tests.

Offline: every model is a ``FunctionModel`` reacting to the latest user prompt.

Orchestrator (depth 0) --Manager--> Manager (1) --Specialist--> Specialist (2).
Prompts:
- ``plan``: in one turn the Orchestrator asks "Which region?" itself and delegates to the
  Manager, whose Specialist asks "Which database?" (options postgres/sqlite); then the
  Orchestrator calls ``delete_file``, which needs approval; then it answers
  ``Final answer: <every tool result>``.
- ``forms``: in one turn, tools ask a yes/no question (within ten minutes, warned of at once), a multiple choice, a custom form (a JSON
  schema), an action (visit a URL) and a value for a named argument; the final answer repeats
  the answers.
- ``writers``: in one turn the Orchestrator calls the Writer twice (queries alpha and beta);
  each call says ``working on <query>``, asks ``Detail for <query>?`` and answers
  ``<query>: <the answer>``; the final answer joins both.
- ``hostile``: the model's text and its question carry HTML/script markup, and a tool asks the
  person to follow a ``javascript:`` URL (an action request built past ``ActionQuestion``'s
  URL rule, as an old store may hold one: the page must still not make it a link).
- ``markdown``: the Orchestrator asks the Reporter (depth 1), whose answer is a markdown list
  with a link, then answers ``MARKDOWN``: a heading, a table, a code block, a link, and markup
  that must stay inert (a ``javascript:`` link, ``<script>``, an image).
- ``hostile`` also calls the Echo (depth 1), whose query and answer carry the same markup.
- ``decline``: the Orchestrator delegates to the Surveyor (depth 1), whose ``ask_budget`` tool
  asks "What is the budget?" and reports how the question ended (``budget not given:
  <QuestionNotAnswered.status>`` when it got no answer); the Surveyor answers ``surveyor:
  <that>`` and the Orchestrator ``Final answer: <that>``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hpd_agent import Agent, QuestionNotAnswered, ToolContext, ask_user, tool
from hpd_agent.messages import Message, ToolCall, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.questions import Question
from hpd_agent.testing import FunctionModel, text, tool_call

REGION_QUESTION = "Which region?"
BUDGET_QUESTION = "What is the budget?"
DB_QUESTION = "Which database?"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
SIGN_IN_URL = "https://example.com/oauth/authorize?client=hpd"
HOSTILE_URL = "javascript:window.__pwned=1"
DEPLOY_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "enum": ["eu", "us"]},
        "replicas": {"type": "integer", "minimum": 1},
        "public": {"type": "boolean"},
    },
    "required": ["region", "replicas"],
    "additionalProperties": False,
}


MARKDOWN = f"""## The plan

Build it in **two steps**, with `pytest` and the [guide](https://example.com/guide).

| Step | Owner | Days |
|------|-------|-----:|
| Build the API | Coder | 3 |
| Write the tests | Tester | 2 |

```python
def add(a, b):
    return a + b
```

1. Then [click me](javascript:window.__pwned=1) or [here](data:text/html,hi).
2. And {HOSTILE} ![a pixel](https://example.com/pixel.png) <a href="javascript:window.__pwned=1">a</a>
"""
REPORT = "- *findings*: all good\n- see <https://example.com/report>"
ECHO = f"Echo: {HOSTILE} [x](javascript:window.__pwned=1) <iframe src=javascript:1></iframe>"


def _prompt(messages: Sequence[Message]) -> str:
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            return m.content.strip()
    return ""


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (pretend).

    Args:
        path: The file.
    """
    return f"deleted {path}"


@tool
async def confirm_deploy(ctx: ToolContext) -> str:
    """Ask whether to deploy (within ten minutes; warned of half a second in)."""
    return f"deploy={await ctx.confirm('Deploy now?', timeout=600, warn_before=599.5)}"


@tool
async def pick_features(ctx: ToolContext) -> str:
    """Ask which features to enable."""
    picked = await ctx.ask_choice("Which features?", ["auth", "billing", "search"], multiple=True)
    return "features=" + ",".join(picked)


@tool
async def deploy_settings(ctx: ToolContext) -> str:
    """Ask for the deployment settings."""
    answer = await ctx.ask_custom("deploy", "Deployment settings?", schema=DEPLOY_SCHEMA)
    return "settings=" + json.dumps(answer, sort_keys=True)


@tool
async def sign_in(ctx: ToolContext) -> str:
    """Ask the person to sign in at the provider."""
    done = await ctx.ask_action(SIGN_IN_URL, label="Sign in to Example")
    return f"signed_in={done}"


@tool
async def name_service(ctx: ToolContext) -> str:
    """Ask for the service's name instead of guessing it."""
    return "name=" + await ctx.ask_input("service_name", "What should the service be called?")


class _UncheckedAction(Question):
    """An action whose URL no rule checked: what a store written before ``ActionQuestion``
    refused such URLs may hold (``ctx.ask_action`` refuses a ``javascript:`` URL now)."""

    kind = "action"
    __slots__ = ()


@tool
async def open_link(ctx: ToolContext) -> str:
    """Ask the person to follow a link a hostile tool made up."""
    spec = _UncheckedAction(
        question="Follow the link?", data={"url": HOSTILE_URL, "label": "Click me"}
    )
    done = await ctx.request(spec)
    return f"followed={done}"


@tool
async def ask_budget(ctx: ToolContext) -> str:
    """Ask the person for the budget; say how the question ended when it got no answer."""
    try:
        return "budget=" + await ctx.ask(BUDGET_QUESTION)
    except QuestionNotAnswered as e:
        return f"budget not given: {e.status}"


def surveyor_turn(messages: Sequence[Message], info: ModelRequestParams):
    if info.turn == 0:
        return tool_call("ask_budget")
    return text("surveyor: " + _results(messages)[-1])


def reporter_turn(messages: Sequence[Message], info: ModelRequestParams):
    return text(REPORT)


def echo_turn(messages: Sequence[Message], info: ModelRequestParams):
    return text(ECHO)


def specialist_turn(messages: Sequence[Message], info: ModelRequestParams):
    if info.turn == 0:
        return tool_call("ask_user", question=DB_QUESTION, options=["postgres", "sqlite"])
    return text("use " + _results(messages)[-1])


def manager_turn(messages: Sequence[Message], info: ModelRequestParams):
    if info.turn == 0:
        return tool_call("Specialist", query="pick a database")
    return text("manager: " + _results(messages)[-1])


def writer_turn(messages: Sequence[Message], info: ModelRequestParams):
    query = next(m.content for m in messages if isinstance(m, UserMessage))
    if info.turn == 0:
        ask = ToolCall(
            id="ask", name="ask_user", arguments=json.dumps({"question": f"Detail for {query}?"})
        )
        return ModelResponse(
            text=f"working on {query}", tool_calls=(ask,), finish_reason="tool_calls"
        )
    return text(f"{query}: " + _results(messages)[-1])


def _plan(messages: Sequence[Message], turn: int):
    if turn == 0:
        return [
            tool_call("Manager", query="plan the storage"),
            tool_call("ask_user", question=REGION_QUESTION),
        ]
    if turn == 1:
        return tool_call("delete_file", path="/tmp/old-plan.txt")
    return text("Final answer: " + " | ".join(_results(messages)))


def orchestrator_turn(messages: Sequence[Message], info: ModelRequestParams):
    prompt = _prompt(messages)
    if prompt == "plan":
        return _plan(messages, info.turn)
    if prompt == "forms":
        if info.turn == 0:
            return [
                tool_call("confirm_deploy"),
                tool_call("pick_features"),
                tool_call("deploy_settings"),
                tool_call("sign_in"),
                tool_call("name_service"),
            ]
        return text("Forms done: " + " | ".join(_results(messages)))
    if prompt == "writers":
        if info.turn == 0:
            return [tool_call("Writer", query="alpha"), tool_call("Writer", query="beta")]
        return text("Writers done: " + " | ".join(_results(messages)))
    if prompt == "hostile":
        if info.turn == 0:
            return [
                tool_call("ask_user", question=f"Pick {HOSTILE}?"),
                tool_call("open_link"),
                tool_call("Echo", query=f"say {HOSTILE}"),
            ]
        return text(f"Model says {HOSTILE} and " + " | ".join(_results(messages)))
    if prompt == "markdown":
        if info.turn == 0:
            return tool_call("Reporter", query="report")
        return text(MARKDOWN)
    if prompt == "decline":
        if info.turn == 0:
            return tool_call("Surveyor", query="estimate the budget")
        return text("Final answer: " + " | ".join(_results(messages)))
    return text(f"Hello! You said: {prompt}")


def build() -> Agent:
    """A fresh tree (new models)."""
    specialist = Agent(
        "Specialist",
        model=FunctionModel(specialist_turn, name="specialist"),
        tools=[ask_user()],
    )
    manager = Agent(
        "Manager",
        model=FunctionModel(manager_turn, name="manager"),
        tools=[specialist.as_tool()],
    )
    writer = Agent(
        "Writer", model=FunctionModel(writer_turn, name="writer", chunk_size=3), tools=[ask_user()]
    )
    surveyor = Agent(
        "Surveyor", model=FunctionModel(surveyor_turn, name="surveyor"), tools=[ask_budget]
    )
    reporter = Agent("Reporter", model=FunctionModel(reporter_turn, name="reporter", chunk_size=5))
    echo = Agent("Echo", model=FunctionModel(echo_turn, name="echo", chunk_size=7))
    return Agent(
        "Orchestrator",
        model=FunctionModel(orchestrator_turn, name="orchestrator", chunk_size=4),
        tools=[
            manager.as_tool(),
            writer.as_tool(),
            surveyor.as_tool(),
            reporter.as_tool(),
            echo.as_tool(),
            ask_user(),
            delete_file,
            confirm_deploy,
            pick_features,
            deploy_settings,
            sign_in,
            name_service,
            open_link,
        ],
    )


root = build()
