"""A workflow whose agent names its model by a litellm string (``"openai/gpt-4o-mini"``).

The workflow sandbox must cope with the litellm model being built at import time; the model
request itself runs in the activity, where the test suite forbids real requests, so the run
fails with that ``ModelError`` (and nothing leaves the machine).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from hpd_agent import Agent
    from hpd_agent.temporal import HpdAgentPlugin, TemporalAgent

REMOTE = TemporalAgent(Agent("Remote", model="openai/gpt-4o-mini"), name="remote")


@workflow.defn
class RemoteWorkflow:
    """Runs the remote-model agent."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await REMOTE.run(prompt)).output or ""


def plugin() -> HpdAgentPlugin:
    """The plugin for ``REMOTE``."""
    return HpdAgentPlugin(REMOTE)
