"""An MCP server's elicitation, asked of the human as a question of the calling tool.

Both protocol versions come here: on 2025-11-25 the server sends ``elicitation/create``
while the call is open (``_client.Connection.elicit``), on 2026-07-28 it returns an
``InputRequiredResult`` whose input requests are answered together (``answer_all``) before
the call is sent again. Either way one elicitation is one request of the calling tool's
``ToolContext``, so it reaches the root run's stream tagged with the calling agent's path
(and below it the remote asker's, when an hpd_agent server names it in ``_meta``:
``_asker``) and the tool call's id, and waits there like any question:

- a form (``mode: "form"``) is a ``"custom"`` question named ``ELICITATION``; its
  ``data["schema"]`` is the server's ``requestedSchema`` as received, and the answer
  (a JSON object) is checked against it before it is accepted;
- a URL (``mode: "url"``) is an ``"action"`` question with ``data["url"]``: True accepts,
  False declines. A URL ``ActionQuestion`` refuses (anything but ``https:``, or ``http:``
  to this machine: ``javascript:``, ``data:``, ``file:``, ...) is declined without asking.

An answer accepts; a declined question (``status == "declined"``) declines; a question
that ends otherwise (expired, cancelled, nobody there) cancels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import anyio
import mcp_types as types
from pydantic import ValidationError

from ..exceptions import QuestionNotAnswered, UserError
from ..questions import ActionQuestion, CustomQuestion
from ..tools import ToolContext
from ._asker import PATH_KEY, PATHS_KEY, REQUEST_ID_KEY, Asked, asked_from
from ._client_errors import MCPServerError, first_error

__all__ = ["ELICITATION", "answer_all", "answer_one", "asked"]

ELICITATION = "mcp.elicitation"
"""``data["name"]`` of the custom question an MCP form elicitation becomes."""


def asked(
    ctx: ToolContext,
    params: types.ElicitRequestParams,
    seen: dict[str, int],
    path: Any = None,
    key: Any = None,
) -> tuple[Asked, str]:
    """How ``params`` is asked from the calling tool's ``ctx`` (``_asker``: relayed for the
    remote agent ``path`` under the remote request id ``key``, by default those its own
    ``_meta`` names, else as the calling agent's question; ``seen``: the remote ids the
    call was asked so far) and the request id it gets, taken now: stable on replay,
    whichever order questions start in."""
    if path is None:
        meta: Mapping[str, Any] = cast(Mapping[str, Any] | None, params.meta) or {}
        path, key = meta.get(PATH_KEY), meta.get(REQUEST_ID_KEY)
    how = asked_from(ctx, params.message, path, key, seen)
    return how, how.ctx.next_request_id()


async def answer_one(
    how: Asked, request_id: str, params: types.ElicitRequestParams, about: Mapping[str, Any]
) -> types.ElicitResult:
    """Ask ``params`` as ``how`` says under ``request_id`` and give the server's result.

    Args:
        how: The frame it is asked from and its question text (``asked``).
        request_id: The request's id (from ``asked``: stable on replay).
        params: The elicitation.
        about: What the question's payload says of it (server, tool, protocol).

    Raises:
        MCPServerError: The elicitation cannot be asked (its form's schema is unusable; a
            URL that is not a web page is declined instead).
    """
    if isinstance(params, types.ElicitRequestURLParams):
        try:
            spec: Any = ActionQuestion(url=params.url, question=how.question)
        except UserError:
            # Not a web page (javascript:, file:, plain http off this machine): nobody is
            # sent there; the server hears "decline", as from a person who would not go.
            return types.ElicitResult(action="decline")
    else:
        schema = params.requested_schema
        try:
            spec = CustomQuestion(
                name=ELICITATION, question=how.question, payload=about, schema=schema
            )
        except UserError as e:
            raise MCPServerError(
                f"{about['server']} sent an elicitation that cannot be asked: {e}"
            ) from e
    try:
        answer = await how.ctx.request(spec, request_id=request_id)
    except QuestionNotAnswered as e:
        return types.ElicitResult(action="decline" if e.status == "declined" else "cancel")
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept" if answer else "decline")
    return _accepted(answer, params.requested_schema, about)


def _accepted(
    answer: Any, schema: Mapping[str, Any], about: Mapping[str, Any]
) -> types.ElicitResult:
    """The accepted form: the answer's declared properties (the server asked for no other)."""
    declared: Mapping[str, Any] = schema.get("properties") or {}
    content: Any = answer
    if isinstance(answer, dict):
        given: dict[str, Any] = answer  # pyright: ignore[reportUnknownVariableType]
        content = {k: v for k, v in given.items() if k in declared}
    try:
        return types.ElicitResult(action="accept", content=content)
    except ValidationError as e:
        raise MCPServerError(
            f"the answer to {about['server']}'s elicitation is not a flat form: {e.errors()[0]['msg']}"
        ) from None


async def answer_all(
    ctx: ToolContext,
    result: types.InputRequiredResult,
    about: Mapping[str, Any],
    seen: dict[str, int],
) -> dict[str, types.InputResponse]:
    """Answer every input request of ``result``: one question each, asked together and
    answered in any order, each from its asker's path when the result's ``_meta`` names
    it (``_asker``; ``seen``: the remote ids the call was asked in earlier rounds);
    returns when all are answered.

    Raises:
        MCPServerError: A request is not an elicitation (sampling, roots: not offered), or
            cannot be asked. The others are then withdrawn (cancelled).
    """
    requests = result.input_requests or {}
    meta: Mapping[str, Any] = cast(Mapping[str, Any] | None, result.meta) or {}
    paths: Any = meta.get(PATHS_KEY)
    askers: Mapping[str, Any] = cast(Mapping[str, Any], paths) if isinstance(paths, dict) else {}
    questions: list[tuple[str, Asked, str, types.ElicitRequestParams]] = []
    for key, request in requests.items():
        if not isinstance(request, types.ElicitRequest):
            raise MCPServerError(
                f"{about['server']} asked for {request.method}, which this client does not offer"
            )
        # Ids taken in the server's order, before any question starts: a replay asks alike.
        how = asked(ctx, request.params, seen, *((askers[key], key) if key in askers else ()))
        questions.append((key, *how, request.params))
    if len(questions) == 1:  # the usual case: no task group
        key, how, rid, params = questions[0]
        return {key: await answer_one(how, rid, params, about)}
    answers: dict[str, types.InputResponse] = {}

    async def one(key: str, how: Asked, rid: str, params: types.ElicitRequestParams) -> None:
        answers[key] = await answer_one(how, rid, params, about)

    try:
        async with anyio.create_task_group() as tg:
            for key, how, rid, params in questions:
                tg.start_soon(one, key, how, rid, params)
    except BaseExceptionGroup as group:
        errors = group.subgroup(lambda e: not isinstance(e, anyio.get_cancelled_exc_class()))
        if errors is None:
            raise
        raise first_error(errors) from None
    return {key: answers[key] for key, _, _, _ in questions}
