"""``PostgresStore``'s journal writes on the event loop's connection, through libpq.

The journal write is the hottest statement (two per turn): it is prepared once on that
connection and run through libpq directly (psycopg's layer costs a third of it). A tool
result's write is *sent ahead*: it goes to the server the moment the result exists, in
libpq's pipeline mode with a sync point of its own (so it commits alone), and its reply is
read before the connection's next statement (``settle``), which comes before the run acts
on anything after the result. A turn's tool result and its next model response so take one
round trip. A write sent ahead that failed fails that next statement, naming the entry; one
that gave up on a row lock (``lock_timeout``) is kept in ``again``, for the store to write
in its worker thread, waiting for the lock, before that statement.

While the store drives several runs, the writes due at once come as one batch (``_group``):
``batch`` sends them all in the pipeline with one sync point (one transaction, one round
trip); a fenced run's rows are each its fenced insert, so a stale run's rows write nothing
("INSERT 0 0") while the others commit.
"""

from __future__ import annotations

import select
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import psycopg

if TYPE_CHECKING:
    from psycopg.abc import Buffer

from ..exceptions import HpdAgentError, StoreUnavailableError
from ._base import JournalEntry, dump_json
from ._fence import Fence
from ._group import GroupOp
from ._pg_raw import RawRows, RawStatements

__all__ = ["JournalPipe"]

_CHUNK = 512
"""Writes sent at most before their replies are read (one transaction each): the replies of
a larger batch could fill the socket's buffers while it is still sending."""

_JOURNAL_PUT = b"hpd_journal_put"
"""The journal write, prepared once on the event loop's connection and run through libpq
directly (the hottest statement: two per turn; psycopg's layer costs a third of it)."""
_JOURNAL_PUT_SQL = (
    b"INSERT INTO hpd_journal (run_id, key, kind, value) VALUES ($1, $2, $3, $4) "
    b"ON CONFLICT (run_id, key) DO UPDATE SET kind = EXCLUDED.kind, value = EXCLUDED.value"
)

_JOURNAL_PUT_FENCED = b"hpd_journal_put_fenced"
_JOURNAL_PUT_FENCED_SQL = (
    b"INSERT INTO hpd_journal (run_id, key, kind, value) SELECT $1, $2, $3, $4 "
    b"WHERE EXISTS (SELECT 1 FROM hpd_leases WHERE run_id = $1 AND fence = $5 FOR SHARE) "
    b"ON CONFLICT (run_id, key) DO UPDATE SET kind = EXCLUDED.kind, value = EXCLUDED.value"
)
"""The journal write of a fenced run (see ``_fence``): written only while the run's lease
has the session's token; otherwise nothing is written ("INSERT 0 0")."""

_SQLSTATE = psycopg.pq.DiagnosticField.SQLSTATE
_GAVE_UP = (b"55P03", b"57014")
"""lock_not_available, query_canceled: a statement on the event loop's connection gave up
waiting (``_FAST_LIMIT``) and was rolled back."""


def _journal_params(run_id: str, entry: JournalEntry, fence: Fence | None) -> list[bytes]:
    params = [
        run_id.encode(),
        entry.key.encode(),
        entry.kind.encode(),
        dump_json(entry.value).encode(),
    ]
    if fence is not None:
        params.append(str(fence.token).encode())
    return params


def _name(fence: Fence | None) -> bytes:
    return _JOURNAL_PUT if fence is None else _JOURNAL_PUT_FENCED


def _refused(result: psycopg.pq.abc.PGresult) -> bool:
    """Whether a fenced write wrote nothing: the lease has another token now."""
    return (result.command_status or b"").endswith(b" 0")


def _flush(pgconn: psycopg.pq.abc.PGconn) -> None:
    """Send what libpq holds for the server (a nonblocking connection may need rounds)."""
    while pgconn.flush() == 1:
        select.select([], [pgconn.socket], [], 1.0)


def _check(result: psycopg.pq.abc.PGresult) -> None:
    """Raise the psycopg error a failed low-level statement stands for."""
    if result.status == psycopg.pq.ExecStatus.COMMAND_OK:
        return
    state = result.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
    message = (result.error_message or b"statement failed").decode(errors="replace")
    error = psycopg.errors.lookup(state.decode()) if state else psycopg.OperationalError
    raise error(message.strip())


class JournalPipe:
    """The journal writes of one connection: prepared once, sent ahead, settled."""

    def __init__(self) -> None:
        self.prepared = False
        self.sent: deque[tuple[str, JournalEntry, Fence | None]] = deque()
        """The writes sent ahead whose replies are still unread."""
        self.again: deque[tuple[str, JournalEntry, Fence | None]] = deque()
        """Writes sent ahead that met a row lock: to be written again, waiting for it."""

    def prepare(self, pgconn: psycopg.pq.abc.PGconn) -> None:
        """Prepare the journal writes on ``pgconn`` (once; ``PostgresStore`` does it as it
        opens the connection, before any time limit: setup, not a point statement).

        Raises:
            psycopg.Error: The server could not prepare them.
        """
        if not self.prepared:
            _check(pgconn.prepare(_JOURNAL_PUT, _JOURNAL_PUT_SQL))
            _check(pgconn.prepare(_JOURNAL_PUT_FENCED, _JOURNAL_PUT_FENCED_SQL))
            self.prepared = True

    def write(
        self, pgconn: psycopg.pq.abc.PGconn, run_id: str, entry: JournalEntry, fence: Fence | None
    ) -> None:
        """Write one entry and wait for it (nothing may be in flight).

        Raises:
            RunLeasedError: ``fence`` no longer holds; nothing was written.
        """
        self.prepare(pgconn)
        result = pgconn.exec_prepared(_name(fence), _journal_params(run_id, entry, fence))
        _check(result)
        if fence is not None and _refused(result):
            raise fence.refuse()

    def send(
        self, pgconn: psycopg.pq.abc.PGconn, run_id: str, entry: JournalEntry, fence: Fence | None
    ) -> None:
        """Send one entry without waiting for its reply."""
        self.prepare(pgconn)
        if pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            pgconn.enter_pipeline_mode()
        pgconn.send_query_prepared(_name(fence), _journal_params(run_id, entry, fence))
        pgconn.pipeline_sync()
        self.sent.append((run_id, entry, fence))
        _flush(pgconn)

    def settle(self, pgconn: psycopg.pq.abc.PGconn) -> None:
        """Read the replies of the writes sent ahead and leave pipeline mode.

        Raises:
            StoreUnavailableError: One of them failed (named), or the connection broke.

        A write its fence refused wrote nothing and marks that fence lost (``Fence.refuse``):
        its run is stopped before its next tool function or step (``LeaseKeeper.guard``),
        and a statement of another run on this connection is not failed for it.
        """
        failed: str | None = None
        while self.sent:
            run_id, entry, fence = self.sent.popleft()
            result = pgconn.get_result()
            for _ in range(3):  # the end of the statement's results (None), its sync point
                end = pgconn.get_result()
                if end is not None and end.status == psycopg.pq.ExecStatus.PIPELINE_SYNC:
                    break
            if result is not None and result.status == psycopg.pq.ExecStatus.COMMAND_OK:
                if fence is not None and _refused(result):
                    fence.refuse()
                continue
            state = None if result is None else result.error_field(_SQLSTATE)
            if state in _GAVE_UP:  # a row lock held elsewhere: written again, waiting for it
                self.again.append((run_id, entry, fence))
            elif failed is None:
                why = "no reply" if result is None else (result.error_message or b"").decode()
                failed = (
                    f"journal entry {entry.key!r} of run {run_id!r} was not written: "
                    f"{' '.join(why.split())}"
                )
        if pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
            pgconn.exit_pipeline_mode()
        if failed is not None:
            raise StoreUnavailableError(failed)

    def batch(
        self,
        pgconn: psycopg.pq.abc.PGconn,
        ops: Sequence[GroupOp],
        raw: RawStatements,
        committed: list[GroupOp],
    ) -> bool:
        """Write ``ops`` (journal writes of several runs, a run's start or end: one
        statement each) in one transaction per ``_CHUNK`` of them, one round trip each;
        sets each op's ``result`` or ``error`` (a refused run's), and adds the ops of each
        chunk committed to ``committed``. False, having sent nothing, when a statement
        cannot go this way.

        Raises:
            psycopg.Error: A statement failed: its chunk was rolled back (for the store to
                write the ops not in ``committed`` again its other way: a row lock given
                up, say; a run's start written twice would find itself there already).
        """
        self.prepare(pgconn)
        sends: list[tuple[bytes, list[bytes | None]] | None] = []
        for op in ops:
            prepared = None if op.statement is None else raw.prepared(pgconn, *op.statement)
            if prepared is None and op.rows is None:
                return False
            sends.append(prepared)
        for start in range(0, len(ops), _CHUNK):
            end = start + _CHUNK
            self._chunk(pgconn, ops[start:end], sends[start:end])
            committed.extend(ops[start:end])
        return True

    def _chunk(
        self,
        pgconn: psycopg.pq.abc.PGconn,
        ops: Sequence[GroupOp],
        sends: Sequence[tuple[bytes, list[bytes | None]] | None],
    ) -> None:
        pgconn.enter_pipeline_mode()
        failed: psycopg.pq.abc.PGresult | None = None
        try:
            for op, send in zip(ops, sends, strict=True):
                if send is not None:
                    pgconn.send_query_prepared(send[0], cast("list[Buffer | None]", send[1]))
                    continue
                fence = op.fence
                name = _name(fence)
                token = None if fence is None else str(fence.token).encode()
                for row in op.rows or ():
                    params = [value.encode() for value in row]
                    if token is not None:
                        params.append(token)
                    pgconn.send_query_prepared(name, cast("list[Buffer | None]", params))
            pgconn.pipeline_sync()
            _flush(pgconn)
            for op, send in zip(ops, sends, strict=True):
                op.error = None
                for _ in range(1) if send is not None else op.rows or ():
                    result = _next_result(pgconn)
                    if result.status in _DONE:
                        _read(op, result, send is not None)
                    elif result.status != psycopg.pq.ExecStatus.PIPELINE_ABORTED:
                        failed = failed or result
            for _ in range(3):  # the sync point
                end = pgconn.get_result()
                if end is not None and end.status == psycopg.pq.ExecStatus.PIPELINE_SYNC:
                    break
        finally:
            if pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
                pgconn.exit_pipeline_mode()
        if failed is not None:
            _check(failed)


_DONE = (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK)


def _next_result(pgconn: psycopg.pq.abc.PGconn) -> psycopg.pq.abc.PGresult:
    result = pgconn.get_result()
    pgconn.get_result()  # the end of the statement's results
    if result is None:
        raise StoreUnavailableError("no reply from PostgreSQL to a write of a group commit")
    return result


def _read(op: GroupOp, result: psycopg.pq.abc.PGresult, statement: bool) -> None:
    """A statement's result for ``op``: its ``result``, or what refuses it alone."""
    if statement:
        try:
            op.result = op.read(RawRows(result)) if op.read is not None else None
        except HpdAgentError as e:
            op.error = e
    elif op.fence is not None and _refused(result) and op.error is None:
        op.error = op.fence.refuse()
