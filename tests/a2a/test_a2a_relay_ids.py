"""A remote chooses the agent names and request ids of the questions it relays: two
questions whose names and ids joined alike (``"a"`` + ``"x#y"``, ``"a#x"`` + ``"y"``) once
got one request id, so answering one refused the other and the run waited for ever."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import pytest
from a2a_servers import ManyPending, Pending, a2a_server

from hpd_agent import Agent, ClarificationRequest
from hpd_agent.a2a import RemoteAgent
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

_HANG = 60  # seconds: far beyond what the exchange needs, only to end a run that hangs


async def test_questions_whose_names_and_ids_join_alike_are_both_answered() -> None:
    pending = [Pending("x#y", "Q1?", ["Planner", "a"]), Pending("y", "Q2?", ["Planner", "a#x"])]
    executor = ManyPending(pending)
    with a2a_server(executor) as server:
        remote = RemoteAgent(server.url)
        await remote.read_card()
        remote_tool = remote.as_tool()
        model = ScriptedModel([tool_call(remote_tool.name, query="go"), text("done")])
        agent = Agent("Orchestrator", model=model, tools=[remote_tool])
        seen: list[ClarificationRequest] = []
        with anyio.fail_after(_HANG):
            async with agent.stream("go") as run:
                async for event in run:
                    if isinstance(event, ClarificationRequest):
                        seen.append(event)
                        if len(seen) == 2:  # both asked before either is answered
                            await run.respond(seen[0].request_id, "one")
                            await anyio.to_thread.run_sync(executor.got_an_answer.wait)
                            await run.respond(seen[1].request_id, "two")
    assert run.result.status == "completed"
    assert len({e.request_id for e in seen}) == 2
    assert sorted(answer for _, answer in executor.answered) == ["one", "two"]


def _status(state: int, message_id: str, metadata: dict[str, object]) -> Any:
    from a2a.types import Message, Role, TaskStatus
    from google.protobuf.struct_pb2 import Struct

    meta = Struct()
    meta.update(metadata)
    message = Message(message_id=message_id, role=Role.ROLE_AGENT, metadata=meta)
    return TaskStatus(state=state, message=message)  # pyright: ignore[reportArgumentType]


def test_a_remote_cannot_make_two_questions_share_a_key() -> None:
    """The keys a relayed question's request id derives from: a status that names no request
    id, an authentication step and a question asked again each get a key no request id the
    remote chooses can spell (before, ``"m1"``, ``"auth@m1"`` and ``"x@m1"`` could)."""
    from a2a.types import TaskState

    from hpd_agent.a2a._wire import derived_key, questions_of

    input_required, auth_required = (
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    )
    unnamed = questions_of(_status(input_required, "m1", {}), {})[0].key
    auth = questions_of(_status(auth_required, "m1", {"url": "https://x.example"}), {})[0].key
    again = derived_key("r", "x", "m1")
    made = {unnamed, auth, again}
    assert len(made) == 3
    spelled = [
        "m1", "auth@m1", "x@m1", unnamed, auth, again, "~" + unnamed, "~~x", "~x", "x" * 500,
        "x" * 199 + "~", "~h:" + "x" * 163,
    ]  # fmt: skip
    keys = [
        questions_of(_status(input_required, "m2", {"request_id": rid}), {})[0].key
        for rid in spelled
    ]
    assert len(set(keys)) == len(spelled)  # distinct ids, distinct keys
    assert not made & set(keys)  # and none is a key made here
    assert all(len(k) <= 200 for k in keys)
