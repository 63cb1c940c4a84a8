"""``Activity``: what a server did, one line per run and per request, for whoever runs it.

A server (``hpd-agent serve``, web or A2A) tells its activity in lines given to ``write``:
a run started or resumed, and how it ended; a request asked (by which agent, on which
channel: a web thread, A2A), and how it ended: answered or declined by whom (who the
client came as, when the server knows) and through what (the web inbox, an AG-UI resume,
a message in the A2A task), or elsewhere, through the store (``hpd-agent answer`` in
another process); expired or cancelled; a call a remembered grant approved is one line
naming the grant (nobody was asked). The run's own events say what happened (``watch``
wraps the ``EventSink`` it is driven with). A route passing an answer on says who gave it
first (``giving``): the line is written when the run says it took the answer, or when the
route saw it taken by a run that says nothing (``given``: one interrupted, answered in the
store), once either way. Every piece of text from an agent or a client is made printable on
one line and cut short; no answer's value is written (it may be private).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from functools import partial

from ..events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RunStarted,
    format_path,
)
from ..questions import answer_prompt
from ..text import printable
from ._drive import EventSink
from ._outcome import Outcome

__all__ = ["Activity"]

_TEXT = 80
"""Characters of a question or an error kept in a line."""
_TOLD = 10_000
"""Requests whose answer was said by the route that took it, remembered until the run says
it too (the oldest forgotten past this many: a run that never does)."""


def _short(text: str, limit: int = _TEXT) -> str:
    text = printable(" ".join(text.split()), one_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Activity:
    """A server's activity log (see the module docstring).

    Args:
        write: Takes each line, without a newline (``hpd-agent serve`` prints it after the
            time of day).
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = partial(_said, write)
        self._told: dict[str, str | None] = {}
        """Answers routes pass on, by request id: who gave each and through what, until its
        line is written (by the run's word on it, or by ``given``); then None, so that the
        run's word on it, coming later, is not said again."""

    def watch(
        self, sink: EventSink, run_id: str, where: str, *, resumed: bool = False
    ) -> EventSink:
        """``sink`` for driving run ``run_id`` (``hosting.drive``), this log told of each of
        its events and of its end; ``where`` names the channel (``thread t_1``)."""
        return _Watched(self._write, self._told, sink, (run_id, _short(where), resumed))

    def giving(self, request_id: str, where: str, *, by: str | None, via: str) -> None:
        """A route passes on an answer to ``request_id`` (or its refusal) from ``by`` (who
        the client came as: a token's name, ``local``; None: not known) through ``via``,
        on channel ``where``. Its line is written when the run says it took it, or at
        ``given``; ``withdrawn`` forgets it (refused)."""
        told = self._told
        told[request_id] = _by(by, via) + f" ({_short(where)})"
        if len(told) > _TOLD:
            del told[next(iter(told))]

    def given(self, request_id: str, *, declined: bool = False) -> None:
        """The answer ``giving`` announced was taken (by a run that may not say so: one
        interrupted, answered in the store): its line, unless the run wrote it already."""
        said = self._told.get(request_id)
        if said is not None:
            did = "declined" if declined else "answered"
            self._write(f"request {request_id} {did}{said}")
            self._told[request_id] = None

    def withdrawn(self, request_id: str) -> None:
        """The answer ``giving`` announced was not taken: nothing is said of it."""
        self._told.pop(request_id, None)


def _said(write: Callable[[str], None], line: str) -> None:
    # A log that cannot be written (stdout closed: a broken pipe) must not fail a run.
    with contextlib.suppress(Exception):
        write(line)


def _by(by: str | None, via: str) -> str:
    return ("" if by is None else f" by {_short(by, 40)}") + f" via {via}"


class _Watched:
    """An ``EventSink`` that writes a line for what the log says of an event, then hands it
    on (``Activity.watch``)."""

    __slots__ = ("resumed", "run_id", "since", "sink", "told", "where", "write")

    def __init__(
        self,
        write: Callable[[str], None],
        told: dict[str, str | None],
        sink: EventSink,
        run: tuple[str, str, bool],
    ) -> None:
        self.write = write
        self.told = told
        self.sink = sink
        self.run_id, self.where, self.resumed = run
        self.since = time.monotonic()

    def take(self, event: Event) -> Awaitable[None] | None:
        line = self._line(event)
        if line is not None:
            self.write(line)
        return self.sink.take(event)

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        # Said first: once the sink has closed, a client may have its answer and be gone.
        seconds = time.monotonic() - self.since
        self.write(_run_ended(self.run_id, self.where, outcome, seconds))
        await self.sink.close(outcome, raised)

    def _line(self, event: Event) -> str | None:
        where = self.where
        if isinstance(event, (ClarificationResolved, PermissionResolved)):
            rid, status = event.request_id, event.status
            if rid in self.told:
                given = self.told.pop(rid)
                if given is None:
                    return None  # said by the route that passed it on
                return f"request {rid} {status}{given}"
            if event.replayed or (event.channel == "grant" and status == "answered"):
                return None  # said in an earlier life, or with its request (a grant's)
            how = f"{status} elsewhere, through the store" if status in _GIVEN else status
            return f"request {rid} {how} ({where})"
        if isinstance(event, RunStarted):
            return f"run {event.run_id} {'resumed' if self.resumed else 'started'} ({where})"
        if event.replayed:
            return None  # said in an earlier life of the run
        if isinstance(event, PermissionRequest) and event.grant_id is not None:
            # Nobody is asked: approved as it is raised, answered by grant:<id>.
            who = _short(format_path(event.agent_path))
            tool = _short(event.tool_name, 40)
            grant = _short(event.grant_id, 40)
            return (
                f"request {event.request_id} of {who} ({where}): {tool} approved by grant {grant}"
            )
        if isinstance(event, (ClarificationRequest, PermissionRequest)):
            if isinstance(event, PermissionRequest):
                what = f"Allow {_short(event.tool_name, 40)}?"
            else:
                what = _short(event.question)
            who = _short(format_path(event.agent_path))
            label = answer_prompt(event).label
            return f"request {event.request_id} asked by {who} ({where}): {label}: {what}"
        return None


_GIVEN = ("answered", "declined")


def _run_ended(run_id: str, where: str, outcome: Outcome, seconds: float) -> str:
    line = f"run {run_id} {outcome.status} ({where}) after {seconds:.1f} s"
    result = outcome.result
    if outcome.status == "interrupted" and result is not None and result.pending:
        count = len(result.pending)
        return line + f": {count} request{'s' if count > 1 else ''} waiting"
    if outcome.error:
        return line + f": {_short(outcome.error)}"
    return line
