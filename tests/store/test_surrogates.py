"""Half a surrogate pair from a model (issue 22, item 3a): a durable run never fails to
write it, and the stream, the result, the store and a replay all show the same text."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from hpd_agent import Agent, ToolContext, tool
from hpd_agent.events import Event, TextDelta
from hpd_agent.messages import Message, ToolCall
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.store import open_store, respond
from hpd_agent.testing import FunctionModel, text
from hpd_agent.text import TextMender, mend

pytestmark = pytest.mark.anyio


def _streaming(pieces: Sequence[str]) -> FunctionModel:
    """Streams ``pieces`` and calls a tool that asks; once the tool answered, streams
    ``pieces`` again as its final answer."""

    def reply(messages: Sequence[Message], params: ModelRequestParams) -> ModelResponse:
        if params.on_text is not None:
            for piece in pieces:
                params.on_text(piece)
        response = text("".join(pieces))
        if not any(getattr(m, "kind", "") == "tool" for m in messages):
            call = ToolCall(id="c1", name="where", arguments="{}")
            response = dataclasses.replace(response, tool_calls=(call,))
        return dataclasses.replace(response, streamed=params.on_text is not None)

    return FunctionModel(reply)


@tool
async def where(ctx: ToolContext) -> str:
    """Ask where."""
    return await ctx.ask("Where? \ud83d")


async def test_half_a_surrogate_pair_is_written_and_replayed_as_shown(location: str) -> None:
    # Before: UnicodeEncodeError in the SQLite write; the in-memory run completed.
    agent = Agent("A", model=_streaming(["smile \ud83d", "\ude00 and \ud83d", "!"]), tools=[where])
    shown = "smile \U0001f600 and \ufffd!"  # halves that belong together joined, a lone one U+FFFD
    store = open_store(location)
    try:
        first = await agent.run("hi \udc00", store=store, on_unhandled="interrupt")
        assert first.status == "interrupted"
        (pending,) = await store.list_requests(run_id=first.run_id)
        assert first.pending[0].question == pending.question == "Where? \ufffd"
        await respond(store, pending.request_id, "yes \udc00")
        events: list[Event] = []
        async with agent.resume_stream(first.run_id, store=store) as run:
            async for event in run:
                events.append(event)
        record = await store.get_run(first.run_id)
    finally:
        await store.aclose()
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert [e.text for e in deltas if e.replayed] == [shown]  # as the first life streamed it
    assert "".join(e.text for e in deltas if not e.replayed) == run.result.output == shown
    assert record is not None and (record.prompt, record.output) == ("hi \ufffd", shown)


def test_the_mender_passes_on_what_mending_the_whole_gives() -> None:
    pieces = ["a\ud83d", "\ude00", "\ud83d", "", "b\udc00", "\ud83d"]
    out: list[str] = []
    mender = TextMender(out.append)
    for piece in pieces:
        mender(piece)
    mender.close()
    assert "".join(out) == mend("".join(pieces)) == "a\U0001f600\ufffdb\ufffd\ufffd"
    assert mend("plain") == "plain"


def test_one_mender_serves_every_request_of_an_agent_run() -> None:
    # The loop makes one mender per agent run (not one per model request): a request cut
    # off after half a pair leaves nothing for the next one, which starts clean.
    out: list[str] = []
    mender = TextMender(out.append)
    mender("cut \ud83d")  # a request that failed here: its half is held back, never closed
    mender.reset()  # the next request (a hook's retry) starts clean
    mender("again \ud83d")
    mender("\ude00")
    mender.close()
    assert "".join(out) == "cut again \U0001f600"
