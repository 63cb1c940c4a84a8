"""A tool's journaled step (``ToolContext.step``): its function called through the run's
journal (which records the result, and replays it on resume) and step wrappers."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..hooks import StepCall
from .requests import Asker

if TYPE_CHECKING:
    from ..coordinator import Coordinator

__all__ = ["take_step"]


async def take_step(
    coordinator: Coordinator,
    frame: Asker,
    name: str,
    key: str,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> Any:
    """``fn(*args, **kwargs)`` (awaited if it returns an awaitable), the step ``name`` of
    the tool call ``frame`` under the journal key ``key``, through the run's journal (if
    durable) and its hooks' step wrappers."""

    async def run() -> Any:
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return value

    hooks, journal = coordinator.hooks, coordinator.journal
    if not hooks.step_wrappers and journal is None:
        return await run()
    call = StepCall(
        run_id=frame.run_id,
        agent_path=frame.agent_path,
        invocation_id=frame.invocation_id,
        name=name,
        key=key,
        run=run,
    )
    inner = hooks.step(_run_step)
    if journal is None:
        return await inner(call)
    return await journal.wrap_step(call, inner)


async def _run_step(call: StepCall) -> Any:
    return await call.run()
