"""Asking whether a tool call may run: approvals for the run, remembered grants, the request.

``ask_permission`` is ``ToolContext.ask_permission``'s body. A call the agent's tool is
approved for the rest of the run runs at once. A call a live remembered grant covers
(``hpd_agent.permissions``) runs without asking, and yet its request is raised and resolved
as any other (on the stream, to the hooks, in the store): answered by ``grant:<id>`` on
channel ``"grant"``, so the audit trail shows it. Any other call is asked; an
``Approve(scope="always")`` answer is then remembered in the run's grant book.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..exceptions import QuestionNotAnswered, RequestError
from ..permissions import Approve, Deny, PermissionSpec, grant_for
from .expiry import reopen, request_event
from .grants import Grant, GrantBook
from .requests import Asker

if TYPE_CHECKING:
    from ..coordinator import Coordinator

__all__ = ["ask_permission"]


async def ask_permission(
    coordinator: Coordinator,
    asker: Asker,
    next_request_id: Callable[[], str],
    tool_name: str,
    arguments: dict[str, Any],
    *,
    timeout: float | None,
    warn_before: float | None,
) -> str | None:
    """Whether ``asker`` may run ``tool_name`` with ``arguments``: None when it may, else
    the text the model gets instead of a result (denied, declined, unanswered).

    Args:
        coordinator: The run's coordinator.
        asker: The tool call asking (its frame).
        next_request_id: Gives the request's id (the frame's ``next_request_id``): taken
            only when a request is raised, so ids stay as an earlier life of the run took them.
        tool_name: The tool.
        arguments: Its arguments.
        timeout: Seconds to wait for the human; None waits as long as the run.
        warn_before: Seconds before ``timeout`` to warn that it expires.
    """
    table = coordinator.requests
    if (asker.agent_path, tool_name) in table.run_approvals:
        return None
    request_id = next_request_id()
    book = table.grants
    try:
        grant = None
        if book is not None:
            grant = await book.find_grant(tool_name, arguments, asker.agent_path)
        if grant is not None:
            spec = PermissionSpec(tool_name, arguments, grant_id=grant.grant_id)
            decision = await _granted(coordinator, asker, spec, request_id, grant)
        else:
            spec = PermissionSpec(tool_name, arguments)
            decision = await coordinator.request(
                asker, spec, request_id=request_id, timeout=timeout, warn_before=warn_before
            )
            if isinstance(decision, Approve) and decision.scope == "always" and book is not None:
                await _remember(coordinator, book, request_id, decision)
    except QuestionNotAnswered as e:
        if e.status == "declined":
            return (
                f"The tool {tool_name!r} did not run: the user declined to answer "
                "whether it may run."
            )
        return f"The tool {tool_name!r} did not run: it needs the user's approval. {e}"
    if isinstance(decision, Deny):
        reason = f" Reason: {decision.reason}" if decision.reason else ""
        return f"The user denied permission to run {tool_name!r}.{reason}"
    return None


async def _remember(
    coordinator: Coordinator, book: GrantBook, request_id: str, decision: Approve
) -> None:
    """Keep the grant an "always" answer to ``request_id`` gave, with who gave it and on
    which channel (the answer's author); the same grant, by its id, when a replayed run gets
    that answer again."""
    pending = coordinator.requests.get(request_id)
    assert pending is not None  # the request just answered
    event: Any = pending.event
    author = pending.author
    by, channel = (None, None) if author is None else (author.by, author.channel)
    await book.add_grant(grant_for(event, decision, by=by, channel=channel))


async def _granted(
    coordinator: Coordinator, asker: Asker, spec: PermissionSpec, request_id: str, grant: Grant
) -> Any:
    """Raise the request and resolve it at once as approved by ``grant``: kept (written to a
    durable backend before its event goes out) and announced like any request, answered by
    the grant. An outcome an earlier life of the run kept is replayed instead, and an answer
    that reached the store first wins."""
    table = coordinator.requests
    backend = coordinator.backend
    event = request_event(spec, request_id, asker, None)
    pending = table.track(event, spec)
    again = False
    if backend.durable:
        try:
            settled, _ = await backend.open(event, None)
        except BaseException:
            table.settle_quietly(pending, "cancelled", None)
            raise
        if settled is not None:  # an earlier life's outcome: replayed as any request's is
            table.settle_quietly(pending, settled.status, None)
            return await coordinator.request(asker, spec, request_id=request_id, timeout=None)
        again = reopen(backend, pending, None)
    try:
        table.announce(pending, again=again)
    except Exception:
        if backend.durable:  # an observer refused it: withdrawn in the store too
            with anyio.CancelScope(shield=True):
                await backend.resolve(request_id, "cancelled", None)
        raise
    value = Approve()
    author = grant.author  # grant:<id> on channel "grant", kept and announced as any author
    if backend.durable:
        try:
            await coordinator.keep_outcome(request_id, "answered", value, author)
        except RequestError:
            # Answered (or ended) from elsewhere in the instant since it was written: that wins.
            found = await backend.settlement(request_id)
            settled = None if found is None else found[1]
            if settled is not None and settled.status == "answered":
                table.accept(pending, spec.revive(settled.answer), settled.author)
            elif settled is not None:
                table.finish(pending, settled.status, None, settled.author)
            pending.stored = True
            return coordinator.outcome(pending, None)
        pending.stored = True
    table.accept(pending, value, author)
    return coordinator.outcome(pending, None)
