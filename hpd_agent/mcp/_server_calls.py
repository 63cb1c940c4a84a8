"""A ``tools/call`` of the served agent, on either protocol.

The run goes until it settles (every live branch waits for a human: ``Run.settled``), so
the questions of parallel branches go out together:

- 2025-11-25 (``mode="legacy"``): one ``elicitation/create`` per pending question, sent
  together while the call stays open; each answer goes to the run, a refused one is asked
  again with the reason; then the next batch, until the run ends.
- 2026-07-28: an ``InputRequiredResult`` with one input request per pending question (its
  key the request id) and a ``requestState`` naming the run; the client's retry carries the
  answers and the state, and the same run goes on.

An accepted form answers its question; "decline" declines it (``hpd_agent.Decline``: the
asking tool's ``ask*`` raises ``QuestionNotAnswered(status="declined")`` and the run goes on);
"cancel" cancels the run (the tool result says so).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..events import RequestEvent
from ..exceptions import RequestError
from ..hosting import UnknownRunError
from ..questions import Decline
from ..run import RunResult, finished_event
from ..store import RunRecord
from ._server_forms import Form, form_for
from ._server_runs import ServedRun, ServedRuns

__all__ = ["Calls", "tool_result"]


class Calls:
    """What a served agent's ``tools/call`` needs (the server's lifespan yields it).

    Args:
        runs: The server's runs.
        tool_name: The one tool's name.
    """

    def __init__(self, runs: ServedRuns, tool_name: str) -> None:
        self.runs = runs
        self.tool_name = tool_name

    @property
    def agent_name(self) -> str:
        """The served agent's name."""
        return self.runs.agent.name

    # -- 2025-11-25: elicitations while the call stays open ---------------------------------
    async def elicited(
        self, ctx: ServerRequestContext[Any, Any], query: str
    ) -> types.CallToolResult:
        """Run the agent on ``query``, eliciting its questions batch by batch."""
        served = await self.runs.start(query)
        try:
            async with served.lock:
                while True:
                    stop = await served.stop()
                    if isinstance(stop, RunResult):
                        return tool_result(stop, self.agent_name, served.why)
                    if not _can_elicit(ctx):
                        _unanswerable(served, stop)
                        continue
                    async with anyio.create_task_group() as tg:
                        for request in stop:
                            tg.start_soon(self._elicit, ctx, served, request, tg)
        finally:
            if not served.ended.is_set():
                # The call ended early (the client cancelled it or went away): a legacy run
                # has no state to come back with, so it ends here too.
                with anyio.CancelScope(shield=True):
                    await served.cancel("the MCP client left the call")

    async def _elicit(
        self,
        ctx: ServerRequestContext[Any, Any],
        served: ServedRun,
        request: RequestEvent,
        tg: anyio.abc.TaskGroup,
    ) -> None:
        note: str | None = None
        while True:
            form = form_for(request, note)
            served.asked[request.request_id] = request
            try:
                reply = await ctx.session.elicit_form(
                    form.message, form.schema, related_request_id=ctx.request_id
                )
            except MCPError as e:
                served.cancel_now(f"the MCP client could not answer {form.message!r}: {e}")
                tg.cancel_scope.cancel()  # the other questions of the batch go unanswered
                return
            if reply.action == "cancel":
                served.cancel_now(f"the MCP client cancelled the question {form.message!r}")
                tg.cancel_scope.cancel()
                return
            note = await _answer(served, form, reply)
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
        try:
            async with served.lock:
                served.unpark()
                if params.request_state is not None:
                    await self._apply(served, params.input_responses or {})
                return await self._next(ctx, served)
        finally:
            if not served.ended.is_set():
                self.runs.park(served)  # a client that never comes back does not keep it

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
    ) -> types.CallToolResult | types.InputRequiredResult:
        while True:
            stop = await served.stop()
            if isinstance(stop, RunResult):
                return tool_result(stop, self.agent_name, served.why)
            if _can_elicit(ctx):
                break
            _unanswerable(served, stop)
        requests: dict[str, types.InputRequest] = {}
        for request in stop:
            form = form_for(request, served.notes.pop(request.request_id, None))
            served.asked[request.request_id] = request
            requests[request.request_id] = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message=form.message, requested_schema=form.schema
                )
            )
        state = json.dumps({"run": served.run_id})
        return types.InputRequiredResult(input_requests=requests, request_state=state)

    async def _apply(self, served: ServedRun, responses: Mapping[str, Any]) -> None:
        """Give the run a retry's answers (a resumed run first reaches its questions)."""
        pending = {r.request_id: r for r in await served.run.settled()}
        for key, response in responses.items():
            request = pending.get(key)
            if request is None:
                if key in served.asked or await self._kept(served, key):
                    continue  # answered meanwhile (another retry, another process)
                raise MCPError(
                    INVALID_PARAMS, f"inputResponses names {key!r}: no question of this run"
                )
            if not isinstance(response, types.ElicitResult):
                raise MCPError(
                    INVALID_PARAMS, f"the response to {key!r} is not an elicitation result"
                )
            form = form_for(request)
            if response.action == "cancel":
                await served.cancel(f"the MCP client cancelled the question {form.message!r}")
                return
            note = await _answer(served, form, response)
            if note is not None:
                served.notes[key] = note

    async def _kept(self, served: ServedRun, request_id: str) -> bool:
        store = self.runs.store
        if store is None:
            return False
        record = await store.get_request(request_id)
        return record is not None and record.run_id == served.run_id


async def _answer(served: ServedRun, form: Form, reply: types.ElicitResult) -> str | None:
    """Give the run the client's reply to ``form``: None when it took it, else why not."""
    if reply.action == "decline":
        return await served.answer(form.request_id, Decline)  # the asker's ask* raises "declined"
    return await served.answer(
        form.request_id, lambda: form.read(cast(Mapping[str, Any] | None, reply.content))
    )


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def _unanswerable(served: ServedRun, pending: list[RequestEvent]) -> None:
    """The client cannot be asked: each question ends unanswered, its asker told so."""
    for request in pending:
        with contextlib.suppress(RequestError):
            served.run.cancel_request(request.request_id)


def tool_result(result: RunResult, agent_name: str, why: str | None = None) -> types.CallToolResult:
    """The ``tools/call`` result of a finished run: its output text, or what ended it."""
    finished = finished_event(result, agent_name)
    if result.status == "completed":
        return _text(finished.output or "", error=False)
    if result.status == "cancelled":
        return _text(f"The run was cancelled: {why or 'it was stopped'}.", error=True)
    return _text(f"The run {result.status}: {finished.error or 'no output'}", error=True)


def record_result(record: RunRecord) -> types.CallToolResult:
    """The result of a stored run that ended before this retry came."""
    if record.status == "completed":
        return _text(record.output or "", error=False)
    return _text(f"The run {record.status}: {record.error or 'no output'}", error=True)


def _text(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)
