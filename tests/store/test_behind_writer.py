"""Mode ``"async"``'s writer (``_behind``): one thread per SQL store commits its runs' facts.

Its batch is one transaction holding several runs' facts, each run's rows fenced by that
run's own token: a run whose lease was taken over has its rows refused alone, the others
commit, and the refused run fails at its next fact and at its end.
"""

from __future__ import annotations

from typing import cast

import anyio.to_thread
import pytest

from hpd_agent import RunLeasedError
from hpd_agent.store import BehindIO, JournalEntry, Store, open_store
from hpd_agent.store._fence import Fence

pytestmark = pytest.mark.anyio


def _fact(key: str) -> JournalEntry:
    return JournalEntry(key=key, kind="tool", value={"result": key, "is_error": False})


def _io(store: Store) -> BehindIO:
    """The writer's own way to the store (the thread's connection)."""
    return cast(BehindIO, getattr(store, "_behind_io")())  # noqa: B009


async def _fences(store: Store) -> tuple[Fence, Fence]:
    """Run "a" with a stale token (its lease another holder's now), run "b" with its own."""
    a = await store.take_lease("a", "h", 30.0)
    b = await store.take_lease("b", "h", 30.0)
    return Fence("a", a.fence - 1), Fence("b", b.fence)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_batch_refuses_a_stale_run_alone(location: str) -> None:
    store = open_store(location)
    try:
        stale, own = await _fences(store)
        io = _io(store)
        try:
            errors = await anyio.to_thread.run_sync(
                io.commit, [("a", stale, [_fact("a1")]), ("b", own, [_fact("b1"), _fact("b2")])]
            )
        finally:
            io.close()
        assert isinstance(errors[0], RunLeasedError) and errors[1] is None
        assert await store.journal("a") == {}
        assert sorted(await store.journal("b")) == ["b1", "b2"]
    finally:
        await store.aclose()


async def test_a_refused_write_fails_the_run_at_its_next_fact_and_its_end(
    location: str, anyio_backend: str
) -> None:
    if anyio_backend == "trio" and not location.endswith(".db"):
        pytest.skip("one backend is enough for the server")
    store = open_store(location)
    try:
        stale, own = await _fences(store)
        writer = store.capabilities().behind
        assert writer is not None
        behind = writer.behind_writer()
        a, b = behind.behind("a", stale), behind.behind("b", own)
        a.add(_fact("a1"))
        b.add(_fact("b1"))
        io = _io(store)
        try:  # the batch now, here or in the writer's thread (whichever takes it first)
            await anyio.to_thread.run_sync(behind._commit, io)  # pyright: ignore[reportPrivateUsage]
        finally:
            io.close()
        with pytest.raises(RunLeasedError):
            await a.settle()
        with pytest.raises(RunLeasedError):
            a.add(_fact("a2"))
        await b.settle()
        assert b.take() == []  # the writer committed it: nothing left for the run's end
        assert sorted(await store.journal("b")) == ["b1"]
        assert await store.journal("a") == {}
    finally:
        await store.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_key_written_twice_in_one_batch_keeps_its_last_value(location: str) -> None:
    store = open_store(location)
    try:
        _, own = await _fences(store)
        first = JournalEntry(key="k#conversation", kind="conversation", value=[1])
        last = JournalEntry(key="k#conversation", kind="conversation", value=[1, 2])
        io = _io(store)
        try:
            errors = await anyio.to_thread.run_sync(
                io.commit, [("b", own, [first, _fact("b1"), last])]
            )
        finally:
            io.close()
        assert errors == [None]
        journal = await store.journal("b")
        assert sorted(journal) == ["b1", "k#conversation"]
        assert journal["k#conversation"].value == [1, 2]
    finally:
        await store.aclose()
