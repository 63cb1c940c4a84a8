"""A loopback HTTP server that speaks the OpenAI chat-completions wire format.

Tests point litellm at it (``api_base=server.url``) so the real litellm code path runs, from
request building to SSE parsing, without any real provider. It serves scripted replies in
order (``push``) or from a function of the request (``script``), records every request, and
streams SSE chunks the way the API does: role chunk, content or tool-call deltas, a finish
chunk, a usage chunk (when ``stream_options.include_usage``), then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpd_agent.models import LiteLLMModel


@dataclass
class Stream:
    """A streamed reply: the chunk objects, sent as SSE events.

    ``gate`` (index, event): before sending chunk ``index`` the server waits for ``event``,
    so a test can prove that earlier chunks reached the caller before later ones were sent.
    """

    chunks: list[dict[str, Any]]
    usage: dict[str, int] | None = None
    gate: tuple[int, threading.Event] | None = None


@dataclass
class Json:
    """A non-streamed reply with this JSON body."""

    body: dict[str, Any]


@dataclass
class Error:
    """An error status with an OpenAI-style error body."""

    status: int
    message: str = "error"
    type: str = "invalid_request_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict[str, str])
    """Extra response headers, e.g. ``{"Retry-After": "2"}`` on a 429 or 503."""


Reply = Stream | Json | Error | tuple[str, list[tuple[str, str]]]
"""What the server sends for one request. A ``(text, calls)`` tuple is shorthand for a
reply with that text and those ``(name, arguments_json)`` tool calls, streamed or not as the
request asks."""

_CREATED = 1_700_000_000


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def text_stream(
    pieces: Sequence[str], *, usage: tuple[int, int] = (11, 7), finish: str = "stop"
) -> Stream:
    """A streamed text answer in these pieces (``finish="length"``: cut off by max_tokens)."""
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": p}) for p in pieces]
    chunks.append(chunk({}, finish))
    return Stream(chunks, usage=_usage(*usage))


def tool_call_stream(
    calls: Sequence[tuple[str, str, str]],
    *,
    fragment: int = 4,
    text: Sequence[str] = (),
    usage: tuple[int, int] = (20, 9),
    finish: str = "tool_calls",
) -> Stream:
    """Streamed parallel tool calls ``(id, name, arguments)`` whose argument fragments
    (``fragment`` characters each) interleave across chunks, round-robin by call, as
    OpenAI sends them when the model calls several tools at once. ``finish="length"`` with
    cut-off arguments is how a call truncated by max_tokens arrives."""
    chunks = [chunk({"role": "assistant", "content": None})]
    chunks += [chunk({"content": p}) for p in text]
    for i, (cid, name, _) in enumerate(calls):
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
    pieces = [
        [args[j : j + fragment] for j in range(0, len(args), fragment)] for _, _, args in calls
    ]
    for k in range(max((len(p) for p in pieces), default=0)):
        for i, p in enumerate(pieces):
            if k < len(p):
                chunks.append(
                    chunk({"tool_calls": [{"index": i, "function": {"arguments": p[k]}}]})
                )
    chunks.append(chunk({}, finish))
    return Stream(chunks, usage=_usage(*usage))


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion(
    text: str | None,
    calls: Sequence[tuple[str, str]] = (),
    *,
    usage: tuple[int, int] = (11, 7),
    finish: str | None = None,
) -> Json:
    """A non-streamed chat completion with this text and ``(name, arguments)`` tool calls
    (``finish`` defaults to what OpenAI sends: ``"tool_calls"`` or ``"stop"``)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
    return Json(
        {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": _CREATED,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish or ("tool_calls" if calls else "stop"),
                    "logprobs": None,
                }
            ],
            "usage": _usage(*usage),
        }
    )


def _expand(reply: Reply, stream: bool) -> Stream | Json | Error:
    if not isinstance(reply, tuple):
        return reply
    text, calls = reply
    if not stream:
        return completion(text or None, calls)
    ids = [(f"call_{i}", n, a) for i, (n, a) in enumerate(calls)]
    if calls:
        return tool_call_stream(ids, text=[text] if text else [])
    return text_stream([text[i : i + 12] for i in range(0, len(text), 12)] or [""])


class OpenAIServer:
    """The server. Use as a context manager; ``url`` is the ``api_base`` to give litellm."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in order."""
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        """When each request arrived (``time.monotonic()``), in order."""
        self._replies: list[Reply] = []
        self._script: Callable[[dict[str, Any]], Reply] | None = None
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL, ending in ``/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def push(self, *replies: Reply) -> OpenAIServer:
        """Queue replies, served one per request, in order."""
        with self._lock:
            self._replies.extend(replies)
        return self

    def script(self, fn: Callable[[dict[str, Any]], Reply]) -> OpenAIServer:
        """Answer every request (once the queue is empty) with ``fn(request_body)``."""
        self._script = fn
        return self

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._replies:
                return self._replies.pop(0)
        if self._script is not None:
            return self._script(body)
        return Error(500, "the loopback server has no reply queued", type="server_error")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.times.append(time.monotonic())
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = _expand(server._next(body), bool(body.get("stream")))
                if isinstance(reply, Error):
                    self._send_json(
                        reply.status,
                        {
                            "error": {
                                "message": reply.message,
                                "type": reply.type,
                                "param": None,
                                "code": reply.code,
                            }
                        },
                        reply.headers,
                    )
                elif isinstance(reply, Json):
                    self._send_json(200, reply.body)
                else:
                    self._send_stream(reply, body)

            def _send_json(
                self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _send_stream(self, reply: Stream, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                for i, chunk in enumerate(_with_usage(reply, include_usage)):
                    if reply.gate is not None and reply.gate[0] == i:
                        # A failure bound only: a test that never opens the gate still ends.
                        reply.gate[1].wait(timeout=30)
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler


def _with_usage(reply: Stream, include_usage: bool) -> Iterator[dict[str, Any]]:
    yield from reply.chunks
    if include_usage and reply.usage is not None:
        last = {**chunk({}), "choices": [], "usage": reply.usage}
        yield last


def litellm_model(server: OpenAIServer, **kw: Any) -> LiteLLMModel:
    """A ``LiteLLMModel`` that talks to ``server``; no retries unless ``max_retries`` says."""
    from hpd_agent.models import LiteLLMModel

    kw.setdefault("max_retries", 0)
    return LiteLLMModel("openai/gpt-4o-mini", api_base=server.url, api_key="sk-test", **kw)
