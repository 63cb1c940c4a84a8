"""``HpdAgentPlugin``: what a worker (or a ``Replayer``) needs to run ``TemporalAgent``s.

It registers the two activities over the given agents, and lets the workflow sandbox use
hpd_agent, anyio and the JSON Schema checker as they are (passed through, not re-imported
per workflow): they are deterministic inside a workflow (the loop's only clock is the event
loop's, which is workflow time there), anyio's asyncio backend, which anyio imports on first
use, must come from outside the sandbox or a fresh worker fails on the first workflow that
touches it, and jsonschema's import asks the platform, which the sandbox refuses.

No data converter is needed: everything that crosses (prompts, model requests, tool
arguments, answers, events) is plain JSON data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

# Imported here, outside any workflow sandbox, so the sandbox can pass it through.
import anyio._backends._asyncio  # noqa: F401  # pyright: ignore[reportUnusedImport]
import jsonschema  # noqa: F401  # pyright: ignore[reportUnusedImport]
import sniffio  # noqa: F401  # pyright: ignore[reportUnusedImport]
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from ..exceptions import UserError
from ._activities import Activities
from ._agent import TemporalAgent

__all__ = ["PASSTHROUGH_MODULES", "HpdAgentPlugin"]

PASSTHROUGH_MODULES = (
    "hpd_agent",
    "anyio",
    "sniffio",
    # What checks an answer against a question's JSON Schema (a custom question's, any
    # kind's own): a question is asked and an answer checked inside the workflow, and
    # jsonschema's attrs asks the platform at import, which the sandbox refuses.
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "attrs",
    "attr",
    "re2",
)
"""Modules a workflow sandbox must pass through to run ``TemporalAgent``s."""


def _runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    if existing is None:
        existing = SandboxedWorkflowRunner()
    if isinstance(existing, SandboxedWorkflowRunner):
        restrictions = existing.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
        return dataclasses.replace(existing, restrictions=restrictions)
    return existing  # an unsandboxed runner imports everything as it is already


class HpdAgentPlugin(SimplePlugin):
    """Worker plugin running the given ``TemporalAgent``s (pass it to ``Worker`` and
    ``Replayer`` as ``plugins=[HpdAgentPlugin(planner, ...)]``).

    Args:
        agents: The ``TemporalAgent``s the worker's workflows run (distinct names).
    """

    def __init__(self, *agents: TemporalAgent) -> None:
        names = [a.name for a in agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UserError(
                f"two TemporalAgents named {duplicates}: give each a distinct name= "
                "so the worker can tell their activities apart"
            )
        self.activities = Activities({a.name: a.tree for a in agents})
        definitions: Sequence[Callable[..., Any]] = self.activities.definitions()
        super().__init__(  # pyright: ignore[reportUnknownMemberType]
            "hpd_agent.HpdAgentPlugin",
            activities=definitions,
            workflow_runner=_runner,
        )
