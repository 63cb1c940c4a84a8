"""The server's cost per text piece, the event a run sends most (issue 37): a piece of an open
message is recorded, folded and published in two Python calls (``RunFrames.take`` and
``Translator.piece``), not a chain of seven; and the messages read while a message is open
(``GET /threads/{id}/messages`` mid-run) lose none of its later pieces."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import anyio
import pytest
from agents import build_fanout

from hpd_agent.events import Event, TextDelta
from hpd_agent.store import MemoryStore, MemoryThreadTables
from hpd_agent.web._db import RunRow, ThreadDB
from hpd_agent.web._log import ThreadLog
from hpd_agent.web._runs import RunFrames, ThreadRuns
from hpd_agent.web._state import Thread
from hpd_agent.web._view import ThreadView

pytestmark = pytest.mark.anyio


async def _events(prompt: str) -> list[Event]:
    async with build_fanout().stream(prompt) as run:
        return [event async for event in run]


def _frames(store: MemoryStore) -> tuple[ThreadRuns, Thread]:
    db = ThreadDB(MemoryThreadTables(), owned=True)
    runs = ThreadRuns(build_fanout(), store, db, ThreadLog(db), lambda thread: None)
    thread = Thread("t", runs=[RunRow("run_hot", "interrupt", "running")], running=True)
    return runs, thread


async def test_a_text_piece_costs_the_server_two_python_calls() -> None:
    events = await _events("fanout 4 300")  # 1,200 pieces: a write behind the run among them
    store = MemoryStore()
    runs, thread = _frames(store)
    calls: list[int] = []
    pieces: list[int] = []

    def count(frame: FrameType, what: str, arg: Any) -> None:
        if what == "call":
            calls[-1] += 1

    async with anyio.create_task_group() as tg:
        runs.task_group = tg
        frames = RunFrames(runs, thread, None, "agui_hot", "interrupt")  # type: ignore[arg-type]
        for event in events:
            opened = len(thread.frames)
            calls.append(0)
            sys.setprofile(count)
            try:
                frames.take(event)
            finally:
                sys.setprofile(None)
            if type(event) is TextDelta and len(thread.frames) == opened + 1:
                pieces.append(calls[-1])
    await store.aclose()
    assert len(pieces) >= 1_190  # each but a message's first piece (START + CONTENT)
    # take and piece; but the one that starts a write behind the run (per 1,024 frames).
    assert pieces.count(2) >= len(pieces) - 1
    assert min(pieces) == 2
    assert thread.published == len(thread.frames)


def test_messages_read_while_a_message_is_open_keep_its_later_pieces() -> None:
    view = ThreadView()
    pieces = view.open_pieces("m1")  # what the translator holds while m1 is open
    view.fold({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
    view.fold({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"})
    pieces.append("lo")
    assert [m.content for m in view.messages] == ["Hello"]
    pieces += [", ", "world"]  # after a read (a client's GET .../messages)
    assert [m.content for m in view.messages] == ["Hello, world"]
    pieces.append("!")
    view.fold({"type": "TEXT_MESSAGE_END", "messageId": "m1"})
    assert [m.content for m in view.messages] == ["Hello, world!"]
    assert view.snapshot().model_dump_json(by_alias=True).count("Hello, world!") == 1
