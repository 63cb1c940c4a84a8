"""A tool's journaled step (``ToolContext.step``): its function called through the run's
step wrappers (a durable run's journal records the result, and replays it on resume)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..hooks import HookSet, StepCall
from .requests import Asker

__all__ = ["take_step"]


async def take_step(
    hooks: HookSet,
    frame: Asker,
    name: str,
    key: str,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> Any:
    """``fn(*args, **kwargs)`` (awaited if it returns an awaitable), the step ``name`` of
    the tool call ``frame`` under the journal key ``key``, through ``hooks``' step wrappers."""

    async def run() -> Any:
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return value

    if not hooks.step_wrappers:
        return await run()
    call = StepCall(
        run_id=frame.run_id,
        agent_path=frame.agent_path,
        invocation_id=frame.invocation_id,
        name=name,
        key=key,
        run=run,
    )
    return await hooks.step(_run_step)(call)


async def _run_step(call: StepCall) -> Any:
    return await call.run()
