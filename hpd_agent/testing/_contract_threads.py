"""The store contract (``store_contract``): thread tables, for a store that offers them."""

from __future__ import annotations

import pytest

from ..store import Store, ThreadData, ThreadTables

__all__ = [
    "test_store_thread_tables_keep_rows_in_order_and_items_once",
    "test_store_thread_tables_keep_spaces_apart_and_find_a_rows_thread",
]


def _tables(store: Store) -> ThreadTables:
    offered = store.capabilities().threads
    if offered is None:
        pytest.skip("the store offers no thread tables (StoreCapabilities.threads)")
    return offered


@pytest.mark.anyio
async def test_store_thread_tables_keep_rows_in_order_and_items_once(
    contract_store: Store,
) -> None:
    tables = _tables(contract_store)
    assert await tables.read_thread("web", "t1") is None
    await tables.write_thread("web", "t1", rows={"run_b": "1"})
    await tables.write_thread("web", "t1", rows={"run_a": "2", "run_c": "3"}, items=["e0", "e1"])
    # A key written again gets its new text and keeps its place; items are kept once.
    await tables.write_thread("web", "t1", rows={"run_b": "4"}, items=["x1", "e2"], first=1)
    await tables.write_thread("web", "t1", items=["e3"], first=3)
    data = await tables.read_thread("web", "t1")
    assert data == ThreadData({"run_b": "4", "run_a": "2", "run_c": "3"}, ["e0", "e1", "e2", "e3"])
    assert data is not None and list(data.rows) == ["run_b", "run_a", "run_c"]
    # Items alone, or rows alone, make a thread too; nothing to write writes nothing.
    await tables.write_thread("web", "t2", items=["only"])
    assert await tables.read_thread("web", "t2") == ThreadData({}, ["only"])
    await tables.write_thread("web", "t3", rows={"k": ""})
    assert await tables.read_thread("web", "t3") == ThreadData({"k": ""}, [])
    await tables.write_thread("web", "t4")
    assert await tables.read_thread("web", "t4") is None
    text = 'a "quoted" line\n\u00e9\u4e2d' + "x" * 20000
    await tables.write_thread("web", "t5", rows={"big": text}, items=[text])
    assert await tables.read_thread("web", "t5") == ThreadData({"big": text}, [text])


@pytest.mark.anyio
async def test_store_thread_tables_keep_spaces_apart_and_find_a_rows_thread(
    contract_store: Store,
) -> None:
    tables = _tables(contract_store)
    await tables.write_thread("web", "t1", rows={"run_1": "a"}, items=["w"])
    await tables.write_thread("acp", "t1", rows={"session": "b"}, items=["x", "y"])
    await tables.write_thread("web", "t2", rows={"run_2": "c"})
    assert await tables.read_thread("web", "t1") == ThreadData({"run_1": "a"}, ["w"])
    assert await tables.read_thread("acp", "t1") == ThreadData({"session": "b"}, ["x", "y"])
    assert await tables.thread_of("web", "run_1") == "t1"
    assert await tables.thread_of("web", "run_2") == "t2"
    assert await tables.thread_of("acp", "run_1") is None
    assert await tables.thread_of("web", "session") is None
    assert await tables.thread_of("web", "nope") is None
    assert await tables.read_thread("other", "t1") is None
