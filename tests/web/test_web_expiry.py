"""Expiry on the AG-UI wire: a request's ``expiresAt`` is the deadline its event carries,
and a run's ``RequestExpiring`` becomes a ``CUSTOM`` ``hpd_agent.request_expiring`` event of
the asking call (the page marks the card; its countdown runs from ``expiresAt``)."""

from __future__ import annotations

from datetime import datetime

import pytest
from ag_ui.core import CustomEvent

from hpd_agent import Agent, ToolContext, tool
from hpd_agent.events import ClarificationRequest, RequestExpiring
from hpd_agent.store import MemoryStore
from hpd_agent.testing import ScriptedModel, text, tool_call
from hpd_agent.web._requests import request_value
from hpd_agent.web._translate import Translator
from hpd_agent.web._view import ThreadView

pytestmark = pytest.mark.anyio


def _tree() -> Agent:
    @tool
    async def deploy(ctx: ToolContext) -> str:
        """Ask before deploying."""
        return str(await ctx.confirm("Deploy now?", timeout=600, warn_before=599.9))

    worker = Agent("Worker", model=ScriptedModel([tool_call("deploy"), text("ok")]), tools=[deploy])
    model = ScriptedModel([tool_call("Worker", query="ship it"), text("done")])
    return Agent("Root", model=model, tools=[worker.as_tool()])


async def test_expires_at_and_the_warning_reach_the_wire_as_the_event_says() -> None:
    store = MemoryStore()
    translator = Translator("run_expiry", ThreadView())
    customs: list[CustomEvent] = []
    asked: ClarificationRequest | None = None
    async with _tree().stream("go", store=store) as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                asked = event
                record = await store.get_request(event.request_id)
                assert record is not None
                value = request_value(record)
                assert event.expires_at is not None
                assert datetime.fromisoformat(value["expiresAt"]).timestamp() == pytest.approx(
                    event.expires_at, abs=1e-6
                )
            customs += [o for o in translator.translate(event) if isinstance(o, CustomEvent)]
            if isinstance(event, RequestExpiring):
                await run.respond(event.request_id, True)
    await store.aclose()
    assert asked is not None and asked.expires_at is not None
    (warning,) = [c for c in customs if c.name == "hpd_agent.request_expiring"]
    assert warning.value["id"] == asked.request_id
    assert datetime.fromisoformat(warning.value["expiresAt"]).timestamp() == pytest.approx(
        asked.expires_at, abs=1e-6
    )
    assert warning.subagent_run_id == asked.invocation_id  # the Worker's call, not the root
