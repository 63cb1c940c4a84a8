"""``PostgresStore``'s point statements on the event loop's connection, through libpq.

Each statement is prepared once on that connection and run with ``exec_prepared``: text
parameters in, text results out, converted by column type. psycopg's layer costs about a
third of such a round trip (~30 of ~90 µs here), and a question's round trip makes four of
them. Statements with a parameter psycopg alone can send (a list, a dict), or that the
server cannot prepare without parameter types, keep psycopg's way (``None`` from ``run``).

A statement is prepared at its first use, maybe inside a transaction. A PREPARE that fails
there fails the transaction too, so it raises (``NotPrepared``, one of ``GAVE_UP``: the
caller rolls back and does the work in the worker thread). Only a statement the server
refused is remembered as psycopg's way; one whose PREPARE gave up (a lock, or the time
limit of the event loop's connection, on a loaded machine) is prepared again at its next
use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from psycopg.abc import Buffer

import psycopg

__all__ = ["GAVE_UP", "NotPrepared", "RawRows", "RawStatements"]

_MAX_PREPARED = 64
"""Statements prepared per connection at most (the point statements are a fixed few)."""

_UNSUPPORTED = b""
"""A statement's prepared name when it keeps psycopg's way."""


class _PsycopgOnly(Exception):
    """A parameter only psycopg can send (a list, a dict, ...)."""


class NotPrepared(Exception):
    """A statement could not be prepared now (see the module doc); nothing was run."""


GAVE_UP = (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled, NotPrepared)
"""What a statement on the event loop's connection raises when it gave up (a row lock held,
its time limit, a PREPARE that failed): rolled back, for the worker thread to do."""

_GAVE_UP_STATES = (b"55P03", b"57014")
"""lock_not_available, query_canceled."""


def _param(value: Any) -> bytes | None:
    """A parameter as text for the server."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, (int, float)):
        return repr(value).encode()
    raise _PsycopgOnly


def _bool(text: bytes) -> bool:
    return text == b"t"


_CONVERT = {16: _bool, 20: int, 21: int, 23: int, 700: float, 701: float, 1700: float}
"""Result column types (OIDs) read as other than text: bool, integers, floats, numeric."""


class RawRows:
    """The rows of one statement, as much of a cursor as the stores use."""

    def __init__(self, result: psycopg.pq.abc.PGresult) -> None:
        tuples = result.command_tuples
        self.rowcount = tuples if tuples is not None else 0
        width = result.nfields
        converts = [_CONVERT.get(result.ftype(i)) for i in range(width)]
        rows: list[tuple[Any, ...]] = []
        for r in range(result.ntuples):
            row: list[Any] = []
            for i, convert in enumerate(converts):
                value = result.get_value(r, i)
                if value is None:
                    row.append(None)
                elif convert is None:
                    row.append(bytes(value).decode())
                else:
                    row.append(convert(bytes(value)))
            rows.append(tuple(row))
        self._rows = rows
        self._next = 0

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or None."""
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The remaining rows."""
        rest = self._rows[self._next :]
        self._next = len(self._rows)
        return rest


class RawStatements:
    """The statements prepared on one connection (by their psycopg SQL text)."""

    def __init__(self) -> None:
        self._names: dict[str, bytes] = {}

    def run(self, pgconn: psycopg.pq.abc.PGconn, sql: str, args: Sequence[Any]) -> RawRows | None:
        """Run ``sql`` (``%s`` placeholders) with ``args``; None when psycopg must run it.

        Raises:
            psycopg.Error: The statement failed (the class psycopg would raise).
            NotPrepared: It could not be prepared now (see the module doc).
        """
        try:
            params = [_param(value) for value in args]
        except _PsycopgOnly:
            return None
        name = self._names.get(sql)
        if name is None:
            name = self._prepare(pgconn, sql, len(params))
        if name is _UNSUPPORTED:
            return None
        # libpq takes None for NULL, whatever the stub says.
        result = pgconn.exec_prepared(name, cast("list[Buffer]", params))
        _raise_for(result)
        return RawRows(result)

    def prepared(
        self, pgconn: psycopg.pq.abc.PGconn, sql: str, args: Sequence[Any]
    ) -> tuple[bytes, list[bytes | None]] | None:
        """``sql`` prepared (now, if it was not) and its parameters, to send in a pipeline;
        None when psycopg must run it."""
        try:
            params = [_param(value) for value in args]
        except _PsycopgOnly:
            return None
        name = self._names.get(sql)
        if name is None:
            name = self._prepare(pgconn, sql, len(params))
        return None if name is _UNSUPPORTED else (name, params)

    def _prepare(self, pgconn: psycopg.pq.abc.PGconn, sql: str, count: int) -> bytes:
        if len(self._names) >= _MAX_PREPARED or "%%" in sql or sql.count("%s") != count:
            self._names[sql] = _UNSUPPORTED
            return _UNSUPPORTED
        parts = sql.split("%s")
        text = parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], 1))
        name = f"hpd_q{len(self._names)}".encode()
        result = pgconn.prepare(name, text.encode())
        if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
            state = result.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
            if state not in _GAVE_UP_STATES:
                # e.g. a parameter whose type the server cannot tell: psycopg's way from now
                self._names[sql] = _UNSUPPORTED
                if pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    return _UNSUPPORTED  # in no transaction: psycopg runs it now
            message = (result.error_message or b"").decode(errors="replace")
            raise NotPrepared(" ".join(message.split()) or "PREPARE failed")
        self._names[sql] = name
        return name


def _raise_for(result: psycopg.pq.abc.PGresult) -> None:
    status = result.status
    if status in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
        return
    state = result.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
    message = (result.error_message or b"statement failed").decode(errors="replace")
    error = psycopg.errors.lookup(state.decode()) if state else psycopg.OperationalError
    raise error(message.strip())
