"""Resume through AG-UI right after the server crashed and restarted.

The killed server's run keeps its lease in the store (live for the default 10 s). The
restarted server takes it over at once: its holder was on this machine and its process is
gone. A holder that is alive (here: this test process, renewing) is waited out until its
lease expires; if it renews, the resume fails with a RUN_ERROR that names neither the run's
secret id nor the holder, writes nothing (the answer included), and leaves the thread's run
resumable: the next resume, once the lease is free, continues it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)
from conftest import Server, post_run, run_input, sse_events, start_server

from hpd_agent.store import Store, open_store
from hpd_agent.store._holder import new_holder

LIVE = {"forwardedProps": {"hpd_agent": {"mode": "live"}}}
SECRET = re.compile(r"run_[0-9a-f]{32}")


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "web.db")
    return str(request.getfixturevalue("fresh_postgres"))


def _in_store(location: str, look: Callable[[Store], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        store = open_store(location)
        try:
            return await look(store)
        finally:
            await store.aclose()

    return anyio.run(main)


async def _note_journaled(store: Store) -> bool:
    for run in await store.list_runs():
        if any(e.kind == "tool" for e in (await store.journal(run.run_id)).values()):
            return True
    return False


async def _live_lease(store: Store) -> float:
    (run,) = await store.list_runs()
    lease = await store.get_lease(run.run_id)
    assert lease is not None
    return lease.expires_at


def _killed_mid_question(folder: Path, location: str | None = None) -> dict[str, Any]:
    """A live run of ``deep`` whose server is SIGKILLed while its question waits (the note
    written and journaled): the announced request."""
    where = location or str(folder / "web.db")
    first = start_server(folder, "--store", where)
    try:
        with (
            first.client() as c,
            c.stream("POST", "/agent", json=run_input("t", "r1", "deep", **LIVE)) as response,
        ):
            text = ""
            for chunk in response.iter_text():
                text += chunk
                events = sse_events(text)
                asked = [e["value"] for e in events if e.get("name") == "hpd_agent.request"]
                if asked and _journaled(where):
                    break
            else:
                raise AssertionError("the question was never announced")
    finally:
        first.kill()  # SIGKILL: the lease stays in the store, live
    return asked[0]


def _journaled(location: str) -> bool:
    """Wait (bounded, on the store) until the note's tool result is journaled (its side
    effect then is never redone)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _in_store(location, _note_journaled):
            return True
        time.sleep(0.05)
    raise AssertionError("the note's tool result was never journaled")


def _resume(server: Server, request_id: str, run: str) -> list[dict[str, Any]]:
    resume = [{"interruptId": request_id, "status": "resolved", "payload": "postgres"}]
    with server.client() as c:
        _, events = post_run(c, run_input("t", run, resume=resume))
    return events


def test_resume_right_after_a_crash_restart_continues(tmp_path: Path, location: str) -> None:
    asked = _killed_mid_question(tmp_path, location)
    expires_at = _in_store(location, _live_lease)
    assert expires_at > time.time() + 5  # the dead server's lease is still live
    second = start_server(tmp_path, "--store", location)
    try:
        began = time.monotonic()
        after = _resume(second, asked["id"], "r2")
        assert time.monotonic() - began < 5  # taken over at once, not waited out
        assert after[-1]["type"] == "RUN_FINISHED", after[-1]
        assert after[-1]["result"] == "done: manager: use postgres"
        assert second.notes() == ["specialist started"]
    finally:
        second.stop()


@contextlib.contextmanager
def _held_alive(db: Path) -> Iterator[None]:
    """This (live) process holds the run's lease, renewing it every 0.2 s for 1 s."""
    holder, stop = new_holder(), threading.Event()

    def hold() -> None:
        with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
            while not stop.is_set():
                with conn:
                    conn.execute(
                        "UPDATE hpd_leases SET holder = ?, expires_at = ?",
                        (holder, time.time() + 1.0),
                    )
                stop.wait(0.2)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)
        with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn, conn:
            conn.execute("DELETE FROM hpd_leases")  # as the holder's release


def test_a_resume_refused_by_a_live_holder_writes_nothing_and_leaves_the_run_resumable(
    tmp_path: Path,
) -> None:
    asked = _killed_mid_question(tmp_path)
    db = tmp_path / "web.db"
    second = start_server(tmp_path)
    try:
        with _held_alive(db):
            began = time.monotonic()
            refused = _resume(second, asked["id"], "r2")
            waited = time.monotonic() - began
            with contextlib.closing(sqlite3.connect(db)) as conn:
                (status,) = conn.execute(
                    "SELECT status FROM hpd_requests WHERE id = ?", (asked["id"],)
                ).fetchone()
        error = refused[-1]
        assert error["type"] == "RUN_ERROR", error
        assert "another process" in error["message"]
        assert not SECRET.search(str(refused)), refused
        assert str(os.getpid()) not in error["message"]  # the holder: this process
        assert new_holder().split(":")[0] not in error["message"]
        assert waited >= 0.5  # it waited the holder's lease out before giving up
        assert status == "pending"  # the answer was not written: nothing before the lease
        with second.client() as c:  # still resumable, the question still open
            assert [r["id"] for r in c.get("/threads/t/requests").json()["requests"]] == [
                asked["id"]
            ]
        after = _resume(second, asked["id"], "r3")
        assert after[-1]["type"] == "RUN_FINISHED", after[-1]
        assert after[-1]["result"] == "done: manager: use postgres"
        assert second.notes() == ["specialist started"]
    finally:
        second.stop()


def test_no_secret_in_a_run_error(tmp_path: Path) -> None:
    """The client's copy of an error never carries the run's id (``public_error``)."""
    from hpd_agent.exceptions import RunLeasedError, UserError
    from hpd_agent.hosting import public_error

    run_id = "run_" + "ab" * 16
    leased = RunLeasedError(
        f"run {run_id!r} held by vm:9296:x", run_id=run_id, holder="vm:9296:x", expires_at=1.0
    )
    for error in (leased, UserError(f"no run {run_id!r} in the store")):
        text = public_error(error, run_id)
        assert run_id not in text and "9296" not in text and text
    _ = httpx  # the web extra is installed (conftest skips otherwise)
