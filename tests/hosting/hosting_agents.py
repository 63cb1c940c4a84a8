"""The agent the guard tests serve with each server we ship (``hpd-agent serve``, ``serve
--a2a``, ``mcp --http``): Echo answers its prompt, each model call counted (the prompt, one
line in ``model.txt`` of ``HPD_HOSTING_TEST_DIR``), so a test sees which requests ran it."""

from __future__ import annotations

from collections.abc import Sequence

from _served_agents import Counts, query

from hpd_agent import Agent
from hpd_agent.messages import Message
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text

counts = Counts("HPD_HOSTING_TEST_DIR")


def _echo(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    prompt = query(messages)
    counts.note("model", prompt)
    return text(f"echo: {prompt}")


echo = Agent("Echo", model=FunctionModel(_echo))
