"""A ``tools/call`` of the served agent, on either protocol.

The run goes until it settles (every live branch waits for a human: ``Run.settled``), so
the questions of parallel branches go out together:

- 2025-11-25 (``mode="legacy"``): one ``elicitation/create`` per pending question, sent
  together while the call stays open; each answer goes to the run, a refused one is asked
  again with the reason; then the next batch, until the run ends. The client is pinged on
  the call's own channel every ``PING_EVERY`` seconds: one that does not answer within
  ``CLIENT_GRACE`` seconds has gone away (its connection dropped without a word, its process
  died), and the run is cancelled.
- 2026-07-28: an ``InputRequiredResult`` with one input request per pending question (its
  key the request id) and a ``requestState`` naming the run; the client's retry carries the
  answers and the state, and the same run goes on. A retry reaching a server of the store
  that does not drive the run is answered through the store (``_server_relay``).

An accepted form answers its question; "decline" declines it (``hpd_agent.Decline``: the
asking tool's ``ask*`` raises ``QuestionNotAnswered(status="declined")`` and the run goes on);
"cancel" cancels the run (the tool result says so).
"""

from __future__ import annotations

import json
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

from ..events import RequestEvent
from ..hosting import Form, Outcome, UnknownRunError, form_for
from ..store import RunRecord
from ._asker import params_meta
from ._server_answers import Driven, apply, reading
from ._server_relay import relayed
from ._server_results import asking, record_result, text_result, tool_result
from ._server_runs import MCP_CLIENT, ServedRun, ServedRuns

__all__ = ["CLIENT_GRACE", "PING_EVERY", "Calls"]

PING_EVERY = 5.0
"""Seconds between the pings a 2025-11-25 call sends its client while it is open."""

CLIENT_GRACE = 15.0
"""Seconds a 2025-11-25 client has to answer a ping; one that does not has gone away, and
the call's run is cancelled (at most ``PING_EVERY + CLIENT_GRACE`` seconds after)."""

_GONE = (REQUEST_TIMEOUT, CONNECTION_CLOSED)


class Calls:
    """What a served agent's ``tools/call`` needs (the server's lifespan yields it).

    Args:
        runs: The server's runs.
        tool_name: The one tool's name.
    """

    def __init__(self, runs: ServedRuns, tool_name: str) -> None:
        self.runs = runs
        self.tool_name = tool_name

    # -- 2025-11-25: elicitations while the call stays open ---------------------------------
    async def elicited(
        self, ctx: ServerRequestContext[Any, Any], query: str
    ) -> types.CallToolResult:
        """Run the agent on ``query``, eliciting its questions batch by batch."""
        served = await self.runs.start(query)
        try:
            result: types.CallToolResult | None = None
            async with served.lock:
                with anyio.CancelScope() as gone:
                    async with anyio.create_task_group() as heeding:
                        heeding.start_soon(_heed, ctx, served, gone)
                        result = await self._batches(ctx, served)
                        heeding.cancel_scope.cancel()
            if result is None:  # the client went away: nobody reads this
                return text_result("The run was cancelled: the client went away.", error=True)
            return result
        finally:
            if not served.ended.is_set():
                # The call ended early (the client cancelled it or went away): a legacy run
                # has no state to come back with, so it ends here too.
                with anyio.CancelScope(shield=True):
                    await served.cancel("the MCP client left the call")

    async def _batches(
        self, ctx: ServerRequestContext[Any, Any], served: ServedRun
    ) -> types.CallToolResult:
        while True:
            stop = await served.wait_settled()
            if isinstance(stop, Outcome):
                return tool_result(stop, served.reason)
            if not _can_elicit(ctx):
                await _unanswerable(served, stop)
                continue
            async with anyio.create_task_group() as tg:
                for request in stop:
                    tg.start_soon(self._elicit, ctx, served, request, tg)

    async def _elicit(
        self,
        ctx: ServerRequestContext[Any, Any],
        served: ServedRun,
        request: RequestEvent,
        tg: anyio.abc.TaskGroup,
    ) -> None:
        note: str | None = None
        while True:
            form = form_for(request, note, by=MCP_CLIENT)
            served.asked[request.request_id] = request
            try:
                reply = await _elicit_form(ctx, form)
            except MCPError as e:
                served.cancel_nowait(f"the MCP client could not answer {form.message!r}: {e}")
                tg.cancel_scope.cancel()  # the other questions of the batch go unanswered
                return
            if reply.action == "cancel":
                served.cancel_nowait(f"the MCP client cancelled the question {form.message!r}")
                tg.cancel_scope.cancel()
                return
            note = await served.answer_request(form.request_id, reading(form, reply))
            if note is None:
                return

    # -- 2026-07-28: InputRequiredResult, then the retry -----------------------------------
    async def input_round(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, query: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One round: start the run (first call) or give it the retry's answers, then
        return its result or the questions it waits on."""
        if params.request_state is None:
            if params.input_responses:
                raise MCPError(INVALID_PARAMS, "inputResponses came without their requestState")
            served = await self.runs.start(query)
        else:
            found = await self._reopen(params.request_state)
            if isinstance(found, RunRecord):
                return record_result(found)
            served = found
        responses = params.input_responses or {}
        while True:
            try:
                async with served.lock:
                    served.unpark()
                    await served.run.settled()  # a resumed run reaches its questions, or
                    if not served.elsewhere:  # ends at once: another server drives it
                        if params.request_state is not None:
                            await apply(Driven(served, self.runs.store), responses)
                        outcome = await self._next(ctx, served)
                        if outcome is not None:
                            return outcome
                        responses = {}  # given to the run before it went elsewhere
            finally:
                if not served.ended.is_set():
                    self.runs.park(served)  # a client that never comes back does not keep it
            relay = await relayed(self.runs, served.run_id, responses)
            if not isinstance(relay, ServedRun):
                return relay
            served, responses = relay, {}  # its driver died: resumed here, driven on

    async def _reopen(self, state: str) -> ServedRun | RunRecord:
        try:
            named: Any = json.loads(state)
        except ValueError:
            named = None
        run_id = cast(dict[str, Any], named).get("run") if isinstance(named, dict) else None
        if not isinstance(run_id, str):
            raise MCPError(INVALID_PARAMS, "the requestState names no run of this server")
        try:
            return await self.runs.reopen(run_id)
        except UnknownRunError:
            raise MCPError(
                INVALID_PARAMS,
                f"the requestState names run {run_id!r}, which this server does not have "
                "(it ended and was not stored, or it is another server's)",
            ) from None

    async def _next(
        self, ctx: ServerRequestContext[Any, Any], served: ServedRun
    ) -> types.CallToolResult | types.InputRequiredResult | None:
        """The run's result or the questions it waits on; None when another process
        drives it now (this one lost its lease)."""
        while True:
            stop = await served.wait_settled()
            if isinstance(stop, Outcome):
                if served.elsewhere:
                    return None
                return tool_result(stop, served.reason)
            if _can_elicit(ctx):
                break
            await _unanswerable(served, stop)
        for request in stop:
            served.asked[request.request_id] = request
        return asking(served.run_id, stop, served.notes)


async def _heed(
    ctx: ServerRequestContext[Any, Any], served: ServedRun, gone: anyio.CancelScope
) -> None:
    """Ping the client on the call's own channel (on HTTP, the call's response stream)
    while the call is open; cancel ``gone`` once a ping goes unanswered."""
    if not ctx.session.can_send_request:
        return  # no channel to the client: nothing can be asked either
    related = ServerMessageMetadata(related_request_id=ctx.request_id)
    while True:
        await anyio.sleep(PING_EVERY)
        try:
            await ctx.session.send_request(
                types.PingRequest(),
                types.EmptyResult,
                request_read_timeout_seconds=CLIENT_GRACE,
                metadata=related,
            )
        except MCPError as e:
            if e.code in _GONE:
                served.cancel_nowait(f"the MCP client went away (no answer in {CLIENT_GRACE:g} s)")
                gone.cancel()  # the questions it was asked go unanswered
                return
            # Any other error is an answer: the client is there.
        except ValueError:
            pass  # a reply that is not a ping's (pydantic's ValidationError): it is there


async def _elicit_form(ctx: ServerRequestContext[Any, Any], form: Form) -> types.ElicitResult:
    """``elicitation/create`` asking ``form`` (the SDK's ``elicit_form``, with the asker's
    path in ``_meta``: ``_asker``), on the call's own channel."""
    params = types.ElicitRequestFormParams(
        message=form.message, requested_schema=form.schema, _meta=params_meta(form)
    )
    return await ctx.session.send_request(
        types.ElicitRequest(params=params),
        types.ElicitResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


async def _unanswerable(served: ServedRun, pending: list[RequestEvent]) -> None:
    """The client cannot be asked: each question ends unanswered, its asker told so."""
    for request in pending:
        await served.cancel_request(request.request_id)
