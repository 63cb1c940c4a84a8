"""A question raced by a resolver (``ToolContext.ask_action(resolver=...)``): the human's
answer or the resolver's result, whichever comes first, ends it through the coordinator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..coordinator import Coordinator
from ..exceptions import InvalidAnswerError, QuestionNotAnswered, RequestError
from .requests import Asker, RequestSpec

__all__ = ["ask_racing"]


async def ask_racing(
    coordinator: Coordinator,
    asker: Asker,
    spec: RequestSpec,
    request_id: str,
    resolver: Callable[[], Awaitable[Any]],
    timeout: float | None,
    warn_before: float | None = None,
) -> Any:
    """Ask ``spec`` while ``resolver`` runs; whichever answers first wins.

    The resolver's result goes through ``respond`` like a human's answer (checked and
    announced); if the request ended meanwhile it is dropped. An exception from the
    resolver, or an answer ``respond`` refuses, propagates and cancels the question.
    """
    outcome: dict[str, Any] = {}

    async def resolve() -> None:
        # Starts once the asker is waiting, so the request is registered by then.
        try:
            await coordinator.respond(request_id, await resolver())
        except InvalidAnswerError as e:
            # A resolver giving a wrong answer is a bug in the app: say so.
            outcome["resolver_error"] = e
            tg.cancel_scope.cancel()
        except RequestError:
            pass  # the human answered first, or the request ended: that stands
        except Exception as e:
            outcome["resolver_error"] = e
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(resolve)
        try:
            outcome["value"] = await coordinator.request(
                asker, spec, request_id=request_id, timeout=timeout, warn_before=warn_before
            )
        except QuestionNotAnswered as e:
            outcome["error"] = e
        tg.cancel_scope.cancel()
    if "resolver_error" in outcome:
        raise outcome["resolver_error"]
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
