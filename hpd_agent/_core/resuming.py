"""The durable entry points of ``Agent``: ``resume`` and ``resume_stream``.

``Resuming`` is a mixin of ``Agent``: both reopen a run journaled in a store as a
``RootRun`` whose session comes from ``SessionStore.resume_session`` (after any
``wait=`` for another holder's lease), then replay and continue it; ``resume`` runs it to
its end, ``resume_stream`` hands back its stream. Starting a new run (``run``, ``stream``)
stays in ``hpd_agent/agent.py``. A mixin rather than an object the agent holds: a resumed
run pays for no extra object or call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..coordinator import OnUnhandled
from ..exceptions import UserError
from ..handlers._base import Handler
from ..hooks import Hook
from ..run import Run, RunResult
from ..sessions import RunSession, SessionStore
from .context import current_context
from .lease_wait import wait_for_lease
from .root import RootRun, resolve_policy, session_opener
from .runner import Blueprint, check_deps

__all__ = ["Resuming"]


class Resuming:
    """``Agent``'s ``resume`` and ``resume_stream`` (documented there)."""

    if TYPE_CHECKING:
        # Declared for the type checker only: Agent sets and defines these.
        name: str
        on_unhandled: OnUnhandled

        def _plan(self) -> Blueprint: ...

    async def resume(
        self,
        run_id: str,
        *,
        store: SessionStore,
        answers: Mapping[str, Any] | None = None,
        handler: Handler | None = None,
        on_unhandled: OnUnhandled | None = None,
        max_age: float | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
        wait: bool | float = False,
    ) -> RunResult:
        """Continue a run journaled in ``store`` (after a crash, or an interrupt).

        The root agent starts again from its first message and replays the journal: each
        recorded model response and tool result is reused, so no model call and no tool
        side effect runs twice; a request raised before keeps its id and is still pending
        in the store (or answered there: then it returns at once). The run then continues
        live, as if never interrupted.

        Args:
            run_id: The run to continue.
            store: The store it was journaled in.
            answers: ``{request_id: answer}`` to give pending requests first (validated
                against each stored question; a refused one raises and nothing resumes);
                ``Decline()`` as an answer declines that request.
            handler, on_unhandled, hooks, deps: As in ``run`` (a store does not keep deps).
            max_age: Expire this run's pending requests older than this many seconds first;
                their askers see the timeout text.
            wait: What to do when another holder's lease on the run is live. A holder on
                this machine whose process is gone is taken over at once whatever ``wait``
                says. False (default): raise ``RunLeasedError`` at once. True: wait until
                that lease expires, then take it over; if its holder renews it meanwhile (it
                is alive), raise. A number: keep waiting at most that many seconds.

        Raises:
            UserError: No such run, or it was started by an agent of another name.
            RunLeasedError: Another process drives the run (it holds the run's lease in the
                store, see ``wait``); nothing was written. See docs/guarantees.md.
            RequestError: One of ``answers`` was refused.
        """
        if current_context() is not None:
            raise UserError("resume() inside a tool call: resume the root run instead")
        root = self._reopened(run_id, store, on_unhandled, max_age, hooks, deps, answers, wait)
        # Reopened before the run starts: a refused answer or a held lease raises here.
        assert root.open_session is not None
        session = await root.open_session()
        root.prompt, root.history = session.prompt, session.history
        root.open_session = session_opener(None, session, None)
        return await root.to_end(handler)

    def resume_stream(
        self,
        run_id: str,
        *,
        store: SessionStore,
        on_unhandled: OnUnhandled | None = None,
        max_age: float | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
        wait: bool | float = False,
        answers: Mapping[str, Any] | None = None,
    ) -> Run:
        """``resume`` as a stream: iterate the events (replayed ones have ``replayed=True``).
        ``answers`` as for ``resume``: written once the run's lease is taken.

        The run record is read when the run starts. An unknown run (or one started by an
        agent of another name) keeps the stream's shape: ``RunStarted``, then
        ``RunFinished`` with status ``"failed"`` and the ``UserError``, which ``run.result``
        holds too (leaving the ``async with`` block raises it).
        """
        if current_context() is not None:
            raise UserError("resume_stream() inside a tool call: resume the root run instead")
        reopened = self._reopened(run_id, store, on_unhandled, max_age, hooks, deps, answers, wait)
        return reopened.stream()

    def _reopened(
        self,
        run_id: str,
        store: SessionStore,
        on_unhandled: OnUnhandled | None,
        max_age: float | None,
        hooks: Sequence[Hook],
        deps: Any,
        answers: Mapping[str, Any] | None = None,
        wait: bool | float = False,
    ) -> RootRun:
        bp = self._plan()
        check_deps(bp, deps)
        policy = resolve_policy(self.on_unhandled, on_unhandled, True)
        name = self.name

        async def take() -> RunSession:
            return await store.resume_session(
                run_id, agent_name=name, answers=answers, max_age=max_age
            )

        async def reopen() -> RunSession:
            return await wait_for_lease(take, wait)

        return RootRun(
            bp, run_id=run_id, prompt="", history=None, policy=policy, hooks=hooks, deps=deps,
            open_session=reopen,
        )  # fmt: skip
