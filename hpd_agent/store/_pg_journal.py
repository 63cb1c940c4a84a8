"""``PostgresStore``'s journal writes on the event loop's connection, through libpq.

The journal write is the hottest statement (two per turn): it is prepared once on that
connection and run through libpq directly (psycopg's layer costs a third of it). A tool
result's write is *sent ahead*: it goes to the server the moment the result exists, in
libpq's pipeline mode with a sync point of its own (so it commits alone), and its reply is
read before the connection's next statement (``settle``), which comes before the run acts
on anything after the result. A turn's tool result and its next model response so take one
round trip. A write sent ahead that failed fails that next statement, naming the entry; one
that gave up (a row lock held, its time limit) is kept in ``again``, for the store to write
in its worker thread, waiting for the lock, before that statement.

Each write's transaction commits at its sync point, and every reply up to that point is read
(``_until_sync``) before the write counts as written: a transaction can fail after its
statement succeeded, the error coming as one more reply before the sync point. The
connection's ``statement_timeout`` does that on a loaded machine when its timer fires as the
statement ends (the server reports it while reading the sync message, and rolls the write
back); so would a deferred constraint. A connection lost before a write's sync point leaves
it unconfirmed (committed or not, no one can tell): the store writes it again (an upsert,
the same row) on another connection.

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

_SYNC = psycopg.pq.ExecStatus.PIPELINE_SYNC
_DONE = (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK)


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


def _why(result: psycopg.pq.abc.PGresult) -> str:
    """What the server said of a failed statement, on one line (never empty)."""
    message = " ".join((result.error_message or b"").decode(errors="replace").split())
    return message or f"the server answered {psycopg.pq.ExecStatus(result.status).name}"


def _check(result: psycopg.pq.abc.PGresult) -> None:
    """Raise the psycopg error a failed low-level statement stands for."""
    if result.status == psycopg.pq.ExecStatus.COMMAND_OK:
        return
    state = result.error_field(_SQLSTATE)
    error = psycopg.errors.lookup(state.decode()) if state else psycopg.OperationalError
    raise error(_why(result))


def _until_sync(pgconn: psycopg.pq.abc.PGconn) -> list[psycopg.pq.abc.PGresult] | None:
    """Every reply up to the next sync point (not the ends of statements' results), or None
    when the connection was lost before it came.

    The transaction of what was sent before the sync point committed only if none of them is
    an error: one that failed after its statement succeeded (its commit, or a time limit
    that fired as the statement ended) comes as one more reply after the statement's own.
    """
    results: list[psycopg.pq.abc.PGresult] = []
    ended = False  # the previous read was the end of a statement's results
    while True:
        result = pgconn.get_result()
        if result is None:
            # Twice in a row: nothing more is coming (the connection is lost).
            if ended or pgconn.status == psycopg.pq.ConnStatus.BAD:
                return None
            ended = True
            continue
        if result.status == _SYNC:
            return results
        ended = False
        results.append(result)


def _failure(results: Sequence[psycopg.pq.abc.PGresult]) -> psycopg.pq.abc.PGresult | None:
    """The first error among a transaction's replies (it was rolled back), if any."""
    return next((result for result in results if result.status not in _DONE), None)


class JournalPipe:
    """The journal writes of one connection: prepared once, sent ahead, settled."""

    def __init__(self) -> None:
        self.prepared = False
        self.sent: deque[tuple[str, JournalEntry, Fence | None]] = deque()
        """The writes sent ahead whose replies are still unread."""
        self.again: deque[tuple[str, JournalEntry, Fence | None]] = deque()
        """Writes sent ahead that gave up (a row lock held, the time limit) or whose replies
        were lost with the connection: to be written again in the worker thread."""

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

    def settle(self, pgconn: psycopg.pq.abc.PGconn) -> bool:
        """Read the replies of the writes sent ahead and leave pipeline mode.

        Returns:
            False when the connection was lost before every reply came: the writes not
            confirmed stay in ``sent`` (committed or not, no one can tell), for the caller
            to close the connection and write them again (``again``).

        Raises:
            StoreUnavailableError: One of them failed (named, with the server's words).

        A write counts as written once its transaction committed (``_until_sync``). One
        that gave up (a row lock, the time limit) goes to ``again``. A write its fence
        refused wrote nothing and marks that fence lost (``Fence.refuse``): its run is
        stopped before its next tool function or step (``LeaseKeeper.guard``), and a
        statement of another run on this connection is not failed for it.
        """
        failed: str | None = None
        sent = self.sent
        while sent:
            results = _until_sync(pgconn)
            if results is None:
                if failed is not None:
                    raise StoreUnavailableError(failed)
                return False
            run_id, entry, fence = sent.popleft()
            error = _failure(results)
            if error is None and results:  # committed
                if fence is not None and _refused(results[0]):
                    fence.refuse()
            elif error is not None and error.error_field(_SQLSTATE) in _GAVE_UP:
                self.again.append((run_id, entry, fence))  # rolled back: written again
            elif failed is None:
                why = "the server did not run it" if error is None else _why(error)
                failed = f"journal entry {entry.key!r} of run {run_id!r} was not written: {why}"
        if pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
            pgconn.exit_pipeline_mode()
        if failed is not None:
            raise StoreUnavailableError(failed)
        return True

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
        """Write ``ops`` in one pipelined transaction; raises (as ``batch`` says) unless it
        committed. A connection lost before the commit was confirmed is left in pipeline
        mode, for the caller to close."""
        pgconn.enter_pipeline_mode()
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
        results = _until_sync(pgconn)
        if results is None:  # not retried: a run's start or end written twice would fail
            raise StoreUnavailableError(
                "the connection to PostgreSQL was lost before it confirmed a group commit "
                f"of {len(ops)} writes: whether they were written is unknown"
            )
        pgconn.exit_pipeline_mode()
        failed = _failure(results)
        if failed is not None:
            _check(failed)  # the transaction was rolled back: none of it was written
        statements = [
            (op, send is not None)
            for op, send in zip(ops, sends, strict=True)
            for _ in (range(1) if send is not None else op.rows or ())
        ]
        for op in ops:
            op.error = None
        for (op, statement), result in zip(statements, results, strict=True):
            _read(op, result, statement)


def _read(op: GroupOp, result: psycopg.pq.abc.PGresult, statement: bool) -> None:
    """A statement's result for ``op``: its ``result``, or what refuses it alone."""
    if statement:
        try:
            op.result = op.read(RawRows(result)) if op.read is not None else None
        except HpdAgentError as e:
            op.error = e
    elif op.fence is not None and _refused(result) and op.error is None:
        op.error = op.fence.refuse()
