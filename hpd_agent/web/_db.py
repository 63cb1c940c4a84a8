"""Where the web package keeps its threads across restarts: two tables in a SQLite file.

``hpd_web_runs`` maps a thread to the root runs it started (the run ids stay on the server)
with their mode and status; ``hpd_web_events`` holds every AG-UI event sent on a thread, in
order, so a restarted server still knows what each client saw. With a ``SQLiteStore`` they
live in the store's own file; with any other store, in memory only (``ThreadDB(None)``).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass

import anyio.to_thread

__all__ = ["RunRow", "ThreadDB"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hpd_web_runs (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL UNIQUE,
    mode TEXT NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE IF NOT EXISTS hpd_web_events (
    thread_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (thread_id, idx)
);
"""


@dataclass(slots=True)
class RunRow:
    """A root run a thread started."""

    run_id: str
    mode: str
    status: str


class ThreadDB:
    """Threads' runs and sent events in a SQLite file (or nowhere, with ``path=None``)."""

    def __init__(self, path: str | None) -> None:
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if path is not None:
            conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.executescript(_SCHEMA)
            self._conn = conn

    async def _run(self, sql: str, rows: list[tuple[object, ...]]) -> None:
        conn = self._conn
        if conn is None or not rows:
            return

        def write() -> None:
            with self._lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(sql, rows)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")

        await anyio.to_thread.run_sync(write)

    async def put_run(self, thread_id: str, seq: int, row: RunRow) -> None:
        """Insert or update a thread's run."""
        await self._run(
            "INSERT INTO hpd_web_runs (thread_id, seq, run_id, mode, status) VALUES (?,?,?,?,?)"
            " ON CONFLICT (thread_id, seq) DO UPDATE SET status = excluded.status",
            [(thread_id, seq, row.run_id, row.mode, row.status)],
        )

    async def add_events(self, thread_id: str, first: int, frames: list[str]) -> None:
        """Append frames ``first``, ``first + 1``, ... of a thread (already written: kept)."""
        rows: list[tuple[object, ...]] = [(thread_id, first + i, f) for i, f in enumerate(frames)]
        await self._run(
            "INSERT OR IGNORE INTO hpd_web_events (thread_id, idx, frame) VALUES (?,?,?)", rows
        )

    async def load(self, thread_id: str) -> tuple[list[RunRow], list[str]] | None:
        """A thread's runs (oldest first) and frames, or None if it has none."""
        conn = self._conn
        if conn is None:
            return None

        def read() -> tuple[list[RunRow], list[str]]:
            with self._lock:
                runs = conn.execute(
                    "SELECT run_id, mode, status FROM hpd_web_runs WHERE thread_id = ? ORDER BY seq",
                    (thread_id,),
                ).fetchall()
                frames = conn.execute(
                    "SELECT frame FROM hpd_web_events WHERE thread_id = ? ORDER BY idx",
                    (thread_id,),
                ).fetchall()
            return [RunRow(*r) for r in runs], [f for (f,) in frames]

        runs, frames = await anyio.to_thread.run_sync(read)
        return (runs, frames) if runs else None

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
