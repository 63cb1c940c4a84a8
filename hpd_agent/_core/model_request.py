"""One model request of a run, as every agent and tool frame makes it: through the run's
journal (``RunJournal``, called directly) and model wrappers (``Hook.wrap_model_call``),
counted busy for an interrupt, its text mended (``hpd_agent.text.mend``) as it streams and
as a whole, its usage added to the run's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Sequence

from ..coordinator import Coordinator
from ..events import TextDelta, invocation_id
from ..hooks import ModelCall
from ..messages import Message
from ..models._base import Model, ModelRequestParams, ModelResponse
from ..text import TextMender, mend

__all__ = ["direct_request", "journaled", "request_model"]


async def request_model(
    coordinator: Coordinator,
    agent_path: tuple[str, ...],
    scope_path: str,
    model: Model,
    messages: Sequence[Message],
    params: ModelRequestParams,
    invocation: str | None = None,
) -> ModelResponse:
    """One model request of a run: through the run's journal and model wrappers (if any),
    counted busy while it is live, journal write included (an interrupt waits for it), and
    added to the run's usage."""
    quiescence = coordinator.quiescence
    quiescence.busy += 1
    try:
        journal = coordinator.journal
        # The journal first: a replayed response reaches no hook.
        key = "" if journal is None else f"{scope_path}@{params.turn}"
        recorded = None if journal is None else journal.recorded_response(key)
        if recorded is not None:
            if recorded.text:
                _replay_text(coordinator, agent_path, scope_path, invocation, recorded.text)
            response = recorded
        else:
            if journal is not None:
                waiting = journal.before_model()  # a model call is paid for: not once lost
                if waiting is not None:
                    await waiting
            if coordinator.hooks.model_wrappers:
                response = await _wrapped(
                    coordinator, agent_path, scope_path, model, messages, params, invocation
                )
            else:  # mended here: no coroutine of its own held by every model call in flight
                mender, params = _mender(params)
                response = _mended(await model.request(messages, params), mender)
            if journal is not None:
                waiting = journal.record_response(key, response)
                if waiting is not None:
                    await waiting
    finally:
        # What the response asks for (tool calls, the agent's end) takes over.
        quiescence.hand_over()
    coordinator.add_usage(response.usage)
    return response


def direct_request(
    coordinator: Coordinator,
    scope_path: str,
    model: Model,
    messages: Sequence[Message],
    params: ModelRequestParams,
) -> Awaitable[ModelResponse] | None:
    """``request_model``'s common durable case, for the caller to await in its own frame
    and pass to ``journaled``: the model's own request, when only the run's journal is
    around the call, it replays nothing and its lease needs no check first (else that
    check, then the request). No coroutine of its own is held through the model call.

    Returns:
        What to await; None when the call needs ``request_model`` (model wrappers, a
        replayed response, or a mender of the caller's own to make).
    """
    journal = coordinator.journal
    on_text = params.on_text
    if (
        journal is None
        or coordinator.hooks.model_wrappers
        or (on_text is not None and not isinstance(on_text, TextMender))
        or journal.recorded_response(f"{scope_path}@{params.turn}") is not None
    ):
        return None
    if on_text is not None:
        on_text.reset()  # a retried request starts clean
    waiting = journal.before_model()  # a model call is paid for: not once lost
    if waiting is not None:
        return _after(waiting, model, messages, params)
    return model.request(messages, params)


async def _after(
    waiting: Awaitable[None], model: Model, messages: Sequence[Message], params: ModelRequestParams
) -> ModelResponse:
    """The request once ``waiting`` is done (the lease's check before a model call)."""
    await waiting
    return await model.request(messages, params)


async def journaled(
    coordinator: Coordinator, scope_path: str, params: ModelRequestParams, response: ModelResponse
) -> ModelResponse:
    """After ``direct_request``'s call: the response mended and recorded in the run's
    journal before anything acts on it (a coroutine only while it is written)."""
    journal = coordinator.journal
    assert journal is not None
    on_text = params.on_text
    response = _mended(response, on_text if isinstance(on_text, TextMender) else None)
    waiting = journal.record_response(f"{scope_path}@{params.turn}", response)
    if waiting is not None:
        await waiting
    return response


def _replay_text(
    coordinator: Coordinator,
    path: tuple[str, ...],
    scope_path: str,
    invocation: str | None,
    text: str,
) -> None:
    """Emit a replayed response's text again, marked ``replayed``."""
    coordinator.emit(
        TextDelta(
            run_id=coordinator.run_id, agent_path=path, depth=len(path) - 1,
            invocation_id=invocation_id(scope_path) if invocation is None else invocation,
            text=text, replayed=True,
        )
    )  # fmt: skip


def _wrapped(
    coordinator: Coordinator,
    agent_path: tuple[str, ...],
    scope_path: str,
    model: Model,
    messages: Sequence[Message],
    params: ModelRequestParams,
    invocation: str | None,
) -> Awaitable[ModelResponse]:
    """The request through the run's model wrappers."""
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
    return coordinator.hooks.model(_call_model)(call)


def _call_model(call: ModelCall) -> Awaitable[ModelResponse]:
    # Not a coroutine of its own: one frame less held by every model call in flight.
    return _mended_request(call.model, call.messages, call.params)


async def _mended_request(
    model: Model, messages: Sequence[Message], params: ModelRequestParams
) -> ModelResponse:
    """The model's response with its text mended (``hpd_agent.text.mend``) as it streams
    and as a whole, so every hook, event, journal entry and store sees the same text."""
    mender, params = _mender(params)
    return _mended(await model.request(messages, params), mender)


def _mender(params: ModelRequestParams) -> tuple[TextMender | None, ModelRequestParams]:
    """The request's text mender and its parameters with it. A ``TextMender`` given as
    ``on_text`` (the loop makes one per agent run) is used as it is: no mender and no copy
    of the parameters per request."""
    on_text = params.on_text
    if isinstance(on_text, TextMender):
        on_text.reset()  # a retried request starts clean
        return on_text, params
    if on_text is not None:
        mender = TextMender(on_text)
        return mender, dataclasses.replace(params, on_text=mender)
    return None, params


def _mended(response: ModelResponse, mender: TextMender | None) -> ModelResponse:
    """``response`` once the model is done: the mender's tail out, its text mended."""
    if mender is not None:
        mender.close()
    if response.text:
        text = mend(response.text)
        if text is not response.text:
            response = dataclasses.replace(response, text=text)
    return response
