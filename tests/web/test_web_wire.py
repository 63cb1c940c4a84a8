"""The translator's wire dicts are what the ``ag_ui.core`` models would have sent, byte for
byte: every event of real runs (text at depth 0 and 1, tool calls, broken arguments, a
failing subagent, a suspended one, text that needs escaping), encoded by ``_wire.frame``,
equals the ``EventEncoder`` frame of the same event validated into its model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from ag_ui.core import BaseEvent
from ag_ui.core import Event as AguiEvent
from ag_ui.encoder import EventEncoder
from agents import build
from pydantic import TypeAdapter

from hpd_agent import Agent
from hpd_agent.events import TextDelta
from hpd_agent.messages import Message, ToolResultMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.store import MemoryStore
from hpd_agent.testing import FunctionModel, text, tool_call
from hpd_agent.web._translate import Translator
from hpd_agent.web._view import ThreadView
from hpd_agent.web._wire import Out, Wire, frame, frames_bytes, resync_frame

_ADAPTER: TypeAdapter[Any] = TypeAdapter(AguiEvent)
TRICKY = 'é ü \u2028 "quoted" back\\slash tab\t newline\n ctrl\x01 emoji 😀 </script>'


def _speaker(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    return text(TRICKY)


def _broken(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    raise RuntimeError("the broken model fails")


def _root(messages: Sequence[Message], info: ModelRequestParams) -> Any:
    if any(isinstance(m, ToolResultMessage) for m in messages):
        return text("root says " + TRICKY)
    return [
        tool_call("speaker", query="talk"),
        tool_call("speaker", query="again"),
        tool_call("broken", query="fail"),
    ]


def _tree() -> Agent:
    speaker = Agent("speaker", model=FunctionModel(_speaker, chunk_size=5))
    broken = Agent("broken", model=FunctionModel(_broken))
    root = FunctionModel(_root, chunk_size=7)
    return Agent("root", model=root, tools=[speaker.as_tool(), broken.as_tool()])


def _wires(outs: list[Out], kind: str) -> list[Wire]:
    return [o for o in outs if not isinstance(o, BaseEvent) and o["type"] == kind]


async def _translated(agent: Agent, prompt: str, **kw: Any) -> list[Out]:
    view = ThreadView()  # folded as the server does: a result follows its call's start
    translator = Translator("run_wire", view)
    out: list[Out] = []
    async with agent.stream(prompt, **kw) as run:
        if kw:
            run.coordinator.stop_listening()
        async for event in run:
            for item in translator.translate(event):
                view.fold(item)
                out.append(item)
    return out + translator.close()


def _check(outs: list[Out]) -> set[str]:
    kinds: set[str] = set()
    encoder = EventEncoder()
    for i, out in enumerate(outs):
        if isinstance(out, BaseEvent):
            continue
        out["timestamp"] = 1_700_000_000_000 + i
        model = _ADAPTER.validate_python(out)
        assert frame(out) == encoder.encode(model), out
        kinds.add(out["type"])
    return kinds


@pytest.mark.parametrize("prompt", ["hello", "note", "broken arguments"])
def test_root_events_encode_as_the_models_do(prompt: str) -> None:
    kinds = _check(anyio.run(_translated, build(), prompt))
    assert "TEXT_MESSAGE_CONTENT" in kinds


def test_subagent_events_encode_as_the_models_do() -> None:
    outs = anyio.run(_translated, _tree(), "go")
    kinds = _check(outs)
    assert {
        "SUBAGENT_STARTED",
        "SUBAGENT_FINISHED",
        "SUBAGENT_ERROR",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    } <= kinds
    # Text pieces of a subagent (the template path) and of the root (the encoder's).
    pieces = _wires(outs, "TEXT_MESSAGE_CONTENT")
    assert any("subagentRunId" in o for o in pieces)
    assert any("subagentRunId" not in o for o in pieces)
    said = "".join(o["delta"] for o in pieces if "subagentRunId" not in o)
    assert said == "root says " + TRICKY


def test_a_suspended_subagent_encodes_as_the_model_does() -> None:
    outs = anyio.run(
        lambda: _translated(build(), "deep", store=MemoryStore(), on_unhandled="interrupt")
    )
    _check(outs)
    suspended = _wires(outs, "SUBAGENT_FINISHED")
    assert suspended and all(o["outcome"]["type"] == "suspended" for o in suspended)
    assert any(o["outcome"]["interruptIds"] for o in suspended)  # the asker's


def test_frames_bytes_numbers_frames_and_the_resync_frame_is_an_agui_custom_event() -> None:
    frames = ['data: {"a":1}\n\n', 'data: {"b":2}\n\n']
    assert frames_bytes(frames, None) == b'data: {"a":1}\n\ndata: {"b":2}\n\n'
    assert frames_bytes(frames, 7) == b'id: 7\ndata: {"a":1}\n\nid: 8\ndata: {"b":2}\n\n'
    resync = resync_frame("t1", 42, 1_700_000_000_000)
    event = json.loads(resync.removeprefix("data: "))
    model = _ADAPTER.validate_python(event)
    assert EventEncoder().encode(model) == resync
    assert event["name"] == "hpd_agent.resync"
    assert event["value"]["from"] == 42 and event["value"]["threadId"] == "t1"


def _said(view: ThreadView) -> list[tuple[str, str | None]]:
    """Each message's role and text (the ids are drawn at random)."""
    return [
        (m.role, m.content if isinstance(m.content, str | None) else "?") for m in view.messages
    ]


async def _pieces(
    agent: Agent, prompt: str
) -> tuple[list[tuple[str, Wire]], ThreadView, ThreadView]:
    """Each frame the translator's hot path made (``piece``), with the wire dict the other
    path (``translate``) makes of the same event; and both paths' views at the end (the hot
    path's folded through the list it appends to, the other's by ``fold``)."""
    hot_view, view = ThreadView(), ThreadView()
    hot, translator = Translator("run_wire", hot_view), Translator("run_wire", view)
    found: list[tuple[str, Wire]] = []
    frames: list[str] = []
    async with agent.stream(prompt) as run:
        async for event in run:
            made = isinstance(event, TextDelta) and hot.piece(event, frames)
            if not made:
                for item in hot.translate(event):
                    hot_view.fold(item)
            outs = translator.translate(event)
            for item in outs:
                view.fold(item)
            if made:
                assert len(outs) == 1 and not isinstance(outs[0], BaseEvent)
                found.append((frames[-1], outs[0]))
            if len(found) == 3:  # a reader of the messages mid-message (GET .../messages)
                assert _said(hot_view) == _said(view)
    for item in hot.close():
        hot_view.fold(item)
    for item in translator.close():
        view.fold(item)
    return found, hot_view, view


def test_a_text_piece_made_straight_into_its_frame_is_the_models_frame() -> None:
    encoder = EventEncoder()
    found, hot_view, view = anyio.run(_pieces, _tree(), "go")
    for made, out in found:
        sent = json.loads(made.removeprefix("data: "))
        assert out["messageId"].startswith("msg_")  # random: each translator draws its own
        out.update(timestamp=sent["timestamp"], messageId=sent["messageId"])
        assert made == encoder.encode(_ADAPTER.validate_python(out))
    # Pieces of the root (no subagentRunId) and of subagents, the tricky text among them.
    assert {"subagentRunId" in o for _, o in found} == {True, False}
    assert TRICKY in "".join(o["delta"] for _, o in found)
    # The pieces the hot path folded are the thread's messages, as ``fold`` makes them.
    assert _said(hot_view) == _said(view)
    assert any(TRICKY in (content or "") for _, content in _said(hot_view))


def test_a_runs_end_snapshot_copies_no_message_and_folds_back_to_the_same_view() -> None:
    # Every run's end makes one: copying each message of the thread cost the event loop
    # more than the rest of the run's closing frames.
    view = ThreadView()
    view.fold({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
    for delta in ("Hello", ", world"):
        view.fold({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": delta})
    snapshot = view.snapshot()
    encoded = snapshot.model_dump_json(by_alias=True)
    assert '"content":"Hello, world"' in encoded
    assert all(a is b for a, b in zip(snapshot.messages, view.messages, strict=True))
    view.fold(snapshot)  # as ThreadLog.append records it
    view.fold({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "!"})
    assert view.snapshot().model_dump_json(by_alias=True) == encoded.replace("world", "world!")
