"""A TemporalAgent refuses an agent tree holding a toolset (tools known only when a run
starts cannot be resolved inside a workflow), at construction, naming the agent."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

pytest.importorskip("temporalio", reason='needs the temporal extra (".[dev]")')

from hpd_agent import Agent, UserError
from hpd_agent.temporal import TemporalAgent
from hpd_agent.testing import ScriptedModel
from hpd_agent.tools import RunResources, Tool, Toolset


class Listed(Toolset):
    async def resolve(self, resources: RunResources) -> Sequence[Tool]:
        return []


def test_an_agent_with_a_toolset_is_refused_at_any_depth() -> None:
    helper = Agent("Helper", model=ScriptedModel([]), tools=[Listed()])
    root = Agent("Root", model=ScriptedModel([]), tools=[helper.as_tool()])
    with pytest.raises(UserError, match=r"agent 'Helper' has toolsets \(Listed\)"):
        TemporalAgent(root)
    TemporalAgent(Agent("Plain", model=ScriptedModel([])))  # no toolset: accepted
