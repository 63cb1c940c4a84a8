"""``BaseHandler`` dispatches questions by kind, with ``handle_question`` as the fallback."""

from __future__ import annotations

from typing import Any

import pytest

from hpd_agent import (
    Agent,
    Approve,
    BaseHandler,
    ClarificationRequest,
    PermissionRequest,
    ToolContext,
    tool,
)
from hpd_agent.testing import ScriptedModel, text, tool_call


def _request(kind: str, **fields: Any) -> ClarificationRequest:
    return ClarificationRequest(
        run_id="r",
        agent_path=("A",),
        depth=0,
        request_id="q",
        question="?",
        question_kind=kind,
        **fields,
    )


class Recorder(BaseHandler):
    """Answers each kind from its own method and records which one ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def handle_text(self, request: ClarificationRequest) -> Any:
        self.calls.append("text")
        return "t"

    async def handle_input(self, request: ClarificationRequest) -> Any:
        self.calls.append("input")
        return "i"

    async def handle_choice(self, request: ClarificationRequest) -> Any:
        self.calls.append("choice")
        return 0

    async def handle_confirmation(self, request: ClarificationRequest) -> Any:
        self.calls.append("confirm")
        return True

    async def handle_action(self, request: ClarificationRequest) -> Any:
        self.calls.append("action")
        return True

    async def handle_custom(self, request: ClarificationRequest) -> Any:
        self.calls.append("custom")
        return {}

    async def handle_question(self, request: ClarificationRequest) -> Any:
        self.calls.append(f"generic:{request.question_kind}")
        return None


async def test_each_kind_goes_to_its_own_method() -> None:
    handler = Recorder()
    kinds = ["text", "input", "choice", "confirm", "action", "custom", "hologram"]
    answers = [await handler.on_request(_request(k)) for k in kinds]
    assert handler.calls == [
        "text",
        "input",
        "choice",
        "confirm",
        "action",
        "custom",
        "generic:hologram",
    ]
    assert answers == ["t", "i", 0, True, True, {}, None]


async def test_unspecialised_kinds_fall_back_to_handle_question() -> None:
    class OnlyConfirm(BaseHandler):
        async def handle_confirmation(self, request: ClarificationRequest) -> Any:
            return False

        async def handle_question(self, request: ClarificationRequest) -> Any:
            return f"generic {request.question_kind}"

    handler = OnlyConfirm()
    assert await handler.on_request(_request("confirm")) is False
    for kind in ("text", "input", "choice", "action", "custom"):
        assert await handler.on_request(_request(kind)) == f"generic {kind}"


async def test_a_handler_without_any_question_method_says_so() -> None:
    with pytest.raises(NotImplementedError, match="cannot answer 'choice' questions"):
        await BaseHandler().on_request(_request("choice", options=("a",)))


async def test_permissions_still_go_to_on_permission() -> None:
    class Permits(BaseHandler):
        async def on_permission(self, request: PermissionRequest) -> Any:
            return Approve()

    request = PermissionRequest(
        run_id="r",
        agent_path=("A",),
        depth=0,
        request_id="p",
        tool_name="t",
        arguments={},
        tool_call_id="c",
    )
    assert await Permits().on_request(request) == Approve()


async def test_dispatch_drives_a_real_run() -> None:
    @tool
    async def plan_trip(ctx: ToolContext) -> str:
        """Plan a trip."""
        city = await ctx.ask_choice("Where to?", ["Oslo", "Rome"])
        sure = await ctx.confirm(f"Book {city}?")
        return f"{city} booked={sure}"

    agent = Agent(
        "Planner",
        model=ScriptedModel([tool_call("plan_trip"), text("done")]),
        tools=[plan_trip],
    )
    handler = Recorder()
    result = await agent.run("trip", handler=handler)
    assert handler.calls == ["choice", "confirm"]
    assert result.messages[-2].content == "Oslo booked=True"  # type: ignore[union-attr]
