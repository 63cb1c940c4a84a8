"""A 2026-07-28 retry that reaches a server of the store which does not drive its run.

Several servers on one store (``hpd-agent mcp --store`` twice, behind one address): a run is
driven by the server that started it (or resumed it), which holds the run's lease, and a
client's retry may reach another. That server answers the retry all the same: it gives the
retry's answers to the run through the store (the driving server's run wakes and takes
them), then follows the run in the store until it moves on (``RunHost.moved_on``: it ended,
or asks something new) for at most ``RELAY_WAIT`` seconds, and returns what it found: the
result, the questions pending (a refused answer's question again, with the reason), or, if
the run is still working, an ``InputRequiredResult`` asking nothing, whose ``requestState``
the client retries with. If the driving server died meanwhile (its lease lapsed), this one
resumes the run and drives it from there. A question the client cancels there cancels the run,
as on the driving server (``RunHost.cancel``: through the store).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..hosting import UnknownRunError
from ..store import RunRecord
from ._server_answers import Stored, apply
from ._server_results import asking, record_result, text_result
from ._server_runs import ServedRun, ServedRuns

__all__ = ["RELAY_WAIT", "relayed"]

RELAY_WAIT = 10.0
"""Seconds a server not driving the run follows it in the store after giving it a retry's
answers, before it returns what is pending (maybe nothing: the client retries)."""


async def relayed(
    runs: ServedRuns, run_id: str, responses: Mapping[str, Any], *, by: str | None = None
) -> types.CallToolResult | types.InputRequiredResult | ServedRun:
    """Answer a retry for ``run_id``, which another server of the store drives (its
    answers given by the client named ``by``).

    Returns:
        The call's result or its next questions; or the run, resumed here because the
        server driving it died (the caller drives it on).
    """
    if runs.store is None:  # a run is driven elsewhere only through a store
        raise MCPError(INVALID_PARAMS, "the requestState names a run this server cannot reach")
    stored = Stored(runs, run_id)
    if not await apply(stored, responses, by=by):  # a question cancelled: the run was cancelled
        return text_result(f"The run was cancelled: {stored.why}.", error=True)
    try:
        # An answer refused (or none given while questions wait): asked again at once.
        found = await stored.follow(RELAY_WAIT)
    except UnknownRunError:
        raise MCPError(
            INVALID_PARAMS, "the requestState names a run this server does not have"
        ) from None
    if isinstance(found, ServedRun):
        return found
    if isinstance(found, RunRecord):
        return record_result(found)
    return asking(run_id, [record.event for record in found], stored.notes)
