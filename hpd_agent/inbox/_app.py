"""The inbox's routes, behind the guard every server applies (``hpd_agent.hosting.Guard``:
Host, Origin, bearer tokens, JSON bodies of bounded size); the page and its files public.

- ``GET /inbox/requests``: every pending request of the store, oldest first (``?path=``,
  ``?kind=`` narrow it).
- ``POST /inbox/requests/{request_id}``: ``{"answer": ...}`` or ``{"decline": true}``,
  checked as ``hpd_agent.store.respond`` checks it (who may answer first, under the app's
  policy) and written through the store as given by the token's name on channel ``inbox``
  (the run wakes through the store's own wake-up, whichever process drives it).
- ``GET /inbox/events``: Server-Sent Events, ``ready`` once listening, then
  ``request_opened`` / ``request_resolved`` for every run of the store (the same filters).
- ``GET /inbox/resolved``: the requests that ended while the inbox listened (the last
  hundred), newest first, each with its status, answer, who, channel and when.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..backend import AnswerPolicy, check_policy
from ..exceptions import AnswerRefusedError, InvalidAnswerError, RequestError, UnknownRequestError
from ..hosting import Guard, identity_of
from ..questions import Decline
from ..store import Store, refusal, respond
from ..web import MAX_BODY, BodyError, answer_in, check_web_answer, parse_body
from ._changes import KEEP_ALIVE, Changes, frame
from ._listing import Filter, FilterError, author_of, inbox_item

__all__ = ["build_app"]

STATIC = Path(__file__).parent / "static"
READY_WAIT = 10.0
"""Seconds a listing waits for the inbox to have read the store (then 503)."""
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _json(data: Any, status: int = 200) -> Response:
    # ASCII JSON: any text the store holds (lone surrogates too) goes out escaped.
    body = json.dumps(data, separators=(",", ":"))
    return Response(body, status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


Handler = Callable[[Request], Awaitable[Response]]


def _answered(handler: Handler) -> Handler:
    """``handler`` with its refusals answered as ``{"error": ...}``."""

    async def handled(request: Request) -> Response:
        try:
            return await handler(request)
        except BodyError as e:
            return _error(e.status, str(e))
        except FilterError as e:
            return _error(400, str(e))

    return handled


CHANNEL = "inbox"
"""The channel an inbox answer is recorded on."""


class _Routes:
    def __init__(self, store: Store, changes: Changes, policy: AnswerPolicy | None) -> None:
        self.store = store
        self.changes = changes
        self.policy = policy

    async def _ready(self) -> Response | None:
        """None once the inbox holds the store's pending requests; else a 503."""
        with anyio.move_on_after(READY_WAIT):
            await self.changes.wait_ready()
        if not self.changes.ready:
            return _error(503, "the inbox cannot read the store now; try again")
        return None

    async def requests(self, request: Request) -> Response:
        keep = Filter.of(request.query_params)
        not_ready = await self._ready()
        if not_ready is not None:
            return not_ready
        return Response(self.changes.pending.listing(keep), media_type="application/json")

    async def resolved(self, request: Request) -> Response:
        keep = Filter.of(request.query_params)
        return Response(self.changes.resolved(keep), media_type="application/json")

    async def answer(self, request: Request) -> Response:
        request_id = request.path_params["request_id"]
        answer = answer_in(parse_body(await request.body()))
        # Answered once the requests are held: the answer leaves the listing at once.
        not_ready = await self._ready()
        if not_ready is not None:
            return not_ready
        record = await self.store.get_request(request_id)
        by, policy = identity_of(request.scope), self.policy
        try:
            if record is None or record.status != "pending":
                raise refusal(record, request_id)
            check_policy(policy, by, record)  # who may answer, before the answer is read
            value = answer if isinstance(answer, Decline) else check_web_answer(record, answer)
            # Asked once: the verdict stands for this request (its path and tool do not
            # change), and a policy may query a directory or write a log on each question.
            done = await respond(self.store, request_id, value, by=by, channel=CHANNEL)
        except AnswerRefusedError as e:
            return _error(403, str(e))
        except InvalidAnswerError as e:
            return _error(400, str(e))
        except UnknownRequestError as e:
            return _error(404, str(e))
        except RequestError as e:  # answered, declined, expired or cancelled meanwhile
            return _error(409, str(e))
        self.changes.ended(done)  # listed no more, told to every stream at once
        outcome = {"status": done.status, "answer": done.answer, "answered_at": done.answered_at}
        return _json({**inbox_item(done), **outcome, **author_of(done)})

    async def events(self, request: Request) -> Response:
        keep = Filter.of(request.query_params)
        return StreamingResponse(
            self._frames(keep), media_type="text/event-stream", headers=_SSE_HEADERS
        )

    async def _frames(self, keep: Filter) -> AsyncIterator[bytes]:
        changes = self.changes
        stream = changes.open_stream(keep)
        try:
            while not changes.ready:  # the store is being read (or is lost): keep it open
                with anyio.move_on_after(KEEP_ALIVE):
                    await changes.wait_ready()
                if not changes.ready:
                    yield b": keep-alive\n\n"
            yield frame("ready", {})
            while not stream.behind:
                frames = await stream.take(KEEP_ALIVE)
                yield b"".join(frames) if frames else b": keep-alive\n\n"
            yield frame("resync", {})
        finally:
            changes.close_stream(stream)


async def _page(request: Request) -> Response:
    page = STATIC / "inbox.html"
    if not page.is_file():
        return _error(404, "the inbox page is not installed")
    return FileResponse(page)


def _public(path: str) -> bool:
    """Whether ``path`` is the page or one of its files (served without a token)."""
    return path in ("/", "/inbox") or path.startswith("/static/")


def build_app(
    store: Store,
    changes: Changes,
    lifespan: Any,
    *,
    tokens: str | Mapping[str, str] | None = None,
    hosts: Sequence[str] | None = None,
    origins: Sequence[str] = (),
    policy: AnswerPolicy | None = None,
) -> Starlette:
    """The inbox's routes over ``store`` (its changes heard by ``changes``), behind the
    guard: ``tokens`` when given (the page and its files public), only the loopback names
    and ``hosts`` (any Host with a token and no ``hosts``), no Origin but its own and
    ``origins``; answers given as the request's token name, under ``policy``."""
    r = _Routes(store, changes, policy)
    # The page's own files first, then the web page's (its question cards, markdown and
    # schema forms, the vendored libraries): one folder for the page's relative imports.
    files = StaticFiles(directory=STATIC, packages=[("hpd_agent.web", "static")])
    routes = [
        Route("/", _page, methods=["GET"]),
        Route("/inbox", _page, methods=["GET"]),
        Mount("/static", files, name="static"),
        Route("/inbox/requests", _answered(r.requests), methods=["GET"]),
        Route("/inbox/requests/{request_id}", _answered(r.answer), methods=["POST"]),
        Route("/inbox/resolved", _answered(r.resolved), methods=["GET"]),
        Route("/inbox/events", _answered(r.events), methods=["GET"]),
    ]
    guard = Middleware(
        Guard, tokens=tokens, hosts=hosts, origins=origins, public=_public, max_body=MAX_BODY
    )
    return Starlette(routes=routes, lifespan=lifespan, middleware=[guard])
