"""Continuing durable runs: ``Agent.resume`` and ``Agent.resume_stream``.

The half of ``Agent`` that reopens a run a store holds; ``agent.py`` has the rest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from ..coordinator import OnUnhandled
from ..exceptions import UserError
from ..handlers._base import Handler
from ..hooks import Hook
from ..run import Run, RunResult
from ..sessions import SessionStore
from .context import current_context
from .runner import Blueprint, check_deps, resolve_policy, run_root, stream_root

__all__ = ["Resumable"]


class Resumable(ABC):
    """``resume`` and ``resume_stream`` for ``Agent``."""

    name: str
    on_unhandled: OnUnhandled

    @abstractmethod
    def _plan(self) -> Blueprint:
        """What running the agent needs."""

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
                against each stored question; a refused one raises and nothing resumes).
            handler: Answers new requests, as in ``run``.
            on_unhandled: Policy for requests nobody here answers, as in ``run``.
            max_age: Expire this run's pending requests older than this many seconds first;
                their askers see the timeout text.
            hooks: Hooks for this run, as in ``run``.
            deps: As in ``run``. A store does not keep them: give them again here.

        Raises:
            UserError: No such run, or it was started by an agent of another name.
            RunLeasedError: Another process drives the run (it holds the run's lease in the
                store); nothing was written. See docs/guarantees.md.
            RequestError: One of ``answers`` was refused.
        """
        if current_context() is not None:
            raise UserError("resume() inside a tool call: resume the root run instead")
        bp = self._plan()
        check_deps(bp, deps)
        policy = resolve_policy(self.on_unhandled, on_unhandled, store)
        session = await store.resume_session(
            run_id, agent_name=self.name, answers=answers, max_age=max_age
        )

        async def reopened() -> Any:
            return session

        return await run_root(
            bp, run_id, session.prompt, session.history, handler, policy, reopened, hooks, deps
        )

    def resume_stream(
        self,
        run_id: str,
        *,
        store: SessionStore,
        on_unhandled: OnUnhandled | None = None,
        max_age: float | None = None,
        hooks: Sequence[Hook] = (),
        deps: Any = None,
    ) -> Run:
        """``resume`` as a stream: iterate the events (replayed ones have ``replayed=True``).

        ``deps`` are as in ``run`` (a store does not keep them: give them again here).

        The run record is read when the run starts. An unknown run (or one started by an
        agent of another name) keeps the stream's shape: ``RunStarted``, then
        ``RunFinished`` with status ``"failed"`` and the ``UserError``, which ``run.result``
        holds too (leaving the ``async with`` block raises it).
        """
        if current_context() is not None:
            raise UserError("resume_stream() inside a tool call: resume the root run instead")
        bp = self._plan()
        check_deps(bp, deps)
        policy = resolve_policy(self.on_unhandled, on_unhandled, store)
        name = self.name

        async def reopened() -> Any:
            return await store.resume_session(run_id, agent_name=name, max_age=max_age)

        return stream_root(bp, run_id, "", None, policy, reopened, hooks, deps)
