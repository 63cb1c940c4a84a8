"""An agent whose tool needs approval, for the remembered-grant tests; also a process running it.

``build(env)`` is a Deployer whose model calls ``deploy(env=...)`` once, then says it is done;
each real deploy is appended to ``deploys.txt`` in ``$HPD_TEST_DIR``.

As a script: ``python grant_agents.py LOCATION RUN_ID ENV`` runs it on the store at LOCATION
with nobody to answer (``on_unhandled="interrupt"``) and prints one JSON line: the run's
status and its requests as the store keeps them (id, grant_id, status, answer, context).
A run a grant covers completes; one that must ask is interrupted with its request pending.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from hpd_agent import Agent, PermissionRequest, tool
from hpd_agent.testing import ScriptedModel, text, tool_call


def deploys() -> list[str]:
    """The envs deployed so far (by any process of the test)."""
    path = Path(os.environ["HPD_TEST_DIR"]) / "deploys.txt"
    return path.read_text().split() if path.exists() else []


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy to an environment."""
    with (Path(os.environ["HPD_TEST_DIR"]) / "deploys.txt").open("a") as f:
        f.write(env + "\n")
    return f"deployed to {env}"


def build(env: str) -> Agent:
    """The Deployer: one ``deploy(env=env)`` call, then done."""
    model = ScriptedModel([tool_call("deploy", env=env), text("done")])
    return Agent("Deployer", model=model, tools=[deploy])


async def run_once(location: str, run_id: str, env: str) -> dict[str, Any]:
    """Run the Deployer on the store with nobody to answer; what happened, as data: the
    run's status and its requests as the store keeps them."""
    from hpd_agent.store import open_store

    store = open_store(location)
    try:
        result = await build(env).run(
            "deploy", store=store, run_id=run_id, on_unhandled="interrupt"
        )
        records = await store.list_requests(run_id=run_id, status=None)
    finally:
        await store.aclose()
    requests = [
        {
            "request_id": r.request_id,
            "grant_id": r.event.grant_id if isinstance(r.event, PermissionRequest) else None,
            "status": r.status,
            "answer": r.answer,
            "context": dict(r.context),
        }
        for r in records
    ]
    return {"status": result.status, "requests": requests}


if __name__ == "__main__":
    import anyio

    print(json.dumps(anyio.run(run_once, *sys.argv[1:4])))
