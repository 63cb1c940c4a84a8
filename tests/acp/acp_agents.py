"""Agents the ACP server tests serve, offline, each model call and side effect counted.

Counted in files of ``HPD_ACP_TEST_DIR`` (one line per event), so a server in a child process
(``hpd-agent acp acp_agents:planner``) counts as one in the test process does. The models are
functions of the messages (no script to run out), so a run resumed after a restart replays to
the same calls. A child imports this module by name: its ``PYTHONPATH`` holds ``tests/`` and
``tests/acp/``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from _served_agents import Counts, asker_of, lead_of, planner_tree, query, results

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.messages import Message, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call

_counts = Counts("HPD_ACP_TEST_DIR")
note = _counts.note
counted = _counts.counted

GATES: dict[str, Any] = {}
"""In-process tests only: ``survey(topic)`` first waits for ``GATES[topic]`` when set."""

# -- Planner > Clarifier: the headline shape --------------------------------------------
survey, clarifier, planner = planner_tree(note, GATES)


# -- Echo: each turn answers with the prompts of the session so far (its history) --------------
def _echo(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Echo")
    prompts = [m.content for m in messages if isinstance(m, UserMessage)]
    return text(f"heard {' | '.join(str(p) for p in prompts)}")


echo = Agent("Echo", model=FunctionModel(_echo, chunk_size=4))  # streams in pieces


# -- Top > Mid > Leaf: a permission deep in the tree ------------------------------------------
@tool(requires_approval=True)
async def deploy(target: str) -> str:
    """Deploy (needs approval).

    Args:
        target: Where to.
    """
    note("effect", f"deploy {target}")
    return f"deployed to {target}"


def _leaf(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Leaf")
    got = results(messages)
    if len(got) < int(query(messages) or "1"):
        return tool_call("deploy", target=f"prod{len(got) + 1}")
    return text(f"leaf: {' / '.join(got)}")


def _relay(name: str, below: str) -> Any:
    def relay(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        note("model", name)
        got = results(messages)
        if not got:
            return tool_call(below, query=query(messages))
        return text(f"{name.lower()}: {got[-1]}")

    return relay


leaf = Agent("Leaf", model=FunctionModel(_leaf, chunk_size=3), tools=[deploy])
mid = Agent("Mid", model=FunctionModel(_relay("Mid", "Leaf")), tools=[leaf.as_tool()])
top = Agent("Top", model=FunctionModel(_relay("Top", "Mid")), tools=[mid.as_tool()])


# -- parallel questions: Fast asks at once, Slow works first ------------------------------------
def _fast(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Fast")
    got = results(messages)
    if not got:
        return tool_call("ask_user", question="Fast: which colour?")
    return text(f"fast got {got[-1]}")


def _slow(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    note("model", "Slow")
    got = results(messages)
    if not got:
        return tool_call("survey", topic="slow")
    if len(got) == 1:
        return tool_call("ask_user", question="Slow: which size?")
    return text(f"slow got {got[-1]}")


fast = Agent("Fast", model=FunctionModel(_fast), tools=[ask_user()])
slow = Agent("Slow", model=FunctionModel(_slow), tools=[survey, ask_user()])
lead = lead_of(note, fast, slow)


# -- every question kind, one tool each ---------------------------------------------------------
FLAT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}
NESTED = {
    "type": "object",
    "properties": {"range": {"type": "object", "properties": {"from": {"type": "integer"}}}},
    "required": ["range"],
}


@tool
async def kinds(ctx: ToolContext, kind: str) -> str:
    """Ask one question of a kind.

    Args:
        kind: Which kind.
    """
    answer: Any
    if kind == "text":
        answer = await ctx.ask("Your name?", context="For the greeting.")
    elif kind == "text_options":
        answer = await ctx.ask("Tabs or spaces?", options=["tabs", "spaces"])
    elif kind == "input":
        answer = await ctx.ask_input("recipient")
    elif kind == "choice":
        answer = await ctx.ask_choice("Pick a colour", ["red", "green"])
    elif kind == "choices":
        answer = await ctx.ask_choice("Pick colours", ["red", "green", "blue"], multiple=True)
    elif kind == "confirm":
        answer = await ctx.confirm("Go on?")
    elif kind == "action":
        answer = await ctx.ask_action("https://example.test/login", label="Sign in")
    elif kind == "custom_flat":
        answer = await ctx.ask_custom("person", "Who?", schema=FLAT)
    else:
        answer = await ctx.ask_custom("range", "Which range?", schema=NESTED)
    note("effect", f"{kind}={json.dumps(answer)}")
    return json.dumps(answer)


asker = asker_of(note, kinds)


# -- endings: too many turns, a failure -----------------------------------------------------------
@tool
async def again() -> str:
    """Do it again."""
    return "again"


looper = Agent(
    "Looper",
    model=FunctionModel(lambda m, i: tool_call("again")),
    tools=[again],
    max_turns=2,
)


def _broken(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    raise RuntimeError("the model broke")


broken = Agent("Broken", model=FunctionModel(_broken))


# -- a tool that fails: its call ends "failed" ----------------------------------------------------
@tool
async def explode() -> str:
    """Fail."""
    raise RuntimeError("the tool broke")


def _fumble(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    if not results(messages):
        return tool_call("explode")
    return text("recovered")


fumbler = Agent("Fumbler", model=FunctionModel(_fumble), tools=[explode])


# -- noisy: writes to stdout on import and while it runs -----------------------------------------
@tool
async def shout(word: str) -> str:
    """Print a word (to stdout, which the protocol owns).

    Args:
        word: What to print.
    """
    print(f"SHOUT {word}")
    os.write(1, b"RAW BYTES ON DESCRIPTOR 1\n")
    logging.getLogger("noisy").warning("logged %s", word)
    return word.upper()


def _noisy(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    print("model called")
    if not results(messages):
        return tool_call("shout", word="hi")
    return text(f"shouted {results(messages)[-1]}")


def noisy() -> Agent:
    """A factory: prints while it builds the agent, too."""
    print("building the noisy agent")
    logging.getLogger("noisy").addHandler(logging.StreamHandler(sys.__stdout__))
    return Agent("Noisy", model=FunctionModel(_noisy), tools=[shout])


print("importing acp_agents")  # a module that prints at import: stdout must stay clean
