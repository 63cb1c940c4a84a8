"""A run's journal: records model responses and tool results as the run goes, and replays
them when the run is resumed.

The core calls it directly (``hpd_agent.sessions.RunJournal``), before any hook, at every
model request (key ``f"{scope_path}@{turn}"``), tool call (key: the call's ``call_path``)
and step. A hit returns the recorded response or result and calls nothing: neither the
model, nor the tool, nor any hook (so tracing sees only work really done). A miss runs the
call and records its result: a tool result the moment it exists, so a crash while a sibling
still waits never loses a side effect; a model response (and what the framework's own tools
return) before anything acts on it outside the framework. A store that declares
``JournalBatches`` (several entries in one transaction; see ``Store.capabilities``) gets
them held back and written together with what acts on them (``take_held``); one that
declares ``JournalSendAhead`` gets them sent at once and confirmed before a tool's function
runs; one that declares neither gets each written with ``Store.journal_put`` before the run
goes on. A method that may wait returns what to await, or None when the write was made at
once (no coroutine for the common case).

Replayed facts are emitted again by the core, marked ``replayed=True`` (the text of a
recorded model turn, start and end of a recorded tool call), so a UI that reconnects can
rebuild the run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ..exceptions import UserError
from ..hooks import CallNext, StepCall
from ..messages import Message, ToolCall, Usage, message_adapter
from ..models._base import ModelResponse
from ._base import JournalEntry, dump_json
from ._behind import Behind
from ._facts import Held, HeldOutcome, HeldResponse, response_entry
from ._protocol import Store, StoreCapabilities
from ._steps import failure_value, replayed_failure

if TYPE_CHECKING:
    from ._lease import LeaseKeeper

__all__ = ["Journal"]


# Entry kinds a life writes but never reads back (``Journal._keep``).
_WRITE_ONLY = frozenset(("model", "tool"))

_NO_ENTRIES: dict[str, JournalEntry] = {}
"""The entries of a journal that has none yet (never written: ``Journal._keep`` makes a
journal's own dict first)."""


_SLOTS = (
    "_confirm",
    "_entries",
    "_failure",
    "_group",
    "_held",
    "_holding",
    "_in_flight",
    "_replaying",
    "_send_now",
    "_wake",
    "_write_now",
    "behind",
    "capabilities",
    "holds_for",
    "keeper",
    "run_id",
    "store",
)
"""``Journal``'s attributes: one journal per run in flight, no ``__dict__`` of 18 each (a
constant here: the class stays within the size limit of ``tests/test_architecture.py``)."""


def _response(v: dict[str, Any]) -> ModelResponse:
    """A model response as a journal entry's value recorded it."""
    return ModelResponse(
        text=v.get("text"),
        tool_calls=tuple(ToolCall(**c) for c in v.get("tool_calls", ())),
        usage=Usage(**v.get("usage", {})),
        streamed=True,
        finish_reason=v.get("finish_reason"),
    )


class Journal:
    """The journal of one root run in a store (see the module docstring): the core's
    ``RunJournal``.

    Args:
        store: Where it lives.
        run_id: The root run.
        entries: What an earlier life of the run recorded (empty for a new run).
        capabilities: What the store declared (``Store.capabilities``); asked here if not
            given. Read once: no write looks again.

    Attributes:
        capabilities: What the store declared.
        durability: ``"sync"`` (each fact durable before anything acts on it), ``"async"``
            (each fact written behind the run, ``write_behind``) or ``"exit"`` (facts held
            until the run asks a human or ends); checked by the core.
        holds_for: The store's ``JournalBatches`` when the journal holds entries back for
            it (it declares batches and does not send ahead), else None: held entries
            (``take_held``) go to its ``add_request`` and ``close_run``.
    """

    __slots__ = _SLOTS

    def __init__(
        self,
        store: Store,
        run_id: str,
        entries: Mapping[str, JournalEntry] | None = None,
        *,
        capabilities: StoreCapabilities | None = None,
        durability: str = "sync",
    ) -> None:
        self.store = store
        self.run_id = run_id
        # A new run's journal shares one empty mapping until it keeps an entry (``_keep``).
        self._entries = dict(entries) if entries else _NO_ENTRIES
        self._replaying = bool(self._entries)
        caps = self.capabilities = store.capabilities() if capabilities is None else capabilities
        # The capabilities are kept, not their bound methods: a bound method is an object
        # of its own, held by every run in flight (~64 bytes each).
        # A store that can write at once on the event loop (SQL stores) skips the await.
        self._write_now = caps.write_now
        # A store that can send a write without waiting for its reply (PostgresStore), and
        # wait until every write sent ahead is confirmed.
        ahead = caps.send_ahead
        self._send_now = None if ahead is None else ahead.journal_send_nowait
        self._confirm = None if ahead is None else ahead.journal_confirm
        # A store that writes several entries in one transaction (SQLiteStore), unless it
        # sends them ahead: model responses are held back until something acts on them,
        # then written with it.
        self.holds_for = None if ahead is not None else caps.batches
        # A store that commits many runs' writes together while it drives several.
        self._group = caps.groups
        # Made when the first fact is held back, and dropped when taken: an empty list is
        # 56 bytes more per run in flight.
        self._held: list[JournalEntry | Held] | None = None
        # "exit" and "async" hold every fact back (docs/guarantees.md, "Durability modes"):
        # written when the run asks a human or ends, or ("async") by ``write_behind``.
        self._holding = durability != "sync"
        self._wake: anyio.Event | None = None
        self._in_flight: anyio.Event | None = None
        self._failure: Exception | None = None
        self.behind: Behind | None = None
        """Mode ``"async"`` on a store with one writer for all its runs (``JournalBehind``):
        where this run's facts go (set by the session); else ``write_behind`` writes them."""
        self.keeper: LeaseKeeper | None = None
        """The run's lease, guarded before a model request, a tool function or a step
        starts (``LeaseKeeper.guard_due``: cancels the run if its lease is lost). The
        keeper, not its bound method: that is an object of its own per run in flight."""

    @property
    def holding(self) -> bool:
        """Whether facts are held back until a question or the run's end (mode ``"exit"``
        or ``"async"``)."""
        return self._holding

    @property
    def replaying(self) -> bool:
        """Whether an earlier life of the run recorded anything."""
        return self._replaying

    def entry(self, key: str, kind: str) -> JournalEntry | None:
        """The entry at ``key`` if it is of ``kind``."""
        entry = self._entries.get(key)
        return entry if entry is not None and entry.kind == kind else None

    # -- model and tool calls (``RunJournal``) ---------------------------------------------
    def recorded_response(self, key: str) -> ModelResponse | None:
        """The response an earlier life recorded for the model request ``key``, or None."""
        entry = self.entry(key, "model") if self._entries else None
        return None if entry is None else _response(entry.value)

    def before_model(self) -> Awaitable[None] | None:
        """Before a model request (it is paid for): not made once the lease is lost."""
        return None if self.keeper is None else self.keeper.guard_due()

    def record_response(self, key: str, response: ModelResponse) -> Awaitable[None] | None:
        """Record a model response before anything acts on it (held back, sent ahead or
        written now: see the module docstring)."""
        if self._holding:  # modes "async" and "exit": the common durable case, one frame less
            self._hold(HeldResponse(key, response))
            return None
        return self._record(response_entry(key, response), wait=True)

    def recorded_outcome(self, key: str) -> tuple[str, bool] | None:
        """The (result, is_error) an earlier life recorded for the tool call ``key``."""
        entry = self.entry(key, "tool") if self._entries else None
        return None if entry is None else (entry.value["result"], entry.value["is_error"])

    def before_tool(self, side_effects: bool) -> Awaitable[None] | None:
        """Before a tool runs: a tool with side effects is about to act on the responses
        before it, so they are made durable (in mode ``"sync"``); then the lease's guard."""
        if side_effects and not self._holding:
            if self._held:
                writing = self._writing(self.take_held())
                if writing is not None:
                    return self._then_guard(writing)
            elif self._confirm is not None:
                return self._then_guard(self._confirmed())
        return None if self.keeper is None else self.keeper.guard_due()

    def record_outcome(
        self, key: str, text: str, is_error: bool, side_effects: bool
    ) -> Awaitable[None] | None:
        """Record a tool call's outcome. The framework's own tool (an agent, ask_user) did
        what it did through the journal and the requests: its result may wait like a model
        response. Any other is written the moment it exists."""
        if self._holding:
            self._hold(HeldOutcome(key, text, is_error))
            return None
        entry = JournalEntry(key=key, kind="tool", value={"result": text, "is_error": is_error})
        return self._record(entry, wait=not side_effects)

    async def _then_guard(self, waiting: Awaitable[Any]) -> None:
        await waiting
        guarding = None if self.keeper is None else self.keeper.guard_due()
        if guarding is not None:
            await guarding

    async def _confirmed(self) -> None:
        assert self._confirm is not None
        with anyio.CancelScope(shield=True):
            await self._confirm()

    async def wrap_step(self, step: StepCall, call_next: CallNext[StepCall, Any]) -> Any:
        """Replay a recorded step (its function does not run): its result, or the error it
        raised; or run it and record what it gave before the tool goes on."""
        entry = self.entry(step.key, "step")
        if entry is not None:
            if "error" in entry.value:
                raise replayed_failure(step.name, entry.value["error"])
            return entry.value["result"]
        if not self._holding:
            await self.flush()
        guarding = None if self.keeper is None else self.keeper.guard_due()
        if guarding is not None:
            await guarding
        try:
            value = await call_next(step)
        except Exception as e:
            # A failed attempt is a fact too: a tool that catches it and tries again must
            # see the same failure, then the same next attempt, when the run is replayed.
            await self.put(JournalEntry(key=step.key, kind="step", value=failure_value(e)))
            raise
        try:
            stored = json.loads(dump_json(value))
        except (TypeError, ValueError) as e:
            raise UserError(
                f"step {step.name!r} returned {type(value).__name__}, which cannot be journaled "
                f"as JSON ({e}); return JSON data from a step"
            ) from None
        await self.put(JournalEntry(key=step.key, kind="step", value={"result": stored}))
        return stored

    # -- conversations and aliases -------------------------------------------------------
    def conversation(self, key: str) -> list[Message] | None:
        """The kept conversation of a ``per_run`` sub-agent, as of its last finished call."""
        entry = self.entry(f"{key}#conversation", "conversation")
        if entry is None:
            return None
        return message_adapter().validate_python(entry.value)

    async def record_conversation(self, key: str, messages: list[Message]) -> None:
        """Record a ``per_run`` sub-agent's conversation after a finished call."""
        value = message_adapter().dump_python(messages, mode="json")
        await self.put(JournalEntry(key=f"{key}#conversation", kind="conversation", value=value))

    async def put(self, entry: JournalEntry) -> None:
        """Write an entry, with the entries held back before it in one transaction (it lands
        even while the run is being cancelled: the fact it records has happened)."""
        writing = self._put_soon(entry)
        if writing is not None:
            await writing

    def _put_soon(self, entry: JournalEntry) -> Awaitable[None] | None:
        """``put``: None when written at once, else what to await until it is durable."""
        if self._holding:
            self._hold(entry)
            return None
        if self._held:
            entries = self.take_held()
            entries.append(entry)
        else:
            entries = [entry]  # nothing held: the held list is neither taken nor replaced
        writing = self._writing(entries)
        if writing is None:
            self._keep(entry)
            return None
        return self._kept_after(writing, entry)

    async def _kept_after(self, writing: Awaitable[Any], entry: JournalEntry) -> None:
        await writing
        self._keep(entry)

    def _record(self, entry: JournalEntry, *, wait: bool) -> Awaitable[None] | None:
        """Record ``entry``: held back when it may ``wait`` for what acts on it and the
        store writes several in one transaction, sent ahead where the store can (it is
        confirmed before anything acts on it), else written now."""
        if self._holding:
            self._hold(entry)
            return None
        if wait and self.holds_for is not None:
            if self._held is None:
                self._held = [entry]
            else:
                self._held.append(entry)
        elif self._send_now is None or not self._send_now(self.run_id, entry):
            return self._put_soon(entry)
        self._keep(entry)
        return None

    def _hold(self, entry: JournalEntry | Held) -> None:
        """Hold ``entry`` back (modes ``"exit"`` and ``"async"``), waking ``write_behind``
        (or handing it to the store's writer, ``behind``)."""
        if self.behind is not None:
            self.behind.add(entry)  # made into its entry when the writer takes it
        else:
            if self._failure is not None:
                raise self._failure  # the writer behind the run failed: the run fails with it
            if self._held is None:
                self._held = [entry]
            else:
                self._held.append(entry)
        # Checked here: ``_hold`` is called for every fact (a held one is write-only).
        if entry.kind not in _WRITE_ONLY and isinstance(entry, JournalEntry):
            self._keep(entry)
        if self._wake is not None:
            self._wake.set()

    async def write_behind(self) -> None:
        """Mode ``"async"``: write what is held, as it comes, while the run goes on (run in
        a task beside the run, ``StoreSession.held``; each batch in one transaction). A
        failed write is raised by the run's next fact, and at its end (``settled``)."""
        while True:
            while not self._held:
                self._wake = anyio.Event()
                await self._wake.wait()
            self._wake = None
            self._in_flight = done = anyio.Event()
            try:
                await self.write_held(self.take_held())
            except Exception as e:
                self._failure = e
                return
            finally:
                self._in_flight = None
                done.set()

    async def settled(self) -> None:
        """Wait until no write of ``write_behind`` is under way (what is held then goes
        after what it writes: a question or the run's end never commits before the facts
        before it); raise the error it failed with, if it did."""
        if self.behind is not None:
            await self.behind.settle()
            return
        while self._in_flight is not None:
            await self._in_flight.wait()
        if self._failure is not None:
            raise self._failure

    def settling(self) -> Awaitable[None] | None:
        """``settled``, done at once when no write is under way: None (no coroutine, and
        no shielded scope around it at a run's end); else what to await."""
        if self.behind is not None:
            return self.behind.settle_now()
        if self._in_flight is not None:
            return self.settled()
        if self._failure is not None:
            raise self._failure
        return None

    def _keep(self, entry: JournalEntry) -> None:
        """Keep ``entry`` if this life looks it up again: an alias, a kept conversation, a
        step. A model response or a tool result is looked up by its key once, before it is
        made, so one written in this life is never read here again; kept, it held ~0.6 KB
        per turn of every run in flight (docs/performance.md, "What an in-flight run
        holds")."""
        if entry.kind not in _WRITE_ONLY:
            if self._entries is _NO_ENTRIES:
                self._entries = {}
            self._entries[entry.key] = entry

    def take_held(self) -> list[JournalEntry]:
        """The model responses held back so far, handed over to be written (cleared here).

        A model response is written before anything outside the framework acts on it: before
        a tool's function or a journaled step runs, with the next entry written, with a
        request (``StoreRequests``), or with the run's final record (``StoreSession``). A
        nested agent's own start acts on nothing, so its parent's response can wait for it.
        """
        if self.behind is not None:
            return self.behind.take()
        held, self._held = self._held, None
        if held is None:
            return []
        return [e if isinstance(e, JournalEntry) else e.entry() for e in held]

    async def flush(self) -> None:
        """Make every entry so far durable: write those held back (one transaction), or
        wait for the confirmation of those sent ahead."""
        if self._held:
            writing = self._writing(self.take_held())
            if writing is not None:
                await writing
        elif self._confirm is not None:
            await self._confirmed()

    async def write_held(self, entries: list[JournalEntry]) -> None:
        """Write entries taken with ``take_held`` (one transaction)."""
        writing = self._writing(entries)
        if writing is not None:
            await writing

    def _writing(self, entries: list[JournalEntry]) -> Awaitable[Any] | None:
        """Write ``entries`` (one transaction): None when they are written already (at once
        on the event loop), else what to await until they are durable. Not a coroutine: the
        write made at once costs no coroutine, and a write that waits one frame less (each
        is kept alive across the wait, by every run in flight)."""
        if self._group is not None:
            # Committed once queued, even if the wait is cancelled.
            waiter = self._group.journal_group(self.run_id, entries)
            if waiter is not None:
                return waiter
        if len(entries) == 1:
            if self._write_now is not None and self._write_now.journal_put_nowait(
                self.run_id, entries[0]
            ):
                return None
        elif self.holds_for is not None and self.holds_for.journal_put_many_nowait(
            self.run_id, entries
        ):
            return None
        return self._write_later(entries)

    async def _write_later(self, entries: list[JournalEntry]) -> None:
        with anyio.CancelScope(shield=True):
            if len(entries) == 1:
                await self.store.journal_put(self.run_id, entries[0])
            else:
                await self._put_many(entries)

    async def _put_many(self, entries: list[JournalEntry]) -> None:
        batches = self.capabilities.batches
        if batches is None:
            for entry in entries:
                await self.store.journal_put(self.run_id, entry)
        else:
            await batches.journal_put_many(self.run_id, entries)
