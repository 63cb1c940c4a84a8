"""``ThreadTables`` in SQL: the shipped stores' records for integrations (see ``_protocol``).

Two tables beside the store's own, on its side connection (``_side``): ``hpd_thread_rows``
(space, thread, key, its place among the thread's rows, text) and ``hpd_thread_items``
(space, thread, index, text). ``MemoryThreadTables`` keeps them in a private in-memory
SQLite database: compact (a finished thread leaves the Python heap), gone with the object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._protocol import ThreadData
from ._side import SideDB

__all__ = ["THREAD_TABLES", "MemoryThreadTables", "SQLThreadTables"]

THREAD_TABLES = (
    """CREATE TABLE IF NOT EXISTS hpd_thread_rows (
    space TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (space, thread_id, key)
)""",
    "CREATE INDEX IF NOT EXISTS hpd_thread_rows_key ON hpd_thread_rows (space, key)",
    """CREATE TABLE IF NOT EXISTS hpd_thread_items (
    space TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (space, thread_id, idx)
)""",
)
"""The statements making the thread tables (``SideDB``'s ``tables``)."""

# A new key goes after the thread's rows (``seq``); a key it holds keeps its place.
_PUT_ROW = (
    "INSERT INTO hpd_thread_rows (space, thread_id, key, seq, value)"
    " SELECT ?, ?, ?, COALESCE(MAX(seq) + 1, 0), ? FROM hpd_thread_rows"
    " WHERE space = ? AND thread_id = ?"
    " ON CONFLICT (space, thread_id, key) DO UPDATE SET value = excluded.value"
)
_PUT_ITEM = (
    "INSERT INTO hpd_thread_items (space, thread_id, idx, item) VALUES (?,?,?,?)"
    " ON CONFLICT (space, thread_id, idx) DO NOTHING"
)
_STATEMENT_BYTES = 16384
"""About what one of the store's statements adds to a SQLite WAL at most (a few pages): a
write of items counts as one per as many bytes toward the background checkpoint."""

_ROWS = "SELECT key, value FROM hpd_thread_rows WHERE space = ? AND thread_id = ? ORDER BY seq"
_ITEMS = "SELECT item FROM hpd_thread_items WHERE space = ? AND thread_id = ? ORDER BY idx"
_OWNER = "SELECT thread_id FROM hpd_thread_rows WHERE space = ? AND key = ? LIMIT 1"


class SQLThreadTables:
    """``ThreadTables`` on a store's side connection.

    Args:
        db: The side connection (its ``tables`` include ``THREAD_TABLES``).
    """

    def __init__(self, db: SideDB) -> None:
        self.db = db

    async def write_thread(
        self,
        space: str,
        thread_id: str,
        *,
        rows: Mapping[str, str] | None = None,
        items: Sequence[str] = (),
        first: int = 0,
    ) -> None:
        """Write rows and items of one thread in one transaction (``ThreadTables``)."""
        keyed = [(space, thread_id, k, v, space, thread_id) for k, v in (rows or {}).items()]
        logged = [(space, thread_id, first + i, item) for i, item in enumerate(items)]
        if not keyed and not logged:
            return
        db = self.db
        put_row, put_item = db.sql(_PUT_ROW), db.sql(_PUT_ITEM)

        def write(conn: Any) -> None:
            with db.transaction(conn):
                cursor = conn.cursor()
                for row in keyed:  # one by one: each new key's place counts the one before
                    cursor.execute(put_row, row)
                if logged:
                    cursor.executemany(put_item, logged)

        size = sum(len(item) for item in items if type(item) is str)  # a bad one: the write fails
        await db.call(write, writes=1 + size // _STATEMENT_BYTES)

    async def read_thread(self, space: str, thread_id: str) -> ThreadData | None:
        """The thread's rows and items; None if it holds neither (``ThreadTables``). On a
        SQLite file, read on the event loop when it can (``SideDB.read_now``): a web
        server reads its thread at every input's start, and a worker thread's hop costs
        the loop more than the read (what it reads, the loop parses anyway)."""
        rows_sql, items_sql = self.db.sql(_ROWS), self.db.sql(_ITEMS)

        def read(conn: Any) -> ThreadData | None:
            rows = conn.execute(rows_sql, (space, thread_id)).fetchall()
            items = conn.execute(items_sql, (space, thread_id)).fetchall()
            if not rows and not items:
                return None
            return ThreadData({k: v for k, v in rows}, [i for (i,) in items])

        return await self.db.read_now(read)

    async def thread_of(self, space: str, key: str) -> str | None:
        """The thread of ``space`` holding a row ``key``, or None (``ThreadTables``)."""
        sql = self.db.sql(_OWNER)

        def read(conn: Any) -> str | None:
            row = conn.execute(sql, (space, key)).fetchone()
            return None if row is None else str(row[0])

        return await self.db.read(read)

    def close(self) -> None:
        """Close the side connection (a later call raises)."""
        self.db.close()


class MemoryThreadTables(SQLThreadTables):
    """``ThreadTables`` in this process's memory, gone with the object.

    Kept in a private in-memory SQLite database rather than in Python objects: a thread's
    texts then take no room in the Python heap. Use it where a store offers no thread
    tables; ``MemoryStore`` offers one of these.
    """

    def __init__(self) -> None:
        super().__init__(SideDB(THREAD_TABLES))
