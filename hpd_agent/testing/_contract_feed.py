"""The store contract (``store_contract``): the request feed, for a store that offers it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from ..store import RequestFeed, RequestRecord, Store, respond
from ._contract_requests import permission, question

__all__ = ["test_store_request_feed_tells_each_request_opening_and_ending"]


def _feed(store: Store) -> RequestFeed:
    offered = store.capabilities().feed
    if offered is None:
        pytest.skip("the store offers no request feed (StoreCapabilities.feed)")
    return offered


async def _next(changes: AsyncIterator[RequestRecord]) -> tuple[str, str]:
    with anyio.fail_after(10):
        record = await anext(changes)
    return record.request_id, record.status


@pytest.mark.anyio
async def test_store_request_feed_tells_each_request_opening_and_ending(
    contract_store: Store,
) -> None:
    store = contract_store
    async with _feed(store).request_changes() as changes:
        await store.add_request(question("req_f1", options=("Express", "FastAPI")))
        await store.add_request(permission("req_f2"))
        assert {await _next(changes), await _next(changes)} == {
            ("req_f1", "pending"),
            ("req_f2", "pending"),
        }
        await respond(store, "req_f1", "Express")
        assert await _next(changes) == ("req_f1", "answered")
        # A replay adding a stored request again opens nothing: the next one told is new.
        await store.add_request(question("req_f1"))
        await store.resolve("req_f2", "cancelled")
        assert await _next(changes) == ("req_f2", "cancelled")
        await store.add_request(question("req_f3", run_id="run_2"))
        with anyio.fail_after(10):
            record = await anext(changes)
        assert (record.request_id, record.status, record.run_id) == ("req_f3", "pending", "run_2")
        assert record.question == "Which framework?"
