"""An agent for the stalled-holder tests (``tests/store/test_fence.py``), loaded by the CLI.

``build()`` reads ``HPD_TEST_DIR``. The agent asks "First?", then "Second?", then calls
``charge`` (its side effect: a line in ``side_effects.txt``), then ends. Every model call
appends ``"fence@<turn>"`` to ``calls.txt``, so a test counts across processes how often
each turn and each side effect ran.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, text, tool_call


def _append(name: str, line: str) -> None:
    with open(os.path.join(os.environ["HPD_TEST_DIR"], name), "a") as f:
        f.write(line + "\n")


@tool
def charge(amount: int) -> str:
    """Charge the card (a side effect: a line in the side-effects file).

    Args:
        amount: How much.
    """
    _append("side_effects.txt", f"charged {amount}")
    return "receipt-1"


def _turn(messages: Sequence[Message], info: ModelRequestParams):
    _append("calls.txt", f"fence@{info.turn}")
    if info.turn == 0:
        return tool_call("ask_user", _id="first", question="First?")
    if info.turn == 1:
        return tool_call("ask_user", _id="second", question="Second?")
    if info.turn == 2:
        return tool_call("charge", _id="charge", amount=5)
    return text("charged once")


def build() -> Agent:
    """The agent (a fresh model each call)."""
    return Agent("Fence", model=FunctionModel(_turn, name="fence"), tools=[charge, ask_user()])
