"""The Starlette app: routes behind the guard every server applies (``hpd_agent.hosting.Guard``:
Host, Origin, bearer token, JSON bodies of at most ``MAX_BODY`` bytes), SSE responses.

``POST /agent`` takes an AG-UI ``RunAgentInput`` and streams the run's AG-UI events; the
other routes answer, list and replay a thread's requests and events (see docs/web.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ag_ui.core import MessagesSnapshotEvent, ResumeEntry, RunAgentInput, TextPart
from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..backend import AnswerPolicy, Author, Authored, check_policy
from ..exceptions import AnswerRefusedError, InvalidAnswerError, RequestError, UnknownRequestError
from ..hosting import Guard, identity_of
from ..messages import AssistantMessage, Message, UserMessage
from ..questions import Decline
from ..store import CANCEL_REQUEST, RequestRecord, Store, respond
from ._body import MAX_BODY, BodyError, answer_in, parse_body
from ._requests import check_web_answer
from ._resume import ResumeRefused, check_resume
from ._stream import EventStream
from ._threads import Mode, Thread, Threads

__all__ = ["MAX_BODY", "build_app"]

STATIC = Path(__file__).parent / "static"
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class _Refused(Exception):
    """An AG-UI input refused with RUN_ERROR ``code``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


async def _frames(frames: list[str]) -> AsyncIterator[str]:
    for frame in frames:
        yield frame


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request: Request) -> Any:
    # The guard has read the whole body already: JSON, within MAX_BODY.
    return parse_body(await request.body())


async def _object_body(request: Request) -> dict[str, Any]:
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise _HTTPError(400, "body must be a JSON object")
    return cast(dict[str, Any], body)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


def _conversation(data: RunAgentInput) -> tuple[str, list[Message]]:
    """The prompt (last user message) and the earlier root-level text history."""
    history: list[Message] = []
    for m in data.messages:
        if getattr(m, "subagent_run_id", None) is not None:
            continue  # a subagent's words are not the root conversation
        if m.role == "user":
            history.append(UserMessage(content=_text(m.content)))
        elif m.role == "assistant" and getattr(m, "content", None):
            history.append(AssistantMessage(content=_text(m.content)))
    if not history or not isinstance(history[-1], UserMessage):
        raise _HTTPError(400, "RunAgentInput.messages must end with a user message")
    last = history.pop()
    assert isinstance(last, UserMessage)
    return last.content, history


def _mode(data: RunAgentInput) -> Mode:
    props: Any = data.forwarded_props
    ours: Any = cast(dict[str, Any], props).get("hpd_agent") if isinstance(props, dict) else None
    if isinstance(ours, dict) and cast(dict[str, Any], ours).get("mode") == "live":
        return "live"
    return "interrupt"


async def _unsettled(store: Store, run_id: str, entries: list[ResumeEntry]) -> list[ResumeEntry]:
    """The resume entries still to apply: those naming a request of ``run_id`` that was
    settled by another path (the answer route, ``hpd-agent answer``, expiry) are dropped, the
    store's outcome standing."""
    out: list[ResumeEntry] = []
    for entry in entries:
        record = await store.get_request(entry.interrupt_id)
        if record is None or record.run_id != run_id or record.status == "pending":
            out.append(entry)
    return out


class _Routes:
    def __init__(
        self, threads: Threads, examples: Sequence[str], policy: AnswerPolicy | None
    ) -> None:
        self.threads = threads
        self.examples = list(examples)
        self.policy = policy

    @staticmethod
    def answered(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` with its refusals answered as ``{"error": ...}``."""

        async def handled(request: Request) -> Response:
            try:
                return await handler(request)
            except (_HTTPError, BodyError) as e:
                return _error(e.status, str(e))

        return handled

    async def _thread(self, request: Request, *, view: bool = False) -> Thread:
        thread = await self.threads.get(request.path_params["thread_id"], view=view)
        if thread is None:
            raise _HTTPError(404, "unknown thread")
        return thread

    # -- AG-UI -----------------------------------------------------------------------------
    async def agent(self, request: Request) -> Response:
        try:
            data = RunAgentInput.model_validate(await _json_body(request))
        except ValidationError as e:
            raise _HTTPError(400, f"not a RunAgentInput: {e.errors()[0]['msg']}") from None
        # Once the body is in (a slow client holds no slot), the start waits for its turn.
        async with self.threads.admission:
            return await self._admitted(data, identity_of(request.scope))

    async def _admitted(self, data: RunAgentInput, by: str) -> Response:
        thread = await self.threads.claim(data.thread_id)
        if thread.running:
            message = "a run is in progress on this thread"
            return self._sse(
                _frames(self.threads.runs.refusal(thread, data.run_id, message, "busy"))
            )
        thread.running = True  # claimed before any await: a second input on it is "busy"
        try:
            start = await self._start(thread, data, by)
        except _Refused as e:
            thread.running = False
            self.threads.release(thread)  # a refused input leaves nothing behind
            return self._sse(
                _frames(self.threads.runs.refusal(thread, data.run_id, str(e), e.code))
            )
        except BaseException:
            thread.running = False
            self.threads.release(thread)
            raise
        return EventStream(self.threads, thread, start, until="end", ids=False)

    @staticmethod
    def _sse(frames: AsyncIterator[str]) -> Response:
        return StreamingResponse(frames, media_type="text/event-stream", headers=_SSE_HEADERS)

    async def _start(self, thread: Thread, data: RunAgentInput, by: str) -> int:
        threads, run_id = self.threads, data.run_id
        last = thread.run
        waiting = last is not None and last.status == "interrupted"
        if data.resume or (data.resume is not None and waiting):
            if last is None or not waiting:
                raise _Refused("nothing to resume on this thread", "not_interrupted")
            entries = await _unsettled(threads.store, last.run_id, data.resume)
            try:
                answers = await check_resume(
                    threads.store, last.run_id, entries, by=by, policy=self.policy
                )
            except ResumeRefused as e:
                raise _Refused(str(e), e.code) from None
            author = Author(by, "web")
            given = {
                rid: a if a is CANCEL_REQUEST else Authored(a, author) for rid, a in answers.items()
            }
            if threads.activity is not None:
                where = f"thread {thread.thread_id}"
                for rid in answers:  # said once the run took it (it may yet refuse)
                    threads.activity.giving(rid, where, by=by, via="an AG-UI resume")
            return await threads.runs.resume(thread, run_id, given)
        if waiting:
            message = (
                "the thread's run waits: send resume entries for its interrupts (an empty "
                "resume list once they are answered elsewhere)"
            )
            raise _Refused(message, "interrupted")
        prompt, history = _conversation(data)
        snapshot = MessagesSnapshotEvent(messages=list(data.messages))
        return await threads.runs.start(
            thread, run_id, prompt=prompt, history=history, mode=_mode(data), snapshot=snapshot
        )

    async def info(self, request: Request) -> Response:
        """What the page shows of the agent it talks to: its name, its description and the
        prompts it suggests."""
        agent = self.threads.agent
        info = {"name": agent.name, "description": agent.description, "examples": self.examples}
        return JSONResponse(info)

    # -- threads ---------------------------------------------------------------------------
    async def events(self, request: Request) -> Response:
        thread = await self._thread(request)
        raw = request.query_params.get("from", "0")
        if not raw.isdigit():
            raise _HTTPError(400, "from must be a non-negative integer")
        return EventStream(self.threads, thread, int(raw), until="idle", ids=True)

    async def messages(self, request: Request) -> Response:
        thread = await self._thread(request, view=True)
        return JSONResponse({"messages": self.threads.messages(thread)})

    async def requests(self, request: Request) -> Response:
        thread = await self._thread(request)
        return JSONResponse({"requests": await self.threads.pending(thread)})

    async def answer(self, request: Request) -> Response:
        body = await _object_body(request)
        answer = answer_in(body, {"answer", "decline"})
        return await self._answer(request.path_params["thread_id"], request, answer)

    async def answer_flat(self, request: Request) -> Response:
        """The live-mode route: ``{"answer": ...}`` (or ``{"decline": true}``), the thread
        found through the request's run (a ``threadId``, when given, must be that thread)."""
        body = await _object_body(request)
        answer = answer_in(body, {"answer", "decline", "threadId"})
        record = await self.threads.store.get_request(request.path_params["request_id"])
        owner = None if record is None else await self.threads.thread_of(record.run_id)
        given = body.get("threadId")
        if owner is None or (given is not None and given != owner):
            raise _HTTPError(404, "unknown request on this thread")
        return await self._answer(owner, request, answer)

    async def _answer(self, thread_id: str, request: Request, answer: Any) -> Response:
        request_id = request.path_params["request_id"]
        thread = await self.threads.get(thread_id, view=False)
        record = await self.threads.store.get_request(request_id)
        if thread is None or record is None or not thread.owns(record.run_id):
            raise _HTTPError(404, "unknown request on this thread")
        by = identity_of(request.scope)
        activity = self.threads.activity
        if activity is not None:  # before the run may say it took it
            activity.giving(request_id, f"thread {thread_id}", by=by, via="the inbox")
        try:
            value, accepted = await self._give(thread, record, answer, by)
        except BaseException:
            if activity is not None:
                activity.withdrawn(request_id)
            raise
        declined = isinstance(value, Decline)
        if activity is not None:
            activity.given(request_id, declined=declined)
        if declined:
            return JSONResponse({"id": request_id, "declined": True})
        return JSONResponse({"id": request_id, "answer": to_jsonable_python(accepted)})

    async def _give(
        self, thread: Thread, record: RequestRecord, answer: Any, by: str
    ) -> tuple[Any, Any]:
        """``answer`` checked (who may answer first) and given to the thread's live run, else
        through the store; (the answer given, the answer accepted)."""
        request_id, policy = record.request_id, self.policy
        try:
            if record.status == "pending":  # who may answer, before the answer is read
                check_policy(policy, by, record)
                # Asked once: the verdict stands for this request (its path and tool do
                # not change), and a policy may query a directory or write a log.
                policy = None
            value = answer if isinstance(answer, Decline) else check_web_answer(record, answer)
            live = thread.live
            accepted: Any = None
            if live is not None and record.status == "pending" and not live.done:
                with contextlib.suppress(UnknownRequestError):
                    accepted = await live.respond(
                        request_id, value, by=by, channel="web", policy=policy
                    )
            if accepted is None:
                stored = await respond(
                    self.threads.store, request_id, value, by=by, channel="web", policy=policy
                )
                accepted = stored.answer
        except AnswerRefusedError as e:
            raise _HTTPError(403, str(e)) from None
        except InvalidAnswerError as e:
            raise _HTTPError(400, str(e)) from None
        except UnknownRequestError as e:
            raise _HTTPError(404, str(e)) from None
        except RequestError as e:
            raise _HTTPError(409, str(e)) from None
        return value, accepted


async def _index(request: Request) -> Response:
    page = STATIC / "index.html"
    if not page.is_file():
        return _error(404, "the web page is not installed")
    return FileResponse(page)


def build_app(
    threads: Threads,
    token: str | Mapping[str, str] | None,
    lifespan: Any,
    *,
    hosts: Sequence[str] | None = None,
    origins: Sequence[str] = (),
    examples: Sequence[str] = (),
    policy: AnswerPolicy | None = None,
) -> Starlette:
    """The app's routes over ``threads``, behind the guard: ``token`` when given (the page
    and its static files public), only the loopback names and ``hosts`` (any Host with a
    token and no ``hosts``), no Origin but its own and ``origins``; ``GET /info`` suggests
    ``examples``; answers given as the request's token name, under ``policy``."""
    r = _Routes(threads, examples, policy)
    g = r.answered
    routes = [
        Route("/", _index, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static"),
        Route("/agent", g(r.agent), methods=["POST"]),
        Route("/info", g(r.info), methods=["GET"]),
        Route("/threads/{thread_id}/requests/{request_id}", g(r.answer), methods=["POST"]),
        Route("/requests/{request_id}", g(r.answer_flat), methods=["POST"]),
        Route("/threads/{thread_id}/requests", g(r.requests), methods=["GET"]),
        Route("/threads/{thread_id}/events", g(r.events), methods=["GET"]),
        Route("/threads/{thread_id}/messages", g(r.messages), methods=["GET"]),
    ]
    guard = Middleware(
        Guard, tokens=token, hosts=hosts, origins=origins, public=_page, max_body=MAX_BODY
    )
    return Starlette(routes=routes, lifespan=lifespan, middleware=[guard])


def _page(path: str) -> bool:
    """Whether ``path`` is the page or one of its files (served without a token)."""
    return path == "/" or path.startswith("/static/")
