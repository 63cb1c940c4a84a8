"""Concurrent durable runs whose process dies at a group commit (``hpd_agent.store._group``).

Run as a child process by ``test_group_commit.py``::

    python group_crash.py LOCATION POINT BATCH WORKDIR

``RUNS`` runs (ids ``r0``, ``r1``, ...) start at once in one store; each makes ``TURNS``
calls of the ``work`` tool (its side effect: a line in ``WORKDIR/effects.txt``), then
answers "done". The model yields to the event loop on every call (a real model's round
trip does), so the runs write at the same moments and their writes are committed in
groups. Each batch is listed in ``WORKDIR/batches.txt`` before it is committed: its journal
rows, and the runs whose start (``open_run``) or end (``close_run``) it holds. A batch tried
again another way (PostgreSQL's pipelined transaction gave up: statement by statement) is
the same batch, listed once: on PostgreSQL the pipelined try of the batch before ``BATCH``
gives up as if its time limit fired (a loaded machine does that), so one batch always is.
At batch ``BATCH`` the process ends itself (``os._exit(17)``, no clean-up) at ``POINT``:

- ``before``: the batch's rows are written in its open transaction (SQLite) or sent to the
  server without their sync point (PostgreSQL), not committed;
- ``after``: the batch is committed, no writer has been released yet.

With ``POINT`` ``none`` the runs finish (the resuming process uses ``build`` as well).

Which batch holds what depends on the scheduling of the runs and of the store's threads: on
a loaded machine a run's start may come in any batch, or commit alone after several, so a
run may not exist at all when the process dies (``test_group_commit.py`` starts it anew).
"""

from __future__ import annotations

import contextvars
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from hpd_agent import Agent, tool
from hpd_agent.messages import Message, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import Store, open_store
from hpd_agent.testing import FunctionModel, text, tool_call

RUNS = 3
TURNS = 3
CRASHED = 17


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)


def build(workdir: str) -> Agent:
    """The agent every run uses (here and in the resuming test)."""

    @tool
    async def work(key: str) -> str:
        """Do one step of work (a side effect: a line in effects.txt)."""
        _append(os.path.join(workdir, "effects.txt"), key)
        return f"did {key}"

    def turn(messages: Sequence[Message], info: ModelRequestParams) -> Any:
        prompt = next(m.content for m in messages if isinstance(m, UserMessage))
        if info.turn < TURNS:
            return tool_call("work", _id=f"c{info.turn}", key=f"{prompt}:{info.turn}")
        return text("done")

    return Agent("worker", model=FunctionModel(turn), tools=[work], max_turns=TURNS + 2)


def _crash_at(point: str, batch: int, workdir: str) -> None:
    """Make the store's group commit list each batch and die at ``batch``'s ``point``."""
    import psycopg

    from hpd_agent.store import _pg_journal, _sql_runs

    log = os.path.join(workdir, "batches.txt")
    seen = [0]
    last: list[Any] = []  # the ops of the batch listed last
    doing: dict[int, tuple[Any, str, str]] = {}  # id(op) -> (op, "starts" | "ends", run id)

    def listed(ops: Sequence[Any]) -> int:
        if ops and all(any(op is o for o in last) for op in ops):
            return seen[0]  # the batch listed last, tried again another way
        last[:] = ops
        seen[0] += 1
        rows = [list(r) for op in ops for r in (op.rows or ())]
        listing: dict[str, Any] = {"batch": seen[0], "rows": rows, "starts": [], "ends": []}
        for op in ops:
            if id(op) in doing:
                _, what, run_id = doing[id(op)]
                listing[what].append(run_id)
        _append(log, json.dumps(listing))
        return seen[0]

    # Which op is a run's start or end: the one ``open_run`` or ``close_run`` queues.
    making: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
        "making", default=None
    )
    group_op: Any = _sql_runs.SQLRuns._group_op  # pyright: ignore[reportPrivateUsage]
    open_run: Any = _sql_runs.SQLRuns.open_run
    close_run: Any = _sql_runs.SQLRuns.close_run

    def labelled_op(self: Any, op: Any) -> Any:
        what = making.get()
        if what is not None:
            doing[id(op)] = (op, *what)  # the op kept alive: its id stays its own
        return group_op(self, op)

    async def labelled_open(self: Any, record: Any, *args: Any) -> Any:
        token = making.set(("starts", record.run_id))
        try:
            return await open_run(self, record, *args)
        finally:
            making.reset(token)

    async def labelled_close(self: Any, record: Any, *args: Any) -> Any:
        token = making.set(("ends", record.run_id))
        try:
            return await close_run(self, record, *args)
        finally:
            making.reset(token)

    def group_transaction(self: Any, ops: list[Any]) -> Callable[[Any], None]:
        n = listed(ops)

        def commit(conn: Any) -> None:
            with self._transaction(conn):
                for op in ops:
                    self._apply(conn, op)
                if n == batch and point == "before":
                    os._exit(CRASHED)  # written in the open transaction, not committed
            if n == batch and point == "after":
                os._exit(CRASHED)  # committed; nobody released

        return commit

    chunk = _pg_journal.JournalPipe._chunk  # pyright: ignore[reportPrivateUsage]

    class _NoSync:
        """The connection, but its sync point never goes: the process dies first."""

        def __init__(self, pgconn: Any) -> None:
            self._pgconn = pgconn

        def __getattr__(self, name: str) -> Any:
            return getattr(self._pgconn, name)

        def pipeline_sync(self) -> None:
            while self._pgconn.flush() == 1:
                pass
            os._exit(CRASHED)  # the rows are at the server, in a transaction never committed

    gave_up: list[int] = []

    def pg_chunk(self: Any, pgconn: Any, ops: Sequence[Any], *rest: Any) -> None:
        n = listed(ops)
        if n == batch - 1 and not gave_up:
            gave_up.append(n)  # nothing sent: the store writes it again statement by statement
            raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
        if n == batch and point == "before":
            chunk(self, _NoSync(pgconn), ops, *rest)
        chunk(self, pgconn, ops, *rest)
        if n == batch and point == "after":
            os._exit(CRASHED)

    _sql_runs.SQLRuns._group_transaction = group_transaction  # type: ignore[method-assign]
    _sql_runs.SQLRuns._group_op = labelled_op  # type: ignore[method-assign]
    _sql_runs.SQLRuns.open_run = labelled_open  # type: ignore[method-assign]
    _sql_runs.SQLRuns.close_run = labelled_close  # type: ignore[method-assign]
    _pg_journal.JournalPipe._chunk = pg_chunk  # type: ignore[method-assign]


def open_grouping(location: str) -> Store:
    """The store at ``location`` as it groups writes: a SQLite file named ``*-os.db`` with
    ``durability="os"`` (the store's thread commits), another with the default (the event
    loop commits; grouped with the collector tuned, the default)."""
    if location.endswith("-os.db"):
        return open_store(location, durability="os")
    return open_store(location)


async def main(location: str, point: str, batch: int, workdir: str) -> None:
    if point != "none":
        _crash_at(point, batch, workdir)
    store = open_grouping(location)
    agent = build(workdir)
    async with anyio.create_task_group() as tg:
        for i in range(RUNS):
            tg.start_soon(lambda i=i: agent.run(f"r{i}", store=store, run_id=f"r{i}"))
    await store.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
