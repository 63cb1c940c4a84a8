"""A SQLite store's side tables (thread tables, grants) leave the WAL's checkpoints to the
store's background checkpointer, as its own connections do: a commit there never copies the
WAL into the file (and waits for its ``fsync``s). A web server writes megabytes of frames a
run there; with SQLite's default (a checkpoint on any commit once the WAL holds 1,000 pages)
nearly every commit did, the run's closing frames among them (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpd_agent.store import SQLiteStore
from hpd_agent.store._sqlite_io import Checkpointer

pytestmark = pytest.mark.anyio


async def test_thread_tables_commits_leave_the_checkpoint_to_the_checkpointer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told: list[int] = []

    def tick(self: Checkpointer, writes: int = 1) -> None:
        told.append(writes)  # counted, never run: the file changes only by a commit's doing

    monkeypatch.setattr(Checkpointer, "tick", tick)
    path = tmp_path / "web.db"
    store = SQLiteStore(path)
    tables = store.capabilities().threads
    assert tables is not None
    item = "data: x\n\n" * 10_000  # 90 KB, about what a write of a run's frames is
    try:
        await tables.write_thread("web", "t", rows={"run_1": "{}"}, items=[item])
        size = path.stat().st_size
        for i in range(1, 60):  # 5.3 MB: 1,300 pages, past SQLite's 1,000
            await tables.write_thread("web", "t", items=[item], first=i)
        assert path.stat().st_size - size < 1 << 20  # nothing copied into the file
        assert path.with_name("web.db-wal").stat().st_size > 5 << 20
        # The checkpointer was told (a store statement's worth per 16 KiB).
        assert sum(told) >= 59 * len(item) // 16384
        found = await tables.read_thread("web", "t")
        assert found is not None and found.items == [item] * 60
    finally:
        await store.aclose()
