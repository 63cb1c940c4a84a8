"""Scale-out on Temporal: agent trees as durable workflows, questions as workflow updates.

``pip install -e ".[temporal]"`` in the checkout (not on PyPI yet). The core never imports this package, and this
package imports ``temporalio`` only when one of its names is first used (so the CLI, which
wires ``--temporal`` options, works without the extra).

```python
from hpd_agent.temporal import TemporalAgent, HpdAgentPlugin, pending, respond, stream

planner = TemporalAgent(orchestrator)          # at import time of the workflow module

@workflow.defn
class PlanWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await planner.run(prompt)).output or ""

worker = Worker(client, task_queue="agents", workflows=[PlanWorkflow],
                plugins=[HpdAgentPlugin(planner)])
reqs = await pending(handle)                          # a query
await respond(handle, reqs[0].request_id, "Express")  # a validated workflow update
async for event in stream(handle): ...                # the run's events (polling a query)
```

See docs/scale-out.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._agent import TemporalAgent
    from ._client import PendingRequestInfo, pending, read_events, respond, stream
    from ._plugin import PASSTHROUGH_MODULES, HpdAgentPlugin

__all__ = [
    "PASSTHROUGH_MODULES",
    "HpdAgentPlugin",
    "PendingRequestInfo",
    "TemporalAgent",
    "pending",
    "read_events",
    "respond",
    "stream",
]

_WHERE = {
    "TemporalAgent": "._agent",
    "PendingRequestInfo": "._client",
    "pending": "._client",
    "read_events": "._client",
    "respond": "._client",
    "stream": "._client",
    "PASSTHROUGH_MODULES": "._plugin",
    "HpdAgentPlugin": "._plugin",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import temporalio  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as e:
        raise ImportError(
            "hpd_agent.temporal needs the temporal extra: "
            'pip install -e ".[temporal]" in the hpd-agent checkout (it is not on PyPI yet)'
        ) from e
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
