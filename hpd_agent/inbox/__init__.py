"""One inbox for a whole store: every pending question and permission of every run in it, a
web page and a JSON API to answer them, live.

Whichever process or surface started a run (a script, ``hpd-agent run``, ``serve``,
``mcp``, ``serve --a2a``, a durable run of your own), its requests wait in its store; any
process that can read the store lists and answers them here, and the run wakes through the
store's own wake-up. Each answer is recorded with who gave it (the token's name) on channel
``inbox``, under the app's answer policy if it has one. ``create_app(store)`` is a Starlette (ASGI) app; ``hpd-agent inbox
--store URL`` serves one. Needs the ``web`` extra (its page reuses the web page's question
cards). See docs/governance.md, "The inbox".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import anyio
from starlette.applications import Starlette

from ..backend import AnswerPolicy
from ..hooks import Hook
from ..store import Store, open_store
from ._app import build_app
from ._changes import Changes
from ._listing import inbox_item, run_label

__all__ = ["create_app", "inbox_item", "run_label"]

_Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[dict[str, Any]]]


def _lifespan(changes: Changes, owned: Store | None) -> _Lifespan:
    """The app's lifespan: the store listened to while it serves; then the store it opened
    (``owned``) closed."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[dict[str, Any]]:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(changes.run)
                yield {}
                tg.cancel_scope.cancel()
        finally:
            if owned is not None:
                await owned.aclose()

    return lifespan


def create_app(
    store: Store | str | os.PathLike[str],
    *,
    token: str | Mapping[str, str] | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
    hooks: Sequence[Hook] = (),
    policy: AnswerPolicy | None = None,
) -> Starlette:
    """An ASGI app serving the inbox of ``store``: the page at ``/``, the API under
    ``/inbox/``.

    Mount it where its lifespan runs: the store is listened to there.

    Args:
        store: A ``Store``, or a location ``open_store`` opens (a SQLite path, a
            ``postgresql://`` DSN, ...; an existing store only).
        token: When set, every route but the page and its files needs ``Authorization:
            Bearer <token>`` (401 otherwise); several by name. An answer is recorded as
            given by the token's name (``"local"`` without a token), on channel ``"inbox"``.
        allowed_hosts: Host names served besides the loopback ones (DNS rebinding guard;
            any other ``Host`` gets 421). None: only loopback names without a token, any
            name with one.
        allowed_origins: Browser origins (``https://app.example``) allowed to call the API
            besides the inbox's own page (any other ``Origin`` gets 403).
        hooks: Told of every request the store opens and ends while the app runs, whichever
            process writes it (their ``request_opened`` and ``request_resolved``, with the
            stored request's event): a ``hpd_agent.governance.Webhook`` here notifies for
            the whole store.
        policy: An ``AnswerPolicy`` (``hpd_agent.governance``) every answer and decline
            must pass, asked with the token's name: a refusal is a 403 saying why, nothing
            written.

    Returns:
        The Starlette app.
    """
    resolved = store if isinstance(store, Store) else open_store(store, create=False)
    changes = Changes(resolved, hooks)
    lifespan = _lifespan(changes, None if isinstance(store, Store) else resolved)
    return build_app(
        resolved,
        changes,
        lifespan,
        tokens=token,
        hosts=allowed_hosts,
        origins=allowed_origins,
        policy=policy,
    )
