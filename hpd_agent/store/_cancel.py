"""Cancelling a stored run from any process, whoever drives it: ``cancel_run``.

Answering is not driving (``respond`` works from anywhere); cancelling ends the run's life,
so ``cancel_run`` first takes the run's lease over, live or not. The process driving the
run is fenced out (``_fence``: the new take's fencing token refuses every write of the old
one) and stops before its next model request, tool function or step: at once if it was
waiting for a human (its questions end cancelled here, and a question ending cancelled makes
the run check its lease before it goes on: ``StoreRequests.wait``), else at its next write
or lease renewal, at most a third of ``lease_ttl`` later. Then the run's pending requests
end cancelled, its record says cancelled, and the lease is given up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

import anyio

from ..exceptions import RequestError, RunLeasedError, UserError
from ._base import RunRecord
from ._holder import new_holder
from ._protocol import Store

__all__ = ["cancel_run"]

_ENDED = ("completed", "failed", "cancelled")
_TAKES = 3
"""Times the lease is taken over before giving up (another process resuming the run may
take it in between the old holder's release and this take)."""


async def cancel_run(store: Store, run_id: str) -> RunRecord:
    """Cancel a stored run from any process, even while another process drives it.

    The run's lease is taken over (the driving process is fenced out and stops, at once
    where it waits for a human), its pending requests end cancelled (their askers are told
    nobody answered), its record says ``cancelled``, and the lease is given up. A run that
    ended before (completed, failed, cancelled) is left as it was. What a tool function of
    the driving process is doing at that moment completes; only its result is refused (see
    docs/guarantees.md, "The lease is a fence").

    Args:
        store: The store holding the run.
        run_id: The run.

    Returns:
        The run's record as it stands now: cancelled, or as it had ended.

    Raises:
        UserError: The store has no such run.
        RunLeasedError: Other processes kept taking the lease in between (resuming the run);
            nothing was cancelled.
    """
    record = await _record(store, run_id)
    if record.status in _ENDED:
        return record
    holder = new_holder()
    for attempt in range(_TAKES):
        lease = await store.get_lease(run_id)
        if lease is not None and lease.holder != holder:
            await store.release_lease(run_id, lease.holder)  # its fencing token stays the last
        try:
            await store.take_lease(run_id, holder, store.lease_ttl)  # a new token: fenced out
            break
        except RunLeasedError:
            if attempt == _TAKES - 1:
                raise
    try:
        record = await _record(store, run_id)  # as its last holder left it: it writes no more
        if record.status in _ENDED:
            return record
        for request in await store.list_requests(run_id=run_id):
            with contextlib.suppress(RequestError):  # answered, expired or ended meanwhile
                await store.resolve(request.request_id, "cancelled")
        record = dataclasses.replace(
            record, status="cancelled", output=None, error=None, updated_at=time.time()
        )
        await store.put_run(record)
        return record
    finally:
        with anyio.CancelScope(shield=True):
            await store.release_lease(run_id, holder)


async def _record(store: Store, run_id: str) -> RunRecord:
    record = await store.get_run(run_id)
    if record is None:
        raise UserError(f"no run {run_id!r} in {store!r}")
    return record
