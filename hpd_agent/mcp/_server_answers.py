"""A 2026-07-28 retry's ``inputResponses`` given to the run, wherever the run is driven.

The server driving the run gives each answer to the run itself (``Driven``); a server of the
same store that does not drive it (another server holds the run's lease) gives it through
the store (``Stored``: an ``hpd_agent.hosting.StoreRelay``), where the driving server's run
wakes and takes it. Either way a key that is no question of the run is refused (``-32602``), one
answered meanwhile is ignored, and a refused answer is noted (``notes``: the question is
asked again with the reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..events import RequestEvent
from ..hosting import Form, StoreRelay, form_for
from ..hosting import client_name as named_client
from ..questions import Decline
from ..store import Store
from ..text import shown
from ._server_runs import MCP_CLIENT, ServedRun

__all__ = ["Driven", "Stored", "Target", "apply", "client_name", "reading"]


class Target(Protocol):
    """Where a retry's answers go."""

    notes: dict[str, str]
    """Why an answer was refused, by request id (said when the question is asked again)."""

    async def pending(self) -> dict[str, RequestEvent]:
        """The run's pending requests, by id."""
        ...

    async def known(self, request_id: str) -> bool:
        """Whether ``request_id`` was a question of the run (answered meanwhile)."""
        ...

    async def answer_request(
        self, request_id: str, read: Callable[[], Any], *, by: str | None, channel: str
    ) -> str | None:
        """Answer ``request_id`` with what ``read`` gives, as given by ``by`` on
        ``channel``: None, or why not."""
        ...

    async def cancel(self, form: Form) -> bool:
        """The client cancelled ``form``'s question; True when that ended the run."""
        ...


def reading(form: Form, reply: types.ElicitResult) -> Callable[[], Any]:
    """The client's accepted or declined reply to ``form`` as the request's answer."""
    if reply.action == "decline":
        return Decline  # the asker's ask* raises QuestionNotAnswered("declined")
    return lambda: form.read(cast(Mapping[str, Any] | None, reply.content))


async def apply(target: Target, responses: Mapping[str, Any], *, by: str | None = None) -> bool:
    """Give ``target`` a retry's answers (as given by the client named ``by``); False once a
    cancel ended the run."""
    pending = await target.pending()
    for key, response in responses.items():
        request = pending.get(key)
        if request is None:
            if await target.known(key):
                continue  # answered meanwhile (another retry, another process)
            raise MCPError(
                INVALID_PARAMS, f"inputResponses names {shown(key)}: no question of this run"
            )
        if not isinstance(response, types.ElicitResult):
            raise MCPError(
                INVALID_PARAMS, f"the response to {shown(key)} is not an elicitation result"
            )
        form = form_for(request, by=MCP_CLIENT)
        if response.action == "cancel":
            if await target.cancel(form):
                return False
            continue
        read = reading(form, response)
        note = await target.answer_request(form.request_id, read, by=by, channel="mcp")
        if note is not None:
            target.notes[key] = note
    return True


class Driven:
    """The retry reached the server driving the run: answers go to the run.

    Args:
        served: The run.
        store: The server's store (a question answered meanwhile is found there).
    """

    def __init__(self, served: ServedRun, store: Store | None) -> None:
        self.served = served
        self.store = store
        self.notes = served.notes

    async def pending(self) -> dict[str, RequestEvent]:
        return {r.request_id: r for r in await self.served.run.settled()}

    async def known(self, request_id: str) -> bool:
        if request_id in self.served.asked:
            return True
        record = None if self.store is None else await self.store.get_request(request_id)
        return record is not None and record.run_id == self.served.run_id

    async def answer_request(
        self, request_id: str, read: Callable[[], Any], *, by: str | None, channel: str
    ) -> str | None:
        return await self.served.answer_request(request_id, read, by=by, channel=channel)

    async def cancel(self, form: Form) -> bool:
        await self.served.cancel(f"the MCP client cancelled the question {form.message!r}")
        return True


class Stored(StoreRelay[ServedRun]):
    """The retry reached a server that does not drive the run (another server of the
    store does): answers go through the store (``StoreRelay``), a cancel too."""

    why: str | None = None
    """Why the run ended here (the client cancelled a question), for the tool result."""

    async def cancel(self, form: Form) -> bool:
        # As on the driving server, a cancelled question cancels the run: through the store
        # (the driving server is fenced out and stops where it waits).
        self.why = f"the MCP client cancelled the question {form.message!r}"
        await self.host.cancel(self.run_id)
        return True


def client_name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The MCP client's name (its ``clientInfo.name``), who its answers are recorded as
    given by; None when it sent none."""
    params = ctx.session.client_params
    info = None if params is None else params.client_info
    return None if info is None else (named_client(info.name, "") or None)
