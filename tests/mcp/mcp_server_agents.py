"""Agents served by the MCP server tests, offline, each model call and side effect counted.

Counted in files of ``HPD_MCP_TEST_DIR`` (one line per event), so a server in a
subprocess (``hpd-agent mcp tests.mcp.mcp_server_agents:planner``) counts the same way as
one in the test process. The models are functions of the messages (no script to run out),
so a run resumed after a restart replays to the same calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from _served_agents import Counts, asker_of, lead_of, planner_tree, results

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.messages import Message
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call

_counts = Counts("HPD_MCP_TEST_DIR")
note = _counts.note
counted = _counts.counted

GATES: dict[str, Any] = {}
"""In-process tests only: ``survey(topic)`` first waits for ``GATES[topic]`` (an anyio
Event) when set, so a test can hold one branch of the tree while another asks."""


# -- Planner > Clarifier: the end-to-end shape ----------------------------------------
survey, clarifier, planner = planner_tree(note, GATES)


# -- parallel questions: Fast asks at once, Slow works first -----------------------------------
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


# -- every question kind, one tool each --------------------------------------------------------
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
        answer = await ctx.ask("Your name?")
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
