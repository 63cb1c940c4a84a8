"""Events: JSON through the one TypeAdapter, tagged with run id, path and depth."""

from __future__ import annotations

import json

from inline_snapshot import snapshot

from hpd_agent import Agent, ClarificationRequest, Event, ask_user
from hpd_agent.events import ClarificationRequest as EventsClarificationRequest
from hpd_agent.events import PermissionResolved, dump_event, event_adapter, load_event
from hpd_agent.messages import Usage
from hpd_agent.testing import ScriptedModel, text, tool_call


async def test_every_event_of_a_run_round_trips_through_json() -> None:
    sub = Agent(
        "Sub",
        model=ScriptedModel([tool_call("ask_user", question="?", options=["a"]), text("s")]),
        tools=[ask_user()],
    )
    root = Agent(
        "Root", model=ScriptedModel([tool_call("Sub", query="q"), text("r")]), tools=[sub.as_tool()]
    )
    events: list[Event] = []
    async with root.stream("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, "a")
    assert len({e.kind for e in events}) >= 9
    for event in events:
        assert load_event(dump_event(event)) == event


def test_json_shape_is_stable() -> None:
    event = EventsClarificationRequest(
        run_id="run_1",
        agent_path=("Orchestrator", "CodingAgent"),
        depth=1,
        invocation_id="inv_1",
        request_id="req_1",
        question="Which framework?",
        options=("Express", "FastAPI"),
        tool_call_id="call_1",
    )
    assert json.loads(dump_event(event)) == snapshot(
        {
            "run_id": "run_1",
            "agent_path": ["Orchestrator", "CodingAgent"],
            "depth": 1,
            "invocation_id": "inv_1",
            "replayed": False,
            "request_id": "req_1",
            "question": "Which framework?",
            "context": None,
            "options": ["Express", "FastAPI"],
            "question_kind": "text",
            "data": None,
            "tool_call_id": "call_1",
            "answer_schema": None,
            "label": None,
            "expires_at": None,
            "kind": "clarification_request",
        }
    )
    assert event.agent_name == "CodingAgent"


def test_adapter_picks_the_class_by_kind() -> None:
    data = {
        "kind": "permission_resolved",
        "run_id": "r",
        "agent_path": ["A"],
        "depth": 0,
        "request_id": "q",
        "tool_name": "t",
        "status": "answered",
        "approved": True,
        "scope": "run",
    }
    event = event_adapter().validate_python(data)
    assert isinstance(event, PermissionResolved) and event.scope == "run"
    assert Usage(requests=1, input_tokens=2) + Usage(output_tokens=3) == Usage(
        requests=1, input_tokens=2, output_tokens=3
    )
