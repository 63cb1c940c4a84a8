"""The ``Handler`` protocol and ``serve``, which connects a handler to a run's stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

from ..events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RequestEvent,
)
from ..exceptions import InvalidAnswerError, RequestError, RunCancelledError

if TYPE_CHECKING:
    from ..run import Run

__all__ = ["BaseHandler", "Handler", "serve"]

_MAX_INVALID_ANSWERS = 3


@runtime_checkable
class Handler(Protocol):
    """Answers requests and sees events of a run.

    ``on_request`` runs in its own task for each request, so several questions (from
    parallel sub-agents) can be handled at once, or queued by the handler, while the other
    agents keep working and ``on_event`` keeps receiving their events. ``on_request`` raising
    ``RunCancelledError`` cancels the whole run (the human left): every pending request ends
    cancelled, nothing is answered for them, and the run ends ``"cancelled"``.

    A handler may say who answers through it, kept with every answer it gives (the resolved
    events, the store, the trace): an attribute ``channel`` (``"console"``, ...; a handler
    without one answers on ``"api"``) and ``answered_by`` (a name; None when absent).
    """

    async def on_event(self, event: Event) -> None:
        """See one event of the run, in stream order."""
        ...

    async def on_request(self, request: RequestEvent) -> Any:
        """Return the answer to a question, or an ``Approve``/``Deny`` for a permission;
        ``Decline()`` for either when the human declines to answer."""
        ...


class BaseHandler:
    """A ``Handler`` with defaults: ignores events; override the methods you need.

    Questions are dispatched by kind (``request.question_kind``): ``handle_text``,
    ``handle_input``, ``handle_choice``, ``handle_confirmation``, ``handle_action`` and
    ``handle_custom``. Each falls back to ``handle_question``, so a handler can answer every
    kind in one place and specialise only the kinds it shows differently. Questions of a kind
    this version does not know go to ``handle_question`` too.

    Attributes:
        channel: The channel its answers are recorded on (``"api"`` unless a subclass
            says otherwise: the console's is ``"console"``).
        answered_by: Who its answers are recorded as given by (None: nobody named).
    """

    channel: str = "api"
    answered_by: str | None = None

    async def on_event(self, event: Event) -> None:
        """Ignore events by default."""

    async def on_request(self, request: RequestEvent) -> Any:
        """Dispatch to ``on_clarification`` or ``on_permission``."""
        if isinstance(request, ClarificationRequest):
            return await self.on_clarification(request)
        return await self.on_permission(request)

    async def on_clarification(self, request: ClarificationRequest) -> Any:
        """Answer a question: dispatch to the ``handle_<kind>`` method for its kind."""
        match request.question_kind:
            case "text":
                return await self.handle_text(request)
            case "input":
                return await self.handle_input(request)
            case "choice":
                return await self.handle_choice(request)
            case "confirm":
                return await self.handle_confirmation(request)
            case "action":
                return await self.handle_action(request)
            case "custom":
                return await self.handle_custom(request)
            case _:
                return await self.handle_question(request)

    async def handle_question(self, request: ClarificationRequest) -> Any:
        """Answer a question of any kind. Override it, or the ``handle_<kind>`` methods."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot answer {request.question_kind!r} questions"
        )

    async def handle_text(self, request: ClarificationRequest) -> Any:
        """Answer free text (one of ``request.options`` when given); default: ``handle_question``."""
        return await self.handle_question(request)

    async def handle_input(self, request: ClarificationRequest) -> Any:
        """Give the value of ``request.data["argument"]`` (text); default: ``handle_question``."""
        return await self.handle_question(request)

    async def handle_choice(self, request: ClarificationRequest) -> Any:
        """Pick an option by value or index (a list if ``data["multiple"]``); default: generic."""
        return await self.handle_question(request)

    async def handle_confirmation(self, request: ClarificationRequest) -> Any:
        """Answer yes/no with a bool; default: ``handle_question``."""
        return await self.handle_question(request)

    async def handle_action(self, request: ClarificationRequest) -> Any:
        """Have the user visit ``data["url"]``; True when done, False if declined."""
        return await self.handle_question(request)

    async def handle_custom(self, request: ClarificationRequest) -> Any:
        """Answer ``data["name"]`` with JSON matching ``data["schema"]``; default: generic."""
        return await self.handle_question(request)

    async def on_permission(self, request: PermissionRequest) -> Any:
        """Decide a permission request. Must be overridden by handlers that get them."""
        raise NotImplementedError(f"{type(self).__name__} cannot decide permission requests")


async def _answer(
    run: Run, handler: Handler, request: RequestEvent, scope: anyio.CancelScope
) -> None:
    by: str | None = getattr(handler, "answered_by", None)
    channel: str = getattr(handler, "channel", "api")
    with scope:
        for _ in range(_MAX_INVALID_ANSWERS):
            try:
                answer = await handler.on_request(request)
            except RunCancelledError:
                run.cancel()  # the handler's way to say the human left: end it all, answer none
                return
            try:
                await run.respond(request.request_id, answer, by=by, channel=channel)
                return
            except InvalidAnswerError:
                continue  # the request is unchanged: ask the handler again
            except RequestError:
                return  # resolved meanwhile (expired, cancelled): nothing to do
        # A handler that keeps giving invalid answers must not stall the asker forever.
        run.cancel_request(request.request_id)


async def serve(run: Run, handler: Handler) -> None:
    """Feed every event of ``run`` to ``handler`` and answer its requests until the run ends.

    A handler's answer that ``respond`` refuses as invalid is asked for again (up to three
    times, then the request is cancelled); a request resolved otherwise (expired,
    cancelled) stops its handler task. A handler that raises ``RunCancelledError`` cancels
    the run.
    """
    answering: dict[str, anyio.CancelScope] = {}
    async with anyio.create_task_group() as tg:
        async for event in run:
            await handler.on_event(event)
            # A replayed request was resolved in an earlier life of the run, one a grant
            # covers is approved as it is raised: neither is to answer.
            if isinstance(event, (ClarificationRequest, PermissionRequest)) and not (
                event.replayed or (isinstance(event, PermissionRequest) and event.grant_id)
            ):
                scope = anyio.CancelScope()
                answering[event.request_id] = scope
                tg.start_soon(_answer, run, handler, event, scope)
            elif isinstance(event, (ClarificationResolved, PermissionResolved)):
                scope = answering.pop(event.request_id, None)
                if scope is not None:
                    scope.cancel()
        tg.cancel_scope.cancel()
