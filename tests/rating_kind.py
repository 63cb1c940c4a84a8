"""The worked example of a question kind of your own: ``rating``, 1 to 5 stars.

This module is all it takes: the kind (its answer schema, how typed text reads, its label),
registered once, and a tool that asks it. Every path an answer takes checks it by the schema
that travels with the question: ``run.respond``, a store's ``respond`` in a process that never
imported this module, ``hpd-agent answer``, the web routes, Temporal, the MCP form, the A2A
metadata; the console, ``pending`` and the web page draw it from its label and schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpd_agent import ToolContext, tool
from hpd_agent.questions import QuestionKind, register_kind

QUESTION = "How good was the plan?"


def rating_schema(data: Mapping[str, Any]) -> dict[str, Any]:
    """A whole number of stars, 1 to 5."""
    return {"type": "integer", "minimum": 1, "maximum": 5}


def read_rating(text: str, data: Mapping[str, Any]) -> int:
    """``4``, ``4/5`` or ``****`` as 4 stars."""
    typed = text.strip()
    if typed and set(typed) == {"*"}:
        return len(typed)
    stars, _, out_of = typed.partition("/")
    if out_of.strip() not in ("", "5") or not stars.strip().isdecimal():
        raise ValueError("Rate from 1 to 5: type 4, 4/5 or ****.")
    return int(stars)


RATING = register_kind(
    QuestionKind("rating", rating_schema, parse_text=read_rating, label="Rate 1–5")
)


@tool
async def rate_plan(ctx: ToolContext) -> str:
    """Ask the user to rate the plan."""
    stars = await ctx.ask_kind("rating", QUESTION)
    return f"rated {stars} of 5"
