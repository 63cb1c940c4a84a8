"""AG-UI events on the wire: the frequent ones as plain dicts, every one an SSE frame, once.

A run sends text and tool-call events by the thousand, so the translator builds those as the
dicts their JSON is (``Wire``): camelCase keys in the models' field order, ``type`` first and
``timestamp`` second, optional fields without a value left out, exactly what an
``ag_ui.core`` model serialises to (tests/web/test_web_wire.py checks it byte for byte).
``frame`` encodes one with the stdlib ``json`` (compact, UTF-8 kept), several times cheaper
than building and dumping a pydantic model; the rarer events (the run's start and end,
snapshots, requests) stay models and are encoded by pydantic (``frame`` takes both).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any

from ag_ui.core import BaseEvent

__all__ = [
    "CONTENT_FRAME",
    "RESYNC",
    "Out",
    "Wire",
    "content_frame",
    "content_keys",
    "frame",
    "frames_bytes",
    "json_string",
    "resync_frame",
]

Wire = dict[str, Any]
"""An AG-UI event as its JSON object: ``{"type": ..., "timestamp": ..., ...}``."""

Out = Wire | BaseEvent
"""What the translator hands on: a wire dict, or a model for the rarer events."""

RESYNC = "hpd_agent.resync"
"""The CUSTOM event a client that fell behind gets before its stream is closed."""

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
json_string = encode_basestring
"""A str as JSON, as the encoder writes it (C, UTF-8 kept)."""

CONTENT_FRAME = 'data: {"type":"TEXT_MESSAGE_CONTENT","timestamp":%d%s%s}\n\n'
"""The frame of a ``TEXT_MESSAGE_CONTENT``: ``CONTENT_FRAME % (timestamp, keys, delta)``,
``keys`` its ``content_keys``, ``delta`` its text as JSON (``json_string``)."""


def frame(event: Out) -> str:
    """One SSE frame (``data: <json>`` and a blank line) for ``event``."""
    if isinstance(event, BaseEvent):
        return f"data: {event.model_dump_json(by_alias=True)}\n\n"
    if event["type"] == "TEXT_MESSAGE_CONTENT" and len(event) == 5:
        # A subagent's text piece (the translator's ``_content``: these five keys in this
        # order).
        keys = content_keys(event["subagentRunId"], event["messageId"])
        return content_frame(event["timestamp"], keys, event["delta"])
    return f"data: {_encode(event)}\n\n"


def content_keys(sid: str | None, message_id: str) -> str:
    """The keys of a ``TEXT_MESSAGE_CONTENT`` frame after its timestamp, up to its delta's
    value: the same for every piece of a message (``Translator.piece`` keeps them)."""
    s = json_string
    if sid is None:
        return f',"messageId":{s(message_id)},"delta":'
    return f',"subagentRunId":{s(sid)},"messageId":{s(message_id)},"delta":'


def content_frame(timestamp: int, keys: str, delta: str) -> str:
    """The frame of a ``TEXT_MESSAGE_CONTENT`` (``keys``: its ``content_keys``), the event
    a run sends most: a template, 4x cheaper than the encoder."""
    return CONTENT_FRAME % (timestamp, keys, json_string(delta))


def frames_bytes(frames: list[str], first: int | None) -> bytes:
    """Frames as one body write; each preceded by its ``id: <index>`` line when ``first``
    (the index of the first) is given."""
    # "replace": text is mended upstream (hpd_agent.text), but a write must never fail.
    if first is None:
        return "".join(frames).encode(errors="replace")
    text = "".join([f"id: {first + i}\n{f}" for i, f in enumerate(frames)])
    return text.encode(errors="replace")


def resync_frame(thread_id: str, index: int, timestamp: int) -> str:
    """The ``hpd_agent.resync`` frame: the client got every event before ``index`` and
    nothing after; ``GET /threads/{thread}/events?from=<index>`` gives it the rest."""
    value = {
        "threadId": thread_id,
        "from": index,
        "message": (
            "this client fell behind the run and its stream is closed; the run goes on: "
            f"GET /threads/{{thread}}/events?from={index} sends the events it missed"
        ),
    }
    event = {"type": "CUSTOM", "timestamp": timestamp, "name": RESYNC, "value": value}
    return frame(event)
