"""A run's life in a store: the session ``Agent.run/stream/resume(store=...)`` opens.

``StoreSession`` is the core's ``RunSession``: the journal (the core's ``RunJournal``), the
request backend, the run record, approvals for the run restored on resume, and the run's
lease (``_lease``: one process drives a run at a time). ``Sessions`` gives every store its ``open_session`` /
``resume_session``; both take the lease before they write anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .._core.journaling import check_durability
from .._core.output import output_text
from ..backend import API, Authored
from ..exceptions import UserError
from ..hooks import Hook
from ..messages import Message, message_adapter
from ..questions import Decline
from ..run import RunResult
from ..text import error_text
from ._answers import CANCEL_REQUEST, respond, validate_stored
from ._backend import StoreRequests
from ._base import JournalEntry, RunRecord, RunState, check_entries, refusal
from ._fence import fencing
from ._journal import Journal
from ._lease import LeaseKeeper, new_holder
from ._protocol import RunLeases, Store, StoreCapabilities

if TYPE_CHECKING:
    from ..coordinator import Coordinator

__all__ = ["Sessions", "StoreSession", "ended", "run_exists_refusal"]


def run_exists_refusal(store: object, run_id: str) -> UserError:
    """The error refusing to start a new run under an id ``store`` holds already
    (``RunLeases.open_run`` raises it).

    Args:
        store: The store (named in the message by its ``repr``).
        run_id: The run id it holds.

    Returns:
        The ``UserError`` to raise.
    """
    return UserError(
        f"run {run_id!r} is already in {store!r}: use resume() to continue it, or pick a new run_id"
    )


class StoreSession:
    """One root run's life in a store (the core's ``RunSession``).

    Args:
        store: The store.
        record: The run's record as opened.
        keeper: The run's lease.
        entries: What an earlier life of the run journaled (empty for a new run).
        capabilities: What the store declared (``Store.capabilities``), asked once for
            the session.
        durability: The run's durability mode (``Journal``; docs/guarantees.md).
    """

    __slots__ = ("backend", "durability", "grants", "hooks", "journal", "keeper", "record", "store")

    def __init__(
        self,
        store: Store,
        record: RunRecord,
        keeper: LeaseKeeper,
        entries: Mapping[str, JournalEntry] | None = None,
        *,
        capabilities: StoreCapabilities,
        durability: str = "sync",
    ) -> None:
        self.store = store
        self.record = record
        self.keeper = keeper
        self.durability = durability
        self.journal = Journal(
            store, record.run_id, entries, capabilities=capabilities, durability=durability
        )
        self.journal.keeper = keeper
        if durability == "async" and capabilities.behind is not None:
            # The store's writer commits the run's facts behind it: no task of its own.
            writer = capabilities.behind.behind_writer()
            self.journal.behind = writer.behind(record.run_id, keeper.fence)
        self.backend = StoreRequests(store, self.journal, keeper)
        self.hooks: Sequence[Hook] = ()
        """None: the core calls the journal (``RunJournal``) directly, before any hook."""
        self.grants = capabilities.grants
        """Where the run keeps and finds remembered grants: the store's, if it offers them."""

    @property
    def prompt(self) -> str:
        return self.record.prompt

    @property
    def history(self) -> list[Message] | None:
        history = self.record.history
        if not history:  # a new run's: nothing to validate
            return None
        return message_adapter().validate_python(list(history)) or None

    @property
    def resumed(self) -> bool:
        return self.journal.replaying

    def held(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Held around the whole run: renews the run's lease, releases it at the end.

        Raises:
            RunLeasedError: The lease was lost to another holder meanwhile; the run's work
                was cancelled (see ``hpd_agent.store._lease``).
        """
        if self.durability == "async" and self.journal.behind is None:
            return self._written_behind()
        return self.keeper.held()

    @contextlib.asynccontextmanager
    async def _written_behind(self) -> AsyncGenerator[None]:
        """``held`` in mode ``"async"``: the journal's writer runs beside the run."""
        async with self.keeper.held(), anyio.create_task_group() as tg:
            tg.start_soon(self.journal.write_behind)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def attach(self, coordinator: Coordinator) -> None:
        """Bring back approvals "for the run" an earlier life got.

        A tool call whose result is journaled is not re-run, so the permission request it
        made is not re-asked either; its run-wide approval comes back from the store.
        """
        if not self.journal.replaying:
            return
        for record in await self.store.list_requests(run_id=self.record.run_id, status="answered"):
            answer: Any = record.answer
            if (
                record.kind == "permission"
                and isinstance(answer, dict)
                and answer.get("kind") == "approve"  # pyright: ignore[reportUnknownMemberType]
                and answer.get("scope") == "run"  # pyright: ignore[reportUnknownMemberType]
            ):
                tool_name = str(record.payload.get("tool_name"))
                coordinator.run_approvals.add((record.agent_path, tool_name))

    async def finish(self, result: RunResult) -> None:
        """Write how the run ended to its run record."""
        status: RunState = result.status  # type: ignore[assignment]
        error = None if result.error is None else error_text(result.error)
        self.record = ended(self.record, status, output_text(result.output), error)
        # The responses the journal held back, the final record and the lease release in
        # one transaction where the store can (``_lease``).
        settling = self.journal.settling() if self.journal.holding else None
        if settling is not None:
            with anyio.CancelScope(shield=True):
                await settling
        held = self.journal.take_held()
        with fencing(self.keeper.fence):  # also after the run (a deliberate cancel's end)
            if not await self.keeper.close(self.record, held):
                if held:
                    await self.journal.write_held(held)
                await self.store.put_run(self.record)

    def conversation(self, key: str) -> list[Message] | None:
        return self.journal.conversation(key)

    async def record_conversation(self, key: str, messages: list[Message]) -> None:
        await self.journal.record_conversation(key, messages)


class Sessions:
    """``open_session`` / ``resume_session`` for a class implementing ``Store``.

    Inherit it in a store of your own: the sessions it opens journal the run, keep its
    requests and hold its lease through the store's own methods (and the capabilities it
    declares), as for the shipped stores.

    Attributes:
        run_durability: The durability mode of a run that names none (``Agent.run(...,
            durability=)``): ``"sync"`` (the default), ``"async"`` or ``"exit"``; set it on
            a store (``store.run_durability = "async"``) for every run it keeps. See
            docs/guarantees.md, "Durability modes".
    """

    run_durability: str = "sync"

    async def open_session(
        self,
        *,
        run_id: str,
        agent_name: str,
        prompt: str,
        history: Sequence[Message] | None,
        agent_ref: str | None = None,
        durability: str | None = None,
    ) -> StoreSession:
        """Start keeping a new run; refuses a run id the store already holds. ``durability``
        (checked by the core) defaults to the store's ``run_durability``."""
        store: Store = self  # type: ignore[assignment]
        mode = _mode(self, durability)
        now = time.time()
        record = RunRecord(
            run_id=run_id,
            agent_name=agent_name,
            prompt=prompt,
            # No history: the field's default (an empty list would be held by every run).
            history=message_adapter().dump_python(list(history), mode="json") if history else (),
            agent_ref=agent_ref,
            created_at=now,  # one float for both, held by every run in flight
            updated_at=now,
        )
        capabilities = store.capabilities()
        leases = capabilities.leases
        if leases is not None:
            # The record and the lease in one transaction.
            ttl = store.lease_ttl
            lease = await leases.open_run(record, new_holder(), ttl)
            keeper = LeaseKeeper(store, lease, ttl, leases=leases)
            return StoreSession(store, record, keeper, capabilities=capabilities, durability=mode)
        if await store.get_run(run_id) is not None:
            raise run_exists_refusal(store, run_id)
        keeper = await _take(store, run_id, None)
        try:
            await store.put_run(record)
        except BaseException:
            await _give_back(keeper)
            raise
        return StoreSession(store, record, keeper, capabilities=capabilities, durability=mode)

    async def resume_session(
        self,
        run_id: str,
        *,
        agent_name: str,
        answers: Mapping[str, Any] | None = None,
        max_age: float | None = None,
        durability: str | None = None,
    ) -> StoreSession:
        """Reopen a run the store holds; ``answers`` are checked, all, before any is written.
        ``durability`` as for ``open_session`` (a resumed run may take another mode)."""
        store: Store = self  # type: ignore[assignment]
        mode = _mode(self, durability)
        record = await store.get_run(run_id)
        if record is None:
            raise UserError(f"no run {run_id!r} in {store!r}")
        if record.agent_name != agent_name:
            raise UserError(
                f"run {run_id!r} was started by agent {record.agent_name!r}, not {agent_name!r}: "
                "resume it with the same agent"
            )
        capabilities = store.capabilities()
        keeper = await _take(store, run_id, capabilities.leases)
        try:
            with fencing(keeper.fence):
                record = await _reopen(store, record, answers, max_age)
            entries = check_entries(run_id, await store.journal(run_id))
        except BaseException:
            await _give_back(keeper)  # a refused resume must not lock the run
            raise
        return StoreSession(
            store, record, keeper, entries, capabilities=capabilities, durability=mode
        )


def ended(record: RunRecord, status: RunState, output: str | None, error: str | None) -> RunRecord:
    """``record`` as its run ended now: ``dataclasses.replace`` spelled out (every durable
    run's end makes one; ``replace`` walks the fields by name at each call)."""
    return RunRecord(
        run_id=record.run_id,
        agent_name=record.agent_name,
        prompt=record.prompt,
        history=record.history,
        status=status,
        output=output,
        error=error,
        created_at=record.created_at,
        updated_at=time.time(),
        agent_ref=record.agent_ref,
    )


def _mode(store: object, given: str | None) -> str:
    """The run's durability mode: the one given, else the store's ``run_durability``."""
    return check_durability(getattr(store, "run_durability", "sync") if given is None else given)


async def _reopen(
    store: Store,
    record: RunRecord,
    answers: Mapping[str, Any] | None,
    max_age: float | None,
) -> RunRecord:
    """With the lease taken: expire, answer, and mark the run running again."""
    run_id = record.run_id
    if max_age is not None:
        await store.recover(max_age, run_id=run_id)
    await _answer_all(store, run_id, dict(answers or {}))
    if record.status != "running":  # a run whose process died says so already
        record = dataclasses.replace(record, status="running", updated_at=time.time())
        await store.put_run(record)
    return record


async def _take(store: Store, run_id: str, leases: RunLeases | None) -> LeaseKeeper:
    """Take the run's lease for a new session (``RunLeasedError`` if it is live)."""
    ttl = store.lease_ttl
    lease = await store.take_lease(run_id, new_holder(), ttl)
    return LeaseKeeper(store, lease, ttl, leases=leases)


async def _give_back(keeper: LeaseKeeper) -> None:
    with anyio.CancelScope(shield=True):
        await keeper.store.release_lease(keeper.lease.run_id, keeper.lease.holder)


async def _answer_all(store: Store, run_id: str, given: dict[str, Any]) -> None:
    # An answer may come with its author (``Authored``); else code gave it, naming nobody.
    authors = {rid: a.author for rid, a in given.items() if isinstance(a, Authored)}
    answers = {rid: a.answer if isinstance(a, Authored) else a for rid, a in given.items()}
    # Every answer is checked before any is written: a refused one changes nothing.
    for request_id, answer in answers.items():
        stored = await store.get_request(request_id)
        if stored is not None and stored.run_id != run_id:
            raise UserError(f"request {request_id} belongs to run {stored.run_id}, not {run_id}")
        if stored is None or stored.status != "pending":
            raise refusal(stored, request_id)
        if answer is not CANCEL_REQUEST and not isinstance(answer, Decline):
            validate_stored(stored, answer)
    for request_id, answer in answers.items():
        if answer is CANCEL_REQUEST:
            await store.resolve(request_id, "cancelled")
        else:
            author = authors.get(request_id, API)
            await respond(store, request_id, answer, by=author.by, channel=author.channel)
