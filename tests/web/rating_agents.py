"""``hpd-agent serve tests.web.rating_agents:rater``: the Rater asks the ``rating`` question of
``tests/rating_kind.py`` (a kind of the app's own), then answers ``done: rated N of 5``.

The server runs with ``tests/`` on its path, so the kind's module is ``rating_kind``, as the
tests import it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rating_kind import rate_plan

from hpd_agent import Agent
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, text, tool_call


def rater_turn(messages: Sequence[Message], info: ModelRequestParams):
    if info.turn == 0:
        return tool_call("rate_plan")
    rated = next(m.content for m in messages if isinstance(m, ToolResultMessage))
    return text(f"done: {rated}")


rater = Agent("Rater", model=FunctionModel(rater_turn, name="rater"), tools=[rate_plan])
