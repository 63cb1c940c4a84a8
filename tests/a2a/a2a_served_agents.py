"""Agents the A2A server tests serve, offline, each model call and side effect counted.

Counted in files of ``HPD_A2A_TEST_DIR`` (one line per event), so a server in a subprocess
(``hpd-agent serve --a2a tests.a2a.a2a_served_agents:planner``) counts the same way as one
in the test process. The models are functions of the messages (no script to run out), so a
run resumed after a restart replays to the same calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from _served_agents import Counts, asker_of, lead_of, planner_tree, results

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call

_counts = Counts("HPD_A2A_TEST_DIR")
note = _counts.note
counted = _counts.counted

# -- Planner > Clarifier: the headline's remote side ------------------------------------------
survey, clarifier, planner = planner_tree(note)


# -- two questions pending at once: Fast and Slow ask in parallel -----------------------------
def _asks(name: str, question: str) -> Any:
    def reply(messages: Sequence[Message], info: ModelRequestParams) -> Step:
        note("model", name)
        got = results(messages)
        if not got:
            return tool_call("ask_user", question=question)
        return text(f"{name.lower()} got {got[-1]}")

    return reply


fast = Agent("Fast", model=FunctionModel(_asks("Fast", "Which colour?")), tools=[ask_user()])
slow = Agent("Slow", model=FunctionModel(_asks("Slow", "Which size?")), tools=[ask_user()])
lead = lead_of(note, fast, slow)


# -- question kinds and a permission ----------------------------------------------------------
@tool
async def kinds(ctx: ToolContext, kind: str) -> str:
    """Ask one question of a kind.

    Args:
        kind: Which kind.
    """
    answer: Any
    if kind == "choice":
        answer = await ctx.ask_choice("Pick a colour", ["red", "green"])
    elif kind == "choices":
        answer = await ctx.ask_choice("Pick colours", ["red", "green", "blue"], multiple=True)
    elif kind == "confirm":
        answer = await ctx.confirm("Go on?")
    else:
        answer = await ctx.ask("Your name?")
    note("effect", f"{kind}={json.dumps(answer)}")
    return json.dumps(answer)


asker = asker_of(note, kinds)


# -- a conversation: what the model saw of earlier turns, counted -----------------------------
def _chat(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    """Notes each request's user and assistant texts (``"user: ..."``, ``"assistant: ..."``)
    as one JSON line; asks a question when the prompt starts with ``ask``; else says what
    it heard."""
    said = [f"{m.kind}: {m.content}" for m in messages if m.kind in ("user", "assistant")]
    note("seen", json.dumps([s for s in said if not s.endswith(": None")]))
    prompt = [m.content for m in messages if isinstance(m, UserMessage)][-1]
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return text(f"{prompt} -> {last.content}")
    if prompt.startswith("ask"):
        return tool_call("ask_user", question="Which one?")
    return text(f"heard: {prompt}")


chat = Agent("Chat", model=FunctionModel(_chat), tools=[ask_user()])


def seen() -> list[list[str]]:
    """What each of the Chat's model requests saw, in order."""
    return [json.loads(line) for line in counted("seen")]
