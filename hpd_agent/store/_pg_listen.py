"""``PostgresStore``'s listening connection: LISTEN on the channel ``resolve`` notifies,
its socket watched on the event loop and its notifications read without waiting."""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from ..exceptions import StoreUnavailableError

__all__ = ["CHANNEL", "Listener"]

CHANNEL = "hpd_agent_requests"
"""The NOTIFY channel; the payload is the id of the request that left ``pending``."""

_Conn = psycopg.Connection[tuple[Any, ...]]


class Listener:
    """One store object's listening connection (opened at its first wait, in a thread).

    Args:
        dsn: The server.
        where: The DSN without its password, to name the server in a message.
        options: Further ``psycopg.connect`` arguments (a connect timeout).
    """

    def __init__(self, dsn: str, where: str, options: dict[str, Any]) -> None:
        self._dsn = dsn
        self._where = where
        self._options = options
        self._conn: _Conn | None = None
        self._lock = threading.Lock()

    @property
    def listening(self) -> bool:
        """Whether the connection is open and listening."""
        return self._conn is not None

    def open(self) -> None:
        """Open the connection and LISTEN (blocking: call it in a thread). It stays open, so
        nothing sent while no one reads it is lost: it waits in the connection's buffer."""
        with self._lock:
            if self._conn is None:
                conn: _Conn = psycopg.connect(self._dsn, autocommit=True, **self._options)
                try:
                    conn.execute(f"LISTEN {CHANNEL}")
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn

    def fileno(self) -> int:
        """The connection's socket."""
        assert self._conn is not None
        return self._conn.fileno()

    def notifications(self) -> list[str]:
        """The request ids notified so far, read without waiting.

        Raises:
            StoreUnavailableError: The connection was lost (closed: the next wait opens a
                new one).
        """
        assert self._conn is not None
        pgconn = self._conn.pgconn
        try:
            pgconn.consume_input()
        except psycopg.OperationalError as e:
            self.close()
            raise StoreUnavailableError(
                f"lost the listening connection to {self._where}: {' '.join(str(e).split())}"
            ) from None
        found: list[str] = []
        while (note := pgconn.notifies()) is not None:
            found.append(note.extra.decode())
        return found

    def close(self) -> None:
        """Close the connection (if open)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
