"""A store file another process holds locked is waited for, never called a foreign file.

Each test holds ``BEGIN EXCLUSIVE`` on a store file (in rollback-journal mode, so the lock
keeps every other connection out) in a connection of its own, opens the store in a thread,
sees (the thread's current frame) that the open is inside its ``journal_mode`` pragma under
the lock, then releases the lock: the open goes through. A lock held past the busy timeout is
reported as a lock, not as "is it a hpd-agent store?".
"""

from __future__ import annotations

import contextlib
import linecache
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hpd_agent.exceptions import StoreUnavailableError
from hpd_agent.store import SQLiteStore


def _store_file(path: Path) -> None:
    """A store file, its journal in rollback mode (as before any store opened it in WAL)."""
    anyio.run(SQLiteStore(path).aclose)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN EXCLUSIVE")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


def _in_pragma(thread: threading.Thread) -> bool:
    """Whether ``thread`` is inside the store's ``journal_mode`` pragma right now."""
    frame = sys._current_frames().get(thread.ident or 0)  # pyright: ignore[reportPrivateUsage]
    while frame is not None:
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        if frame.f_code.co_name == "_connect" and "journal_mode" in line:
            return True
        frame = frame.f_back
    return False


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:
            out["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _open_while_locked(path: Path, open_: Callable[[], Any]) -> Any:
    """``open_()`` in a thread while ``path`` is locked; released once the open waits."""
    with _locked(path) as lock:
        thread, out = _in_thread(open_)
        deadline = time.monotonic() + 30  # bounded; polls the thread's state, times nothing
        while not out and not _in_pragma(thread):
            assert time.monotonic() < deadline, "the open never reached its pragma"
            time.sleep(0.001)
        assert not out, out  # inside the pragma, under the lock: waiting, not failed
        lock.execute("ROLLBACK")
        thread.join(30)
    assert not thread.is_alive()
    assert "error" not in out, out["error"]
    return out["value"]


def test_opening_a_locked_store_waits_for_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _store_file(path)
    store = _open_while_locked(path, lambda: SQLiteStore(path))
    assert anyio.run(store.get_run, "nothing") is None
    anyio.run(store.aclose)


def test_the_fast_connection_sets_up_under_the_busy_timeout(tmp_path: Path) -> None:
    """The connection that never waits for a lock once open (busy timeout 0) still waits,
    while it sets the file up, as long as the store's busy timeout."""
    path = tmp_path / "runs.db"
    _store_file(path)
    store = SQLiteStore(path)
    anyio.run(store.aclose)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    fast = _open_while_locked(path, lambda: store._connect(0.0, setup_timeout=30.0))  # pyright: ignore[reportPrivateUsage]
    assert fast.execute("PRAGMA busy_timeout").fetchone() == (0,)
    assert fast.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    fast.close()


def test_a_lock_held_past_the_busy_timeout_is_reported_as_a_lock(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _store_file(path)
    with _locked(path), pytest.raises(StoreUnavailableError) as failed:
        SQLiteStore(path, busy_timeout=0.05)
    message = str(failed.value)
    assert "locked" in message and "hpd-agent store?" not in message, message
    assert "0.05 s" in message
