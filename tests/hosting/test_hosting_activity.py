"""``hosting.Activity`` on its own: each request's end said once, whoever says it first (the
route that passed the answer on, or the run); text from agents on one printable line; a log
that cannot be written never fails the run it watches."""

from __future__ import annotations

from typing import Any

import anyio

from hpd_agent.events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RunStarted,
)
from hpd_agent.hosting import Activity, Outcome


class Sink:
    """A driven run's sink that keeps what it is given."""

    def __init__(self) -> None:
        self.taken: list[Event] = []
        self.closed: list[Outcome] = []

    def take(self, event: Event) -> None:
        self.taken.append(event)

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        self.closed.append(outcome)


def _asked(question: str = "Which one?", path: tuple[str, ...] = ("A", "B")) -> Any:
    return ClarificationRequest(
        run_id="run_1", agent_path=path, depth=1, request_id="req_1", question=question
    )


def _resolved(status: str = "answered", *, replayed: bool = False) -> ClarificationResolved:
    return ClarificationResolved(
        run_id="run_1",
        agent_path=("A", "B"),
        depth=1,
        request_id="req_1",
        status=status,  # type: ignore[arg-type]
        replayed=replayed,
    )


def test_an_answer_passed_on_is_said_once_whoever_says_it_first() -> None:
    lines: list[str] = []
    activity = Activity(lines.append)
    sink = activity.watch(Sink(), "run_1", "thread t")
    # The run says it took the answer before the route returns.
    activity.giving("req_1", "thread t", by="ops", via="the inbox")
    sink.take(_resolved())
    activity.given("req_1")
    # The route returns first (the run was interrupted: the store took it), the run says
    # it when resumed (replayed) or at once.
    activity.giving("req_1", "thread t", by=None, via="the inbox")
    activity.given("req_1", declined=True)
    sink.take(_resolved("declined", replayed=True))
    assert lines == [
        "request req_1 answered by ops via the inbox (thread t)",
        "request req_1 declined via the inbox (thread t)",
    ]
    # Refused by the run: withdrawn, and an answer from elsewhere is said as such.
    activity.giving("req_1", "thread t", by="ops", via="the inbox")
    activity.withdrawn("req_1")
    sink.take(_resolved())
    sink.take(_resolved("expired"))
    assert lines[2:] == [
        "request req_1 answered elsewhere, through the store (thread t)",
        "request req_1 expired (thread t)",
    ]


def test_text_from_agents_stays_on_one_printable_line() -> None:
    lines: list[str] = []
    sink = Activity(lines.append).watch(Sink(), "run_1", "thread \x1b[2J\nt")
    sink.take(_asked("Pick one\n12:00:00 run run_2 completed\x1b[31m" + "x" * 500, ("A\nB",)))
    [line] = lines
    assert "\n" not in line and "\x1b" not in line
    # Whitespace runs become one space; controls are spelled out: no fake second line.
    assert line.startswith(
        r"request req_1 asked by A B (thread \x1b[2J t): Question: Pick one 12:00:00 run"
    )
    assert len(line) < 250 and line.endswith("…")


def test_a_log_that_cannot_be_written_never_fails_the_run() -> None:
    def broken(line: str) -> None:
        raise BrokenPipeError("stdout is gone")

    inner = Sink()
    sink = Activity(broken).watch(inner, "run_1", "A2A")
    started = RunStarted(run_id="run_1", agent_path=("A",), depth=0, prompt="go")
    sink.take(started)
    anyio.run(sink.close, Outcome("completed", output="done"), None)
    assert inner.taken == [started]
    assert [o.status for o in inner.closed] == ["completed"]


def test_a_call_a_grant_approved_is_one_line_naming_the_grant() -> None:
    lines: list[str] = []
    sink = Activity(lines.append).watch(Sink(), "run_1", "thread t")
    where = {"run_id": "run_1", "agent_path": ("Ops", "Deployer"), "depth": 1}
    sink.take(
        PermissionRequest(
            **where,
            request_id="req_2",
            tool_name="deploy",
            arguments={},
            tool_call_id="call_1",
            grant_id="3fa2",
        )
    )
    sink.take(
        PermissionResolved(
            **where,
            request_id="req_2",
            tool_name="deploy",
            status="answered",
            approved=True,
            scope="once",
            answered_by="grant:3fa2",
            channel="grant",
        )
    )
    assert lines == ["request req_2 of Ops > Deployer (thread t): deploy approved by grant 3fa2"]
