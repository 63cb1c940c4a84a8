"""Serve an agent over HTTP: the AG-UI endpoint, the question inbox API and the web page.

``create_app(agent)`` is a Starlette (ASGI) app; ``hpd-agent serve MODULE:ATTR`` runs one with
uvicorn. Needs the ``web`` extra: ``pip install -e ".[web]"`` in the checkout (hpd-agent is
not on PyPI yet). See docs/web.md.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import anyio
from starlette.applications import Starlette

from ..agent import Agent, check_examples
from ..exceptions import UserError
from ..hosting import Activity, is_loopback
from ..store import Store, open_store
from ._app import build_app
from ._body import MAX_BODY
from ._db import ThreadDB, open_thread_db
from ._threads import Threads

__all__ = ["DEFAULT_STORE", "MAX_BODY", "create_app", "is_loopback"]

_Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[dict[str, Any]]]

DEFAULT_STORE = "hpd-agent-web.db"
"""The SQLite file a server uses when given no store (in the current directory)."""


def _lifespan(threads: Threads, db: ThreadDB, owned: Store | None) -> _Lifespan:
    """The app's lifespan: the task group the runs live in; then the thread database and
    the store it opened (``owned``) closed."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[dict[str, Any]]:
        try:
            async with anyio.create_task_group() as tg:
                threads.runs.task_group = tg
                tg.start_soon(threads.keep_alive)
                # What is alive now (modules, the agent tree, the app) lives as long as the
                # server: out of the cyclic GC's full collections, which otherwise walk it
                # again and again while runs come and go (a pause of tens of ms each).
                gc.freeze()
                yield {}
                tg.cancel_scope.cancel()  # a shutdown leaves stored requests resumable
        finally:
            db.close()
            if owned is not None:
                await owned.aclose()

    return lifespan


def create_app(
    agent: Agent,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    token: str | None = None,
    agent_ref: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
    examples: Sequence[str] | None = None,
    activity: Callable[[str], None] | None = None,
) -> Starlette:
    """An ASGI app serving ``agent``: AG-UI at ``POST /agent``, the inbox API, the page.

    Runs belong to the app (its lifespan owns them), so mount it where the lifespan runs.

    Args:
        agent: The root agent to serve.
        store: A ``Store``, or a location ``open_store`` opens (a SQLite path, a
            ``postgresql://`` DSN, ...); default ``hpd-agent-web.db`` in the current
            directory. Runs are journaled there, so a restart loses no question; the threads
            live in the thread tables the store offers (``StoreCapabilities.threads``).
        token: When set, every route but the page and its static files needs
            ``Authorization: Bearer <token>`` (401 otherwise).
        agent_ref: How the agent was named on the command line (shown by the page).
        allowed_hosts: Host names served besides the loopback ones (DNS rebinding guard;
            any other ``Host`` gets 421). None: only loopback names without a token, any
            name with one.
        allowed_origins: Browser origins (``https://app.example``) allowed to call the API
            besides the server's own page (any other ``Origin`` gets 403).
        examples: The prompts the page suggests (``GET /info``) instead of the agent's own
            (``Agent(examples=...)``); checked the same way.
        activity: Takes each line of the server's activity log (``hosting.Activity``: a run
            started, resumed or ended; a request asked, answered or declined, by whom and
            through what, expired or cancelled); None: no log. ``hpd-agent serve`` prints
            them (``--quiet``: not).

    Returns:
        The Starlette app.
    """
    if not isinstance(agent, Agent):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"create_app needs an Agent, got {type(agent).__name__}")
    shown = agent.examples if examples is None else check_examples(examples)
    resolved = store if isinstance(store, Store) else open_store(store or DEFAULT_STORE)
    owns_store = not isinstance(store, Store)
    db = open_thread_db(resolved)
    threads = Threads(agent, resolved, db, None if activity is None else Activity(activity))
    lifespan = _lifespan(threads, db, resolved if owns_store else None)
    app = build_app(
        threads, token, lifespan, hosts=allowed_hosts, origins=allowed_origins, examples=shown
    )
    app.state.agent_name = agent.name
    app.state.agent_ref = agent_ref or agent.name
    app.state.threads = threads
    return app
