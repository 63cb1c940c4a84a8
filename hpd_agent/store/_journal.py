"""A run's journal: what the loop records as it goes, and what a resumed run replays.

The loop asks the journal before each model call (key ``f"{scope_path}@{turn}"``) and each
tool call (key: the tool's ``call_path``); a hit returns the recorded response or result and
nothing runs. Requests go through ``Journal.request``: the request is written to the store
before its event goes out, answers from any process wake the waiter, and a replay that
reaches a request it raised before finds it in the store under the same id (still pending,
or already resolved: then it returns at once).

Replayed facts are emitted again, marked ``replayed=True`` (text of a recorded model turn,
start and end of a recorded tool call, a request resolved in an earlier life with its
resolution), so a UI that reconnects can rebuild the whole run; work actually done now is
emitted as usual.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .._text import error_text
from ..events import Event
from ..exceptions import QuestionNotAnswered, RequestError, UserError
from ..messages import Message, ToolCall, Usage, message_adapter
from ..models import ModelResponse
from ._answers import jsonable, respond, validate_stored
from ._base import (
    JournalEntry,
    RequestRecord,
    RequestState,
    RunRecord,
    RunState,
    Store,
    check_entries,
    refusal,
)

if TYPE_CHECKING:
    from .._context import ToolContext
    from ..coordinator import Coordinator, RequestSpec, _Pending
    from ..run import RunResult

__all__ = ["Journal", "RunOpener"]


def _replayed(event: Event) -> Event:
    return dataclasses.replace(event, replayed=True)


class Journal:
    """The journal of one root run in a store; built by ``Agent.run/stream/resume``.

    Args:
        store: Where it lives.
        run_id: The root run.
        entries: What an earlier life of the run recorded (empty for a new run).
    """

    __slots__ = ("_busy", "_entries", "_parked", "coordinator", "run", "run_id", "store")

    def __init__(
        self, store: Store, run: RunRecord, entries: Mapping[str, JournalEntry] | None = None
    ) -> None:
        self.store = store
        self.run = run
        self.run_id = run.run_id
        self._entries = dict(entries or {})
        self.coordinator: Coordinator | None = None
        # Interrupt waits until the run is quiescent: every live model call and tool call
        # has finished or is parked on an unanswerable request. A sibling that is about to
        # finish its side effect gets to finish (and be journaled) instead of being cut off.
        self._busy = 0
        self._parked = 0

    def enter(self, n: int = 1) -> None:
        """``n`` live model calls or tool calls start (a batch's calls count from the start)."""
        self._busy += n

    def leave(self) -> None:
        """A live model call or tool execution ended (or handed over to a nested agent)."""
        self._busy -= 1
        self._check_quiescent()

    def _check_quiescent(self) -> None:
        coordinator = self.coordinator
        if self._parked and self._parked >= self._busy and coordinator is not None:
            coordinator.interrupt()

    @property
    def replaying(self) -> bool:
        """Whether an earlier life of the run recorded anything."""
        return bool(self._entries)

    # -- model and tool calls ------------------------------------------------------------
    def model_response(self, key: str) -> ModelResponse | None:
        """The recorded model response for ``key``, or None."""
        entry = self._entries.get(key)
        if entry is None or entry.kind != "model":
            return None
        v: dict[str, Any] = entry.value
        return ModelResponse(
            text=v.get("text"),
            tool_calls=tuple(ToolCall(**c) for c in v.get("tool_calls", ())),
            usage=Usage(**v.get("usage", {})),
            streamed=True,
        )

    async def model_call(
        self, key: str, request: Callable[[], Awaitable[ModelResponse]]
    ) -> tuple[ModelResponse, bool]:
        """The model call at ``key``: replayed from the journal, or made and then recorded.

        Returns:
            The response, and whether it was replayed (the model was not called).
        """
        response = self.model_response(key)
        if response is not None:
            return response, True
        self.enter()
        try:
            response = await request()
        finally:
            self.leave()
        await self.record_model(key, response)
        return response, False

    async def record_model(self, key: str, response: ModelResponse) -> None:
        """Record a model response before the loop acts on it."""
        value = {
            "text": response.text,
            "tool_calls": [dataclasses.asdict(c) for c in response.tool_calls],
            "usage": dataclasses.asdict(response.usage),
        }
        await self._put(JournalEntry(key=key, kind="model", value=value))

    def tool_result(self, key: str) -> tuple[str, bool] | None:
        """The recorded (result text, is_error) of the tool call at ``key``, or None."""
        entry = self._entries.get(key)
        if entry is None or entry.kind != "tool":
            return None
        return entry.value["result"], entry.value["is_error"]

    async def record_tool(self, key: str, result: str, is_error: bool) -> None:
        """Record a tool call's result as soon as it exists (before its siblings finish)."""
        await self._put(
            JournalEntry(key=key, kind="tool", value={"result": result, "is_error": is_error})
        )

    def conversation(self, key: str) -> list[Message] | None:
        """The kept conversation of a ``per_run`` sub-agent, as of its last finished call."""
        entry = self._entries.get(f"{key}#conversation")
        if entry is None or entry.kind != "conversation":
            return None
        return message_adapter().validate_python(entry.value)

    async def record_conversation(self, key: str, messages: list[Message]) -> None:
        """Record a ``per_run`` sub-agent's conversation after a finished call."""
        value = message_adapter().dump_python(messages, mode="json")
        await self._put(JournalEntry(key=f"{key}#conversation", kind="conversation", value=value))

    async def _put(self, entry: JournalEntry) -> None:
        # A journal write must land even if the run is being cancelled right now: the
        # side effect it records has happened.
        with anyio.CancelScope(shield=True):
            await self.store.journal_put(self.run_id, entry)
        self._entries[entry.key] = entry

    async def restore(self, coordinator: Coordinator) -> None:
        """Bring back run-wide state an earlier life built: approvals "for the run".

        A tool call whose result is journaled is not re-run, so the permission request it
        made is not re-asked either; its run-wide approval is restored from the store.
        """
        for record in await self.store.list_requests(run_id=self.run_id, status="answered"):
            answer: Any = record.answer
            if (
                record.kind == "permission"
                and isinstance(answer, dict)
                and answer.get("kind") == "approve"  # pyright: ignore[reportUnknownMemberType]
                and answer.get("scope") == "run"  # pyright: ignore[reportUnknownMemberType]
            ):
                tool_name = str(record.payload.get("tool_name"))
                coordinator.run_approvals.add((record.agent_path, tool_name))

    # -- run records -----------------------------------------------------------------------
    async def finish_run(self, result: RunResult) -> None:
        """Write how the run ended to its run record."""
        status: RunState = result.status  # type: ignore[assignment]
        error = None if result.error is None else error_text(result.error)
        self.run = dataclasses.replace(
            self.run, status=status, output=result.output, error=error, updated_at=time.time()
        )
        with anyio.CancelScope(shield=True):
            await self.store.put_run(self.run)

    # -- requests --------------------------------------------------------------------------
    async def write_answer(self, request_id: str, value: Any) -> None:
        """Write an in-process answer through the store (its conditional update decides)."""
        await self.store.resolve(request_id, "answered", jsonable(value))

    async def request(
        self,
        coordinator: Coordinator,
        ctx: ToolContext,
        spec: RequestSpec,
        request_id: str,
        timeout: float | None,
    ) -> Any:
        """``Coordinator.request`` for a run with a store (see the module docstring)."""
        alias = self._entries.get(request_id)
        if alias is not None and alias.kind == "alias":
            return await self._follow(coordinator, ctx, spec, alias.value, timeout)
        event = spec.build(request_id=request_id, ctx=ctx)
        duplicate = coordinator.find_duplicate(event)
        if duplicate is not None:
            first = duplicate.event.request_id
            await self._put(JournalEntry(key=request_id, kind="alias", value=first))
            return await self._join(coordinator, duplicate, ctx, timeout)
        # Tracked before the store write (which yields), so an identical question asked
        # meanwhile by a sibling joins this one instead of racing it.
        pending = coordinator.track(event, spec)
        try:
            record = await self.store.add_request(RequestRecord.from_event(event, timeout=timeout))
        except BaseException:
            _settle_quietly(pending, "cancelled", None)
            raise
        if record.status != "pending":
            try:
                value = self._settled(coordinator, spec, event, record)
            except QuestionNotAnswered:
                _settle_quietly(pending, record.status, None)
                raise
            _settle_quietly(pending, "answered", value)
            return value
        remaining = timeout
        if record.expires_at is not None:
            # A replay keeps the original deadline: waiting restarts with what was left.
            remaining = max(0.0, record.expires_at - time.time())
        coordinator.emit(event)
        parks = not coordinator.listening and coordinator.on_unhandled == "interrupt"

        async def from_store(p: _Pending) -> None:
            self._apply(coordinator, p, await self.store.wait_resolved(request_id))

        if parks:
            self._parked += 1
            self._check_quiescent()
        try:
            await coordinator.wait(pending, ctx, remaining, external=from_store)
        except BaseException:
            if coordinator.cancelling and not pending.stored:
                with anyio.CancelScope(shield=True):
                    await self._mirror(coordinator, pending, "cancelled", None)
            raise
        finally:
            if parks:
                self._parked -= 1
        if pending.status == "pending":
            await self._mirror(coordinator, pending, "expired", None)
        elif not pending.stored:
            status: RequestState = (
                "cancelled" if pending.status == "unavailable" else pending.status
            )
            await self._mirror(coordinator, pending, status, pending.answer)
        return coordinator.outcome(pending, timeout)

    async def _join(
        self,
        coordinator: Coordinator,
        pending: _Pending,
        ctx: ToolContext,
        timeout: float | None,
    ) -> Any:
        """Wait for an identical request's answer; parked like it under "interrupt"."""
        parks = not coordinator.listening and coordinator.on_unhandled == "interrupt"
        if parks:
            self._parked += 1
            self._check_quiescent()
        try:
            return await coordinator.join(pending, ctx, timeout)
        finally:
            if parks:
                self._parked -= 1

    async def _mirror(
        self,
        coordinator: Coordinator,
        pending: _Pending,
        status: Literal["answered", "expired", "cancelled"],
        answer: Any,
    ) -> None:
        """Write an outcome reached in this process to the store; the store's wins a race."""
        rid = pending.event.request_id
        try:
            value = jsonable(answer) if status == "answered" else None
            await self.store.resolve(rid, status, value)
        except RequestError:
            record = await self.store.get_request(rid)
            if record is not None and pending.status == "pending":
                self._apply(coordinator, pending, record)
            return
        pending.stored = True
        if pending.status == "pending":
            coordinator._finish(pending, status, answer)

    def _apply(self, coordinator: Coordinator, pending: _Pending, record: RequestRecord) -> None:
        """Resolve ``pending`` as the store says it was resolved."""
        if pending.status != "pending" or record.status == "pending":
            return
        pending.stored = True
        if record.status == "answered":
            value = _revive(pending.spec, record.answer)
            coordinator._finish(pending, "answered", value)
            pending.spec.after_answer(coordinator, pending.event, value)
        else:
            coordinator._finish(pending, record.status, None)

    def _settled(
        self, coordinator: Coordinator, spec: RequestSpec, event: Any, record: RequestRecord
    ) -> Any:
        """A request resolved in an earlier life (or meanwhile, from another process)."""
        coordinator.emit(_replayed(event))
        if record.status == "answered":
            value = _revive(spec, record.answer)
            coordinator.emit(_replayed(spec.resolved(event, "answered", value)))
            spec.after_answer(coordinator, event, value)
            return value
        coordinator.emit(_replayed(spec.resolved(event, record.status, None)))  # type: ignore[arg-type]
        if record.status == "expired":
            if record.expires_at is not None:
                waited = f"within {round(record.expires_at - record.created_at, 3):g} seconds"
            else:
                waited = "in time"
            message = f"The user did not answer {waited}; the question expired."
        else:
            message = "The request was cancelled before the user answered."
        raise QuestionNotAnswered(message, status=record.status, request_id=record.id)

    async def _follow(
        self,
        coordinator: Coordinator,
        ctx: ToolContext,
        spec: RequestSpec,
        first: str,
        timeout: float | None,
    ) -> Any:
        """A replayed asker that had joined an identical question: share its outcome again."""
        for pending in coordinator.pending():
            if pending.request_id == first:
                return await self._join(coordinator, coordinator._requests[first], ctx, timeout)
        record = await self.store.get_request(first)
        if record is not None and record.status == "pending":
            # The first asker has not reached its request yet in this life; wait for the
            # store, counted as parked so an interrupt is not held up by this wait.
            parks = not coordinator.listening and coordinator.on_unhandled == "interrupt"
            if parks:
                self._parked += 1
                self._check_quiescent()
            try:
                record = await self.store.wait_resolved(first)
            finally:
                if parks:
                    self._parked -= 1
        if record is None:
            raise QuestionNotAnswered(
                "The request was lost before the user answered.",
                status="cancelled",
                request_id=first,
            )
        event = record.event
        return self._settled(coordinator, spec, event, record)


def _settle_quietly(pending: _Pending, status: Any, answer: Any) -> None:
    """Resolve a tracked request whose outcome was already announced (or never will be)."""
    if pending.status == "pending":
        pending.status = status
        pending.answer = answer
        pending.stored = True
        pending.done.set()


def _revive(spec: RequestSpec, stored: Any) -> Any:
    """An answer as the asking tool expects it (e.g. a stored object back to ``Approve``)."""
    try:
        return spec.validate(stored)
    except (ValueError, TypeError):
        return stored


class RunOpener:
    """Opens a root run's journal in a store: a new run's record, or an earlier life's."""

    __slots__ = ("agent_name", "agent_ref", "entries", "history", "prompt", "record", "store")

    def __init__(
        self,
        store: Store,
        agent_name: str,
        prompt: str,
        history: Sequence[Message] | None,
        *,
        agent_ref: str | None = None,
    ) -> None:
        self.store = store
        self.agent_name = agent_name
        self.agent_ref = agent_ref
        self.prompt = prompt
        self.history = list(history) if history else None
        self.record: RunRecord | None = None
        self.entries: dict[str, JournalEntry] | None = None

    @classmethod
    async def for_resume(
        cls,
        store: Store,
        agent_name: str,
        run_id: str,
        answers: Mapping[str, Any] | None,
        max_age: float | None,
    ) -> RunOpener:
        record = await store.get_run(run_id)
        if record is None:
            raise UserError(f"no run {run_id!r} in {store!r}")
        if record.agent_name != agent_name:
            raise UserError(
                f"run {run_id!r} was started by agent {record.agent_name!r}, not {agent_name!r}: "
                "resume it with the same agent"
            )
        if max_age is not None:
            await store.recover(max_age, run_id=run_id)
        answers = dict(answers or {})
        # Every answer is checked before any is written: a refused one changes nothing.
        for request_id, answer in answers.items():
            stored = await store.get_request(request_id)
            if stored is not None and stored.run_id != run_id:
                raise UserError(
                    f"request {request_id} belongs to run {stored.run_id}, not {run_id}"
                )
            if stored is None or stored.status != "pending":
                raise refusal(stored, request_id)
            validate_stored(stored, answer)
        for request_id, answer in answers.items():
            await respond(store, request_id, answer, context={"channel": "resume"})
        history = message_adapter().validate_python(list(record.history)) or None
        opener = cls(store, agent_name, record.prompt, history)
        opener.record = record
        opener.entries = check_entries(run_id, await store.journal(run_id))
        return opener

    async def open(self, coordinator: Coordinator) -> Journal:
        if self.record is None:
            if await self.store.get_run(coordinator.run_id) is not None:
                raise UserError(
                    f"run {coordinator.run_id!r} is already in {self.store!r}: "
                    "use resume() to continue it, or pick a new run_id"
                )
            history = message_adapter().dump_python(self.history or [], mode="json")
            self.record = RunRecord(
                run_id=coordinator.run_id,
                agent_name=self.agent_name,
                prompt=self.prompt,
                history=history,
                agent_ref=self.agent_ref,
            )
        else:
            self.record = dataclasses.replace(self.record, status="running", updated_at=time.time())
        await self.store.put_run(self.record)
        journal = Journal(self.store, self.record, self.entries)
        journal.coordinator = coordinator
        coordinator.journal = journal
        if journal.replaying:
            await journal.restore(coordinator)
        return journal
