"""``Webhook``: a receiver on 127.0.0.1 (a thread of the test) gets ``opened``, ``expiring``
and ``resolved`` for a request, signed; a receiver that is down or slow neither slows nor
fails the run (the run ends while the receiver still holds its first delivery); failed
tries are retried with backoff and logged; a resumed durable run does not notify again.

Every wait is on an event (the run's, or a delivery arriving), never a sleep. The process's
delivery worker is swapped for one retrying at once, so giving up takes milliseconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _webhooks import down_url, receiving

from hpd_agent import Agent, ToolContext, tool
from hpd_agent.events import ClarificationRequest, Event, RequestExpiring
from hpd_agent.exceptions import UserError
from hpd_agent.governance import Webhook, _deliveries, delivery_id
from hpd_agent.permissions import Approve
from hpd_agent.store import SQLiteStore
from hpd_agent.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

SECRET = "s3cret"


@pytest.fixture(autouse=True)
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[_deliveries.Deliveries]:
    """A worker of the test's own (retrying after 10 ms), in place of the process's."""
    mine = _deliveries.Deliveries(first_retry=0.01)
    monkeypatch.setattr(_deliveries, "_worker", mine)
    yield mine
    assert mine.flush(30), "deliveries still under way at the end of the test"


class Gave(logging.Handler):
    """Counts the worker's warnings; says when one delivery has given up."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.gave_up = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        if "giving up" in line:
            self.gave_up.set()


@pytest.fixture
def warnings() -> Iterator[Gave]:
    handler = Gave()
    logger = logging.getLogger("hpd_agent.governance")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def asker(warn_before: float = 59.9) -> Agent:
    @tool
    async def work(ctx: ToolContext) -> str:
        """Ask for a colour."""
        return await ctx.ask("Colour?", timeout=60, warn_before=warn_before)

    return Agent("Root", model=ScriptedModel([tool_call("work"), text("done")]), tools=[work])


async def answer_when_warned(agent: Agent, hooks: list[Any], **kw: Any) -> list[Event]:
    events: list[Event] = []
    async with agent.stream("go", hooks=hooks, **kw) as run:
        async for event in run:
            events.append(event)
            if isinstance(event, RequestExpiring):
                await run.respond(event.request_id, "blue", by="alice", channel="web")
    assert run.result.output == "done"
    return events


async def test_a_receiver_gets_opened_expiring_and_resolved_signed() -> None:
    with receiving() as (receiver, url):
        hook = Webhook(url, secret=SECRET)
        events = await answer_when_warned(asker(), [hook])
        assert await anyio.to_thread.run_sync(hook.flush, 30)
    (asked,) = [e for e in events if isinstance(e, ClarificationRequest)]
    got = receiver.received
    assert [r.payload["event"] for r in got] == ["opened", "expiring", "resolved"]
    for r in got:
        assert r.signed_by(SECRET)
        assert r.headers["Content-Type"] == "application/json"
        assert r.headers["X-Hpd-Delivery"] == r.payload["delivery_id"]
        assert r.payload["delivery_id"] == delivery_id(asked.request_id, r.payload["event"])
    assert got[0].payload == {
        "delivery_id": delivery_id(asked.request_id, "opened"),
        "event": "opened",
        "request_id": asked.request_id,
        "agent_path": ["Root"],
        "question_kind": "text",
        "question": "Colour?",
        "tool_name": None,
        "expires_at": asked.expires_at,
        "answered_by": None,
        "channel": None,
        "status": None,
    }
    assert got[2].payload["status"] == "answered"
    # Who answered, on which channel: the resolved notification's (the others name nobody).
    assert (got[2].payload["answered_by"], got[2].payload["channel"]) == ("alice", "web")
    assert len({r.payload["delivery_id"] for r in got}) == 3


async def test_a_permission_names_its_tool_and_only_the_chosen_events_go_out() -> None:
    @tool
    async def ship(ctx: ToolContext) -> str:
        """Deploy after asking."""
        refused = await ctx.ask_permission("deploy", {"env": "prod"})
        return refused or "deployed"

    agent = Agent("Root", model=ScriptedModel([tool_call("ship"), text("done")]), tools=[ship])
    with receiving() as (receiver, url):
        hook = Webhook(url, events=("resolved",))  # unsigned, one event
        async with agent.stream("go", hooks=[hook]) as run:
            async for event in run:
                if event.kind == "permission_request":
                    await run.respond(event.request_id, Approve())  # type: ignore[union-attr]
        assert await anyio.to_thread.run_sync(hook.flush, 30)
    (only,) = receiver.received
    assert "X-Hpd-Signature" not in only.headers
    payload = only.payload
    assert (payload["event"], payload["question_kind"], payload["tool_name"]) == (
        "resolved",
        "permission",
        "deploy",
    )
    assert payload["question"] == "Allow deploy? (env: prod)"
    assert payload["status"] == "answered"


async def test_a_slow_receiver_does_not_slow_the_run() -> None:
    with receiving() as (receiver, url):
        receiver.release.clear()  # it holds every delivery until the test lets it go
        hook = Webhook(url, secret=SECRET)
        await answer_when_warned(asker(), [hook])
        # The run is over while the receiver still holds the first delivery.
        assert await anyio.to_thread.run_sync(receiver.wait_arrived, 1)
        assert len(receiver.received) == 1
        receiver.release.set()
        assert await anyio.to_thread.run_sync(hook.flush, 30)
    assert [r.payload["event"] for r in receiver.received] == ["opened", "expiring", "resolved"]


async def test_a_receiver_that_is_down_fails_nothing_and_each_failed_try_is_logged(
    warnings: Gave,
) -> None:
    hook = Webhook(down_url(), events=("opened",))
    events = await answer_when_warned(asker(), [hook])
    assert events[-1].kind == "run_finished" and events[-1].status == "completed"  # type: ignore[union-attr]
    assert await anyio.to_thread.run_sync(warnings.gave_up.wait, 30)
    assert hook.flush(30)
    assert len(warnings.lines) == _deliveries.ATTEMPTS
    assert all("(opened of req_" in line for line in warnings.lines)
    assert [line.split("; ")[-1] for line in warnings.lines] == [
        *(f"retrying in {0.01 * 2**i:g} s" for i in range(_deliveries.ATTEMPTS - 1)),
        "giving up",
    ]
    # Where it went, not the URL's path (a Slack webhook's path is its secret).
    assert not [line for line in warnings.lines if "secret-part" in line]


async def test_a_receiver_answering_5xx_is_retried_and_4xx_is_not(warnings: Gave) -> None:
    with receiving() as (receiver, url):
        receiver.status = 503
        hook = Webhook(url, events=("opened",))
        await answer_when_warned(asker(), [hook])
        assert await anyio.to_thread.run_sync(hook.flush, 30)
        assert len(receiver.received) == _deliveries.ATTEMPTS
        ids = {r.payload["delivery_id"] for r in receiver.received}
        assert len(ids) == 1  # the same delivery each time
        receiver.status = 400
        hook = Webhook(url, events=("resolved",))
        await answer_when_warned(asker(), [hook])
        assert await anyio.to_thread.run_sync(hook.flush, 30)
    assert len(receiver.received) == _deliveries.ATTEMPTS + 1
    assert warnings.lines[-1].endswith("HTTP 400; giving up")


async def test_a_resumed_durable_run_does_not_notify_again(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agent = asker()
    with receiving() as (receiver, url):
        hook = Webhook(url, secret=SECRET)
        async with agent.stream("go", store=store, on_unhandled="interrupt", hooks=[hook]) as run:
            async for event in run:
                if isinstance(event, RequestExpiring):
                    run.stop_listening()  # left pending in the store
        assert run.result.status == "interrupted"
        assert await anyio.to_thread.run_sync(hook.flush, 30)
        assert [r.payload["event"] for r in receiver.received] == ["opened", "expiring"]
        async with agent.resume_stream(run.run_id, store=store, hooks=[hook]) as again:
            async for event in again:
                if isinstance(event, ClarificationRequest) and not event.replayed:
                    await again.respond(event.request_id, "blue")
        assert again.result.output == "done"
        assert await anyio.to_thread.run_sync(hook.flush, 30)
    await store.aclose()
    assert [r.payload["event"] for r in receiver.received] == ["opened", "expiring", "resolved"]


@pytest.mark.parametrize(
    ("args", "kwargs", "why"),
    [
        (("ftp://example.com/x",), {}, "http(s)://host"),
        (("https:///nohost",), {}, "http(s)://host"),
        (("https://exa mple.com",), {}, "http(s)://host"),
        (("https://example.com:99999/x",), {}, "http(s)://host"),
        ((42,), {}, "http(s)://host"),
        (("https://example.com",), {"events": ("opened", "closed")}, "'closed'"),
        (("https://example.com",), {"events": ()}, "some of"),
        (("https://example.com",), {"secret": ""}, "must not be empty"),
        (("https://example.com",), {"timeout": 0}, "positive number of seconds"),
        (("https://example.com",), {"timeout": float("inf")}, "positive number of seconds"),
    ],
)
def test_a_webhook_that_cannot_work_is_refused_when_made(
    args: tuple[Any, ...], kwargs: dict[str, Any], why: str
) -> None:
    with pytest.raises(UserError, match=None) as caught:
        Webhook(*args, **kwargs)
    assert why in str(caught.value)


def test_its_repr_shows_where_it_goes_not_the_path() -> None:
    hook = Webhook("https://hooks.example.com/services/T0/B0/XYZ", secret="k")
    assert "XYZ" not in repr(hook) and "hooks.example.com" in repr(hook)


def _delivery(n: int) -> _deliveries.Delivery:
    return _deliveries.Delivery(
        url="http://127.0.0.1:9/hook",
        body=b"{}",
        headers={},
        timeout=1.0,
        delivery_id=f"dlv_{n}",
        what=f"opened of req_{n}",
    )


class FakeReceiver:
    """``send`` for a worker of the test's own: fails while ``down``, records every try."""

    def __init__(self) -> None:
        self.tries: list[str] = []
        self.down = True
        self.tried = threading.Condition()
        self.gate = threading.Event()  # the first try waits for it
        self.gate.set()

    def send(self, delivery: _deliveries.Delivery) -> tuple[str, bool] | None:
        self.gate.wait(30)
        with self.tried:
            self.tries.append(delivery.delivery_id)
            self.tried.notify_all()
            return ("ConnectionRefusedError: refused", True) if self.down else None

    def wait_tries(self, count: int) -> bool:
        with self.tried:
            return self.tried.wait_for(lambda: len(self.tries) >= count, 30)


def test_behind_a_receiver_that_is_down_only_the_first_delivery_is_tried(warnings: Gave) -> None:
    fake = FakeReceiver()
    worker = _deliveries.Deliveries(fake.send, first_retry=0.01)
    where = "http://127.0.0.1:9"
    fake.gate.clear()  # the first try waits until all five are handed over
    for n in range(5):
        assert worker.submit(where, lambda n=n: _delivery(n))
    fake.gate.set()
    assert fake.wait_tries(3)  # the first, retried twice: the others wait behind it
    assert set(fake.tries) == {"dlv_0"}
    assert "; retrying in 0.02 s (4 more wait for this receiver)" in warnings.lines[1]
    fake.down = False  # back: the waiting ones follow at once, in order
    assert worker.flush(30)
    assert fake.tries[fake.tries.index("dlv_1") :] == ["dlv_1", "dlv_2", "dlv_3", "dlv_4"]


def test_past_queue_size_notifications_are_dropped_with_one_warning_each_way(
    warnings: Gave,
) -> None:
    release = threading.Event()
    started = threading.Event()

    def slow(delivery: _deliveries.Delivery) -> None:
        started.set()
        release.wait(30)

    worker = _deliveries.Deliveries(slow, queue_size=2)
    where = "http://127.0.0.1:9"
    assert worker.submit(where, lambda: _delivery(0)) and started.wait(30)
    assert worker.submit(where, lambda: _delivery(1))
    assert [worker.submit(where, lambda: _delivery(9)) for _ in range(3)] == [False] * 3
    assert warnings.lines == ["2 notifications are held already: dropping"]
    release.set()
    assert worker.flush(30)
    assert worker.submit(where, lambda: _delivery(2))
    assert warnings.lines[-1] == "3 notifications were dropped"
    assert worker.flush(30)
