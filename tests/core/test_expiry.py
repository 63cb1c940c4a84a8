"""Expiry that people see coming: ``expires_at`` on request events, and ``warn_before``:
a ``RequestExpiring`` event and ``Hook.request_expiring`` while the request is pending.

Every wait is on an event of the run (a warning due a tenth of a second after the
question, with the deadline far away), never a sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from hpd_agent import Agent, ToolContext, ask_user, tool
from hpd_agent.events import (
    ClarificationRequest,
    Event,
    PermissionRequest,
    RequestEvent,
    RequestExpiring,
    RunFinished,
)
from hpd_agent.hooks import Hook, HookSet
from hpd_agent.permissions import Approve, PermissionSpec
from hpd_agent.questions import QuestionKind, register_kind
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0
WARN = 59.9
"""Warned a tenth of a second after asking; a minute before it would expire."""


class Warned(Hook):
    """Records what its observers see."""

    def __init__(self) -> None:
        self.opened: list[RequestEvent] = []
        self.expiring: list[RequestEvent] = []

    def request_opened(self, event: RequestEvent) -> None:
        self.opened.append(event)

    def request_expiring(self, event: RequestEvent) -> None:
        self.expiring.append(event)


def asking(ask: Callable[[ToolContext], Awaitable[Any]]) -> Agent:
    @tool
    async def work(ctx: ToolContext) -> str:
        """Ask, then report the answer."""
        return f"got {await ask(ctx)!r}"

    return Agent("Root", model=ScriptedModel([tool_call("work"), text("done")]), tools=[work])


ANSWERS: dict[str, Any] = {
    "ask": "blue",
    "ask_input": "v",
    "ask_choice": "a",
    "confirm": True,
    "ask_action": True,
    "ask_custom": {"x": 1},
    "ask_kind": 4,
    "ask_permission": Approve(),
    "request": Approve(),
}

ASKS: dict[str, Callable[[ToolContext], Awaitable[Any]]] = {
    "ask": lambda ctx: ctx.ask("Colour?", timeout=TIMEOUT, warn_before=WARN),
    "ask_input": lambda ctx: ctx.ask_input("name", timeout=TIMEOUT, warn_before=WARN),
    "ask_choice": lambda ctx: ctx.ask_choice("Pick", ["a", "b"], timeout=TIMEOUT, warn_before=WARN),
    "confirm": lambda ctx: ctx.confirm("Sure?", timeout=TIMEOUT, warn_before=WARN),
    "ask_action": lambda ctx: ctx.ask_action(
        "https://example.com/sign-in", timeout=TIMEOUT, warn_before=WARN
    ),
    "ask_custom": lambda ctx: ctx.ask_custom(
        "form", "Fill", schema={"type": "object"}, timeout=TIMEOUT, warn_before=WARN
    ),
    "ask_kind": lambda ctx: ctx.ask_kind(
        "expiry.rating", "Rate", timeout=TIMEOUT, warn_before=WARN
    ),
    "ask_permission": lambda ctx: ctx.ask_permission(
        "deploy", {"env": "prod"}, timeout=TIMEOUT, warn_before=WARN
    ),
    "request": lambda ctx: ctx.request(
        PermissionSpec("deploy", {}), timeout=TIMEOUT, warn_before=WARN
    ),
}


RATING = register_kind(
    QuestionKind(
        name="expiry.rating",
        answer_schema=lambda data: {"type": "integer", "minimum": 1, "maximum": 5},
        label="Rate 1–5",
    )
)


@pytest.mark.parametrize("method", sorted(ASKS))
async def test_every_ask_method_warns_before_its_request_expires(method: str) -> None:
    hook = Warned()
    before = time.time()
    events: list[Event] = []
    async with asking(ASKS[method]).stream("go", hooks=[hook]) as run:
        async for event in run:
            events.append(event)
            if isinstance(event, RequestExpiring):
                await run.respond(event.request_id, ANSWERS[method])
    (request,) = [e for e in events if isinstance(e, ClarificationRequest | PermissionRequest)]
    assert request.expires_at is not None
    assert before + TIMEOUT <= request.expires_at <= time.time() + TIMEOUT
    (warning,) = [e for e in events if isinstance(e, RequestExpiring)]
    assert (warning.request_id, warning.expires_at) == (request.request_id, request.expires_at)
    assert (warning.agent_path, warning.invocation_id) == (
        request.agent_path,
        request.invocation_id,
    )
    assert events.index(request) < events.index(warning)
    assert hook.expiring == [request]
    assert isinstance(events[-1], RunFinished) and events[-1].status == "completed"


async def test_the_ask_user_tool_takes_warn_before() -> None:
    agent = Agent(
        "Root",
        model=ScriptedModel([tool_call("ask_user", question="Colour?"), text("done")]),
        tools=[ask_user(timeout=TIMEOUT, warn_before=WARN)],
    )
    kinds: list[str] = []
    async with agent.stream("go") as run:
        async for event in run:
            kinds.append(event.kind)
            if isinstance(event, RequestExpiring):
                await run.respond(event.request_id, "blue")
    assert kinds.count("request_expiring") == 1
    assert kinds.index("clarification_request") < kinds.index("request_expiring")


async def test_a_request_answered_before_its_warning_is_due_is_never_warned() -> None:
    hook = Warned()
    agent = asking(lambda ctx: ctx.ask("Colour?", timeout=TIMEOUT, warn_before=1.0))
    events: list[Event] = []
    async with agent.stream("go", hooks=[hook]) as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ClarificationRequest):
                await run.respond(event.request_id, "blue")
    # The warning goes out from the asker's own wait: once the run is over, none can come.
    assert not [e for e in events if isinstance(e, RequestExpiring)]
    assert hook.expiring == [] and len(hook.opened) == 1


async def test_without_a_timeout_the_request_has_no_deadline() -> None:
    agent = asking(lambda ctx: ctx.ask("Colour?"))
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, ClarificationRequest):
                assert event.expires_at is None
                await run.respond(event.request_id, "blue")


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"warn_before": 5.0}, "warn_before needs a timeout"),
        ({"timeout": 10.0, "warn_before": 0}, "positive number of seconds, got 0"),
        ({"timeout": 10.0, "warn_before": -1.0}, "positive number of seconds, got -1.0"),
        ({"timeout": 10.0, "warn_before": float("nan")}, "positive number of seconds, got nan"),
        ({"timeout": 10.0, "warn_before": "5"}, "must be a number of seconds, got str"),
        ({"timeout": 10.0, "warn_before": True}, "must be a number of seconds, got bool"),
    ],
)
async def test_a_warn_before_that_cannot_be_honoured_is_refused_before_anything_is_asked(
    kwargs: dict[str, Any], why: str
) -> None:
    agent = asking(lambda ctx: ctx.ask("Colour?", **kwargs))
    events: list[Event] = []
    async with agent.stream("go") as run:
        async for event in run:
            events.append(event)
    assert not [e for e in events if isinstance(e, ClarificationRequest)]
    (finished,) = [e for e in events if e.kind == "tool_call_finished"]
    assert finished.is_error and why in finished.result  # type: ignore[union-attr]


async def test_a_warning_due_at_once_goes_out_when_the_request_opens() -> None:
    # warn_before longer than the timeout: the request is warned of as soon as it waits.
    agent = asking(lambda ctx: ctx.ask("Colour?", timeout=TIMEOUT, warn_before=2 * TIMEOUT))
    kinds: list[str] = []
    async with agent.stream("go") as run:
        async for event in run:
            kinds.append(event.kind)
            if isinstance(event, RequestExpiring):
                await run.respond(event.request_id, "blue")
    assert kinds.count("request_expiring") == 1


def test_a_hook_that_does_not_define_request_expiring_costs_nothing() -> None:
    class Opened(Hook):
        def request_opened(self, event: RequestEvent) -> None: ...

    hooks = HookSet([Hook(), Opened()])
    assert hooks.expiring_observers == ()
    warned = Warned()
    assert HookSet([Opened(), warned]).expiring_observers == (warned,)


async def test_a_hook_raising_in_request_expiring_is_logged_and_the_question_still_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Hook):
        def request_expiring(self, event: RequestEvent) -> None:
            raise RuntimeError("notifier down")

    later = Warned()
    agent = asking(lambda ctx: ctx.ask("Colour?", timeout=TIMEOUT, warn_before=WARN))
    with caplog.at_level(logging.ERROR, logger="hpd_agent.hooks"):
        async with agent.stream("go", hooks=[Broken(), later]) as run:
            async for event in run:
                if isinstance(event, RequestExpiring):
                    await run.respond(event.request_id, "blue")
        result = run.result
    assert result is not None and result.output == "done"
    assert len(later.expiring) == 1  # told even though the first one raised
    assert "raised in request_expiring" in caplog.text
