"""``create_app(agent)``: an agent served over A2A, its tree's questions as ``input-required``.

The app is a Starlette app built on a2a-sdk's own request handler: the agent card at
``/.well-known/agent-card.json`` and JSON-RPC at ``/`` (the protocol's 1.0 method names and,
for older clients, 0.3's). Its lifespan owns the runs (see ``_runs``) and the store; the
executor (``_executor``) starts a run per task and reports where it stopped.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from urllib.parse import urlsplit

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..agent import Agent
from ..backend import AnswerPolicy
from ..exceptions import UserError
from ..hosting import IDENTITY, Activity, Guard, is_loopback
from ..store import Store, open_store
from ..version import __version__
from ._body import DepthLimit
from ._executor import AgentRunner
from ._runs import ServedRuns
from ._tasks import KeptTasks

__all__ = ["create_app", "is_loopback"]


def create_app(
    agent: Agent,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    url: str | None = None,
    token: str | Mapping[str, str] | None = None,
    activity: Callable[[str], None] | None = None,
    policy: AnswerPolicy | None = None,
) -> Starlette:
    """An ASGI app serving ``agent`` over A2A (Agent2Agent).

    A message starts a run of the agent on its text; once the run has settled (every live
    branch waits for a human) the task is ``TASK_STATE_INPUT_REQUIRED``: the status message
    asks the oldest pending question, its metadata describes it (``request_id``,
    ``question_kind``, ``options``, ``schema``, ``agent_path``) and lists every pending one
    under ``"requests"``. A user message in the same task answers the request its metadata
    ``request_id`` names, else the oldest; an answer that does not fit is asked again with
    the reason. The finished run completes the task with an artifact holding the output.
    ``CancelTask`` cancels the run. A new task in a ``contextId`` continues its conversation
    (one at a time). Serve it with any ASGI server, or ``hpd-agent serve --a2a``; docs/a2a.md.

    Args:
        agent: The agent to serve.
        store: A ``Store``, or a SQLite path / ``postgresql://`` DSN: runs, tasks and
            contexts are kept there, so a restarted server still has every pending
            question and takes its answer. None: they live in this process only.
        url: The base URL the agent card advertises; None: the one each card request
            came in on.
        token: When set, JSON-RPC calls need ``Authorization: Bearer <token>`` (401
            otherwise); the agent card stays public. Without a token only loopback host
            names (and ``url``'s) are served. Either way a browser page of another origin
            is refused (403) and a POST must be ``application/json`` (415): the rules of
            ``hpd_agent.hosting.Guard``, as for every server we ship. Several by name:
            an answer is recorded as given by the token's name (``caller_name``).
        policy: An ``AnswerPolicy`` (``hpd_agent.governance``) every answer must pass: a
            refused one is asked again with the reason.
        activity: Takes each line of the server's activity log (``hosting.Activity``: a run
            started, resumed or ended; a request asked, answered by a message in its task or
            elsewhere, expired or cancelled); None: no log. ``hpd-agent serve --a2a``
            prints them (``--quiet``: not).

    Returns:
        The app; its lifespan must run (every ASGI server runs it).

    Raises:
        UserError: ``agent`` is not an ``Agent``.
    """
    if not isinstance(agent, Agent):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"create_app needs an Agent, got {type(agent).__name__}")
    tasks = KeptTasks(on_canceled=(held := _Held()).canceled)
    handler = DefaultRequestHandler(
        agent_executor=AgentRunner(held.runs, policy),
        task_store=tasks,
        agent_card=agent_card(agent, url or "http://localhost"),
    )
    lifespan = _lifespan(agent, store, tasks, handler, held, activity)
    app = Starlette(routes=_routes(agent, url, handler), lifespan=lifespan)
    app.add_middleware(DepthLimit)  # inside the guard: a caller refused never gets parsed
    _guard(app, url, token)
    return app


def _routes(agent: Agent, url: str | None, handler: DefaultRequestHandler) -> list[Route]:
    """The agent card (at the URL each request came in on, unless ``url``) and JSON-RPC."""

    async def card_route(request: Request) -> JSONResponse:
        base = url or str(request.base_url).rstrip("/")
        return JSONResponse(agent_card_to_dict(agent_card(agent, base)))

    return [
        Route(AGENT_CARD_WELL_KNOWN_PATH, card_route, methods=["GET"]),
        *create_jsonrpc_routes(
            handler, "/", context_builder=_NamedCaller(), enable_v0_3_compat=True
        ),
    ]


class _NamedCaller(DefaultServerCallContextBuilder):
    """The SDK's call context, with the name of the token the request carried (the guard's
    ``IDENTITY``) in its state: who an answer is recorded as given by."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[IDENTITY] = request.scope.get(IDENTITY)
        return context


def _guard(app: Starlette, url: str | None, token: str | Mapping[str, str] | None) -> None:
    """The guard every server applies, the card public; Host: without a token the loopback
    names and ``url``'s, with one any (the token guards the server)."""
    hosts: list[str] | None = None
    if token is None:
        named = None if url is None else urlsplit(url).hostname
        hosts = [named] if named else []
    app.add_middleware(
        Guard, tokens=token, hosts=hosts, public=lambda path: path == AGENT_CARD_WELL_KNOWN_PATH
    )


class _Held:
    """The app's runs, while its lifespan runs."""

    def __init__(self) -> None:
        self.live: ServedRuns | None = None

    def runs(self) -> ServedRuns:
        if self.live is None:
            raise RuntimeError("the A2A app's lifespan has not started")
        return self.live

    async def canceled(self, task_id: str) -> None:
        await self.runs().cancel(task_id)


def _lifespan(
    agent: Agent,
    store: Store | str | os.PathLike[str] | None,
    tasks: KeptTasks,
    handler: DefaultRequestHandler,
    held: _Held,
    activity: Callable[[str], None] | None,
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the store opened (a location), the task group the runs live in
    (``held`` holds them meanwhile), their activity logged to ``activity``."""
    log = None if activity is None else Activity(activity)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncGenerator[None]:
        opened = open_store(store) if isinstance(store, (str, os.PathLike)) else store
        try:
            tasks.use(opened)
            async with anyio.create_task_group() as tg:
                held.live = ServedRuns(agent, opened, tg, log)
                try:
                    yield
                finally:
                    held.live = None
                    await handler.aclose()
                    tg.cancel_scope.cancel()  # a shutdown leaves stored runs resumable
        finally:
            if opened is not None and opened is not store:
                await opened.aclose()

    return lifespan


def agent_card(agent: Agent, url: str) -> AgentCard:
    """The agent card of ``agent`` served at ``url``."""
    about = agent.description or f"{agent.name}: an hpd-agent agent; it may ask you questions."
    return AgentCard(
        name=agent.name,
        description=about,
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="run", name=agent.name, description=about, tags=["hpd-agent"])],
    )
