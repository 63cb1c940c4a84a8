"""``PostgresStore``'s listening connections: LISTEN on the channel ``resolve`` notifies
(a request feed's on ``OPENED`` too), the socket watched on the event loop and the
notifications read without waiting."""

from __future__ import annotations

import threading
from typing import Any, LiteralString, cast

import psycopg

from ..exceptions import StoreUnavailableError

__all__ = ["CHANNEL", "OPENED", "Listener"]

CHANNEL = "hpd_agent_requests"
"""The NOTIFY channel; the payload is the id of the request that left ``pending``."""

OPENED = "hpd_agent_opened"
"""The NOTIFY channel of new requests (for request feeds); the payload is the request id."""

_Conn = psycopg.Connection[tuple[Any, ...]]


class Listener:
    """One store object's listening connection (opened at its first wait, in a thread).

    Args:
        dsn: The server.
        where: The DSN without its password, to name the server in a message.
        options: Further ``psycopg.connect`` arguments (a connect timeout).
        channels: The channels it listens on.
    """

    def __init__(
        self,
        dsn: str,
        where: str,
        options: dict[str, Any],
        channels: tuple[str, ...] = (CHANNEL,),
    ) -> None:
        self._dsn = dsn
        self._where = where
        self._options = options
        self._channels = channels
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
                    for channel in self._channels:
                        conn.execute(cast(LiteralString, f"LISTEN {channel}"))
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
