"""Where the web package keeps its threads across restarts: the store's thread tables.

The store offers them (``StoreCapabilities.threads``, a ``ThreadTables``): a SQLite store in
its file, a PostgreSQL store in its database, a ``MemoryStore`` in memory as long as the
store object lives. The web server's threads are the space ``"web"`` there: a thread's
rows are the root runs it started (key: the run id, which stays on the server; text: its
mode and status as JSON, in the order the runs started), its items every AG-UI event sent
on it, in order, so a restarted server still knows what each client saw. A store that
offers no thread tables gets a private in-memory set (``MemoryThreadTables``), gone with
the server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..store import MemoryThreadTables, Store, ThreadTables

__all__ = ["SPACE", "Loaded", "RunRow", "ThreadDB", "frames", "open_thread_db"]

SPACE = "web"
"""The web server's space in the store's thread tables."""


@dataclass(slots=True)
class RunRow:
    """A root run a thread started."""

    run_id: str
    mode: str
    status: str


@dataclass(slots=True)
class Loaded:
    """A thread as the DB holds it: its runs, its frames, how many items they are in."""

    runs: list[RunRow]
    frames: list[str]
    items: int


def frames(items: list[str]) -> list[str]:
    """The frames of a thread's items (each one frame or several joined)."""
    out: list[str] = []
    for item in items:
        parts = item.split("\n\n")
        out += [f"{part}\n\n" for part in parts[:-1]]  # the last: "" after the last blank line
    return out


def _text(row: RunRow) -> str:
    return json.dumps({"mode": row.mode, "status": row.status})


class ThreadDB:
    """Threads' runs and sent events in ``tables``; ``owned``: made for this server (closed
    with it), not the store's."""

    def __init__(self, tables: ThreadTables, *, owned: bool = False) -> None:
        self._tables = tables
        self._owned = owned

    async def put_run(self, thread_id: str, seq: int, row: RunRow) -> None:
        """Insert or update a thread's run (``seq``: its place among the thread's runs,
        which a run's first write gives it)."""
        await self._tables.write_thread(SPACE, thread_id, rows={row.run_id: _text(row)})

    async def add_events(
        self, thread_id: str, item: int, frames: list[str], run: tuple[int, RunRow] | None = None
    ) -> None:
        """Append ``frames`` to a thread as its item ``item`` (already written: kept);
        with ``run`` (its ``seq`` and row), update that run in the same transaction."""
        rows = None if run is None else {run[1].run_id: _text(run[1])}
        if rows is None and not frames:
            return
        items = ["".join(frames)] if frames else []
        await self._tables.write_thread(SPACE, thread_id, rows=rows, items=items, first=item)

    async def load(self, thread_id: str) -> Loaded | None:
        """A thread's runs (oldest first), frames and items written, or None if it has
        no run."""
        data = await self._tables.read_thread(SPACE, thread_id)
        if data is None or not data.rows:
            return None
        runs: list[RunRow] = []
        for run_id, text in data.rows.items():
            fields = json.loads(text)
            runs.append(RunRow(run_id, str(fields["mode"]), str(fields["status"])))
        return Loaded(runs, frames(data.items), len(data.items))

    async def thread_of(self, run_id: str) -> str | None:
        """The thread that started root run ``run_id``, or None."""
        return await self._tables.thread_of(SPACE, run_id)

    def close(self) -> None:
        """Close the tables if this server made them (a store closes its own)."""
        if self._owned and isinstance(self._tables, MemoryThreadTables):
            self._tables.close()


def open_thread_db(store: Store) -> ThreadDB:
    """The threads of a server on ``store``: in the thread tables it offers
    (``StoreCapabilities.threads``), else in memory."""
    offered = store.capabilities().threads
    if offered is not None:
        return ThreadDB(offered)
    return ThreadDB(MemoryThreadTables(), owned=True)
