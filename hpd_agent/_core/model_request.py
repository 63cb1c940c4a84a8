"""One model request of a run, as every agent and tool frame makes it: through the run's
model wrappers (``Hook.wrap_model_call``), counted busy for an interrupt, its text mended
(``hpd_agent.text.mend``) as it streams and as a whole, its usage added to the run's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Sequence

from ..coordinator import Coordinator
from ..events import invocation_id
from ..hooks import ModelCall
from ..messages import Message
from ..models._base import Model, ModelRequestParams, ModelResponse
from ..text import TextMender, mend

__all__ = ["request_model"]


async def request_model(
    coordinator: Coordinator,
    agent_path: tuple[str, ...],
    scope_path: str,
    model: Model,
    messages: Sequence[Message],
    params: ModelRequestParams,
    invocation: str | None = None,
) -> ModelResponse:
    """One model request of a run: through the run's model wrappers (if any), counted busy
    while it is live, journal write included (an interrupt waits for it), and added to the
    run's usage."""
    quiescence = coordinator.quiescence
    quiescence.busy += 1
    try:
        if not coordinator.hooks.model_wrappers:
            response = await _mended_request(model, messages, params)
        else:
            call = ModelCall(
                run_id=coordinator.run_id,
                agent_path=agent_path,
                scope_path=scope_path,
                invocation_id=invocation_id(scope_path) if invocation is None else invocation,
                turn=params.turn,
                model=model,
                messages=messages,
                params=params,
                emit=coordinator.emit,
            )
            response = await coordinator.hooks.model(_call_model)(call)
    finally:
        # What the response asks for (tool calls, the agent's end) takes over.
        quiescence.hand_over()
    coordinator.add_usage(response.usage)
    return response


def _call_model(call: ModelCall) -> Awaitable[ModelResponse]:
    # Not a coroutine of its own: one frame less held by every model call in flight.
    return _mended_request(call.model, call.messages, call.params)


async def _mended_request(
    model: Model, messages: Sequence[Message], params: ModelRequestParams
) -> ModelResponse:
    """The model's response with its text mended (``hpd_agent.text.mend``) as it streams
    and as a whole, so every hook, event, journal entry and store sees the same text."""
    mender = None if params.on_text is None else TextMender(params.on_text)
    if mender is not None:
        params = dataclasses.replace(params, on_text=mender)
    response = await model.request(messages, params)
    if mender is not None:
        mender.close()
    if response.text:
        text = mend(response.text)
        if text is not response.text:
            response = dataclasses.replace(response, text=text)
    return response
