"""Group commit: the writes of many runs due at the same moment, in one commit.

A store driving many runs at once (a thousand runs of one process, each at its turn's
write) would pay a commit per run per write. ``GroupCommit`` is the classic leader/follower
group commit: the first write to arrive leads a batch; the writes made while that batch is
open (the runs ready in the same turn of the event loop) and while the commit before it is
in flight follow it; the leader commits them all in one transaction (SQLite) or one
pipelined transaction (PostgreSQL), and every writer goes on when its own write is durable,
with its own result or the error that refused it alone (a stale fence refuses its own
run's writes; the others commit). No timer: a batch gathers only what is queued already.

A store uses it only while it drives more than one run: a lone run's write is committed at
once, as before, and never waits for a batch.

Once queued, a write is committed whatever happens to its writer: a writer cancelled while
it waits loses only the wait (the leader commits shielded).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from ._fence import Fence

__all__ = ["GroupCommit", "GroupOp"]


class GroupOp:
    """One write of one run in a batch.

    Attributes:
        apply: Runs the write on the batch's connection, inside its transaction; what it
            returns is ``result`` (None for a journal write: the store writes its
            ``rows``). An exception it raises (not the database's own error) refuses this
            write alone; ``savepoint`` says whether it may have written something before it
            raised (then it runs in a savepoint of its own).
        savepoint: See ``apply``.
        result: What ``apply`` returned.
        error: What refused it, or the batch's failure.
        rows: For a journal write, its rows ``(run_id, key, kind, value)`` (a store that
            pipelines a batch sends them itself instead of calling ``apply``).
        fence: For a journal write, the run's fence, checked by each row's insert.
        statement: For a write of one statement, its SQL and arguments (a store that
            pipelines a batch sends it itself, and ``read`` makes the result of its rows).
        read: See ``statement``; like ``apply``, it may raise what refuses the write.
    """

    __slots__ = ("apply", "error", "fence", "read", "result", "rows", "savepoint", "statement")

    def __init__(
        self,
        apply: Callable[[Any], Any] | None,
        *,
        savepoint: bool = False,
        rows: Sequence[tuple[str, str, str, str]] | None = None,
        fence: Fence | None = None,
        statement: tuple[str, Sequence[Any]] | None = None,
        read: Callable[[Any], Any] | None = None,
    ) -> None:
        self.apply = apply
        self.statement = statement
        self.read = read
        self.savepoint = savepoint
        self.rows = rows
        self.fence = fence
        self.result: Any = None
        self.error: BaseException | None = None


class _Batch:
    __slots__ = ("done", "event", "ops", "thread")

    def __init__(self, first: GroupOp) -> None:
        self.ops = [first]
        self.thread = threading.get_ident()  # its event loop's thread: others do not join
        self.event = anyio.Event()
        self.done = False

    def release(self) -> None:
        self.done = True
        self.event.set()


class GroupCommit:
    """The group commit of one store object (module doc).

    Args:
        commit: Commits a batch of ops in one transaction (each op's ``result`` or
            ``error`` set); raises if the transaction as a whole failed (nothing written).
    """

    def __init__(self, commit: Callable[[list[GroupOp]], Awaitable[None]]) -> None:
        self._commit = commit
        self._open: _Batch | None = None
        """The batch gathering writes (its leader has not committed it yet)."""
        self._flying: _Batch | None = None
        """The batch being committed in the store's thread."""
        self.batches = 0
        """Batches committed so far (for tests and benchmarks)."""
        self.ops = 0
        """Writes committed or refused so far in batches."""

    async def run(self, op: GroupOp) -> Any:
        """Commit ``op`` with whatever else is due now; its result once it is durable.

        Raises:
            BaseException: What refused this write (``RunLeasedError`` for a stale
                fence, ``UserError`` ...), or the batch's failure.
        """
        batch = self._open
        if batch is not None and batch.thread == threading.get_ident():
            batch.ops.append(op)
            # The leader went round the loop before this writer: where it commits without
            # a wait (on the event loop) the batch is durable when this one is back, and no
            # wait of its own (a future and two frames, alive across the commit) is made.
            await anyio.lowlevel.checkpoint()
            if not batch.done:
                await batch.event.wait()
        else:
            with anyio.CancelScope(shield=True):  # a queued write is committed
                await self._lead(_Batch(op))
        if op.error is not None:
            raise op.error
        return op.result

    async def _lead(self, batch: _Batch) -> None:
        mine = self._open is None
        if mine:
            self._open = batch
        try:
            # The runs ready at this moment write before the loop comes back here.
            await anyio.lowlevel.checkpoint()
            flying = self._flying
            while flying is not None and flying.thread == batch.thread and not flying.done:
                await flying.event.wait()  # still gathering while the commit before flies
                flying = self._flying
        finally:
            if mine:
                self._open = None
        self._flying = batch
        try:
            await self._commit(batch.ops)
            self.batches += 1
            self.ops += len(batch.ops)
        except BaseException as e:
            for op in batch.ops:
                if op.error is None:
                    op.error = e
        finally:
            if self._flying is batch:
                self._flying = None
            batch.release()
