"""The records a store keeps: requests, run journals and runs (the ``Store`` protocol that
keeps them is in ``_protocol``).

A store is what makes a run outlive its process. It holds three things:

- **requests**: every question or permission request a run raised, with its status
  (``pending``, ``answered``, ``declined``, ``expired``, ``cancelled``) and answer. ``respond`` is an atomic
  conditional update, so two processes answering at once cannot both win.
- **the journal**: what a run already did, keyed by call path (model responses by
  ``f"{scope_path}@{turn}"``, tool results by the tool's ``call_path``). Answers are journaled
  by request id in the requests themselves. ``Agent.resume`` replays it.
- **runs**: one record per root run (status, prompt, agent name, output).

Every value crosses the store as JSON; events use ``event_adapter()`` and messages
``message_adapter()``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from .._values.records import RequestRecord, RequestState
from ..exceptions import (
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestError,
    RequestExpiredError,
    StoreCorruptError,
    UnknownRequestError,
)

__all__ = [
    "JournalEntry",
    "Lease",
    "RequestRecord",
    "RequestState",
    "RunRecord",
    "RunState",
    "check_entries",
    "dump_json",
    "entry_problem",
    "refusal",
]

RunState = Literal["running", "completed", "failed", "cancelled", "interrupted"]
"""Where a stored run stands; ``running`` also describes a run whose process died."""

JournalKind = Literal["model", "tool", "alias", "conversation", "step", "warning"]


def dump_json(value: Any) -> str:
    """JSON text of an answer, payload or context (dataclasses become objects).

    Text holding lone surrogates (a model can send ``"\\ud800"``) cannot be UTF-8; it is
    written as ASCII JSON with ``\\uXXXX`` escapes instead, so the write never fails and
    reads back the same.
    """
    try:
        return to_json(value).decode()
    except PydanticSerializationError as e:
        if "surrogate" not in str(e):
            raise
        return json.dumps(to_jsonable_python(value), ensure_ascii=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class JournalEntry:
    """One journaled fact of a run.

    Attributes:
        key: The call path it belongs to (see the module docstring).
        kind: ``"model"`` (a model response), ``"tool"`` (a tool result), ``"alias"`` (a
            question that joined an identical pending one: value is that one's id) or
            ``"conversation"`` (a ``per_run`` sub-agent's messages after its last call) or ``"step"`` (the result of a tool's journaled ``ctx.step``) or ``"warning"`` (a request's
            expiry warning went out: key ``<request id>!warning``, value when, in epoch seconds).
        value: JSON-compatible data.
    """

    key: str
    kind: JournalKind
    value: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """A root run as a store keeps it.

    Attributes:
        run_id: The run's id.
        agent_name: The root agent's name (``resume`` checks it).
        agent_ref: Where the root agent is found, as ``module:attribute`` (of the Agent, or
            of a callable returning it), when known; ``hpd-agent resume`` loads it from here
            and refuses an ``--agent`` that differs.
        prompt: The prompt the run started with.
        history: Earlier messages it continued from, as ``message_adapter()`` JSON.
        status: ``running``, ``completed``, ``failed``, ``cancelled`` or ``interrupted``.
        output: The final answer, once completed.
        error: What failed it, if it failed.
        created_at: When it started.
        updated_at: When its status last changed.
    """

    run_id: str
    agent_name: str
    prompt: str
    history: Sequence[Any] = ()
    status: RunState = "running"
    output: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    agent_ref: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Lease:
    """Who drives a run: the holder of its lease (see ``hpd_agent.store._lease``).

    Attributes:
        run_id: The run.
        holder: The driving process's id, ``host:pid:random[:place:start]`` (one per
            session; see ``_holder``).
        expires_at: When the lease lapses unless renewed (seconds since the epoch).
        fence: The fencing token of this take of the lease: it only grows from take to
            take of a run's lease (0 from a store that keeps none; see ``_fence``).
    """

    run_id: str
    holder: str
    expires_at: float
    fence: int = 0


def _usage_fields() -> frozenset[str]:
    import dataclasses

    from ..messages import Usage

    return frozenset(f.name for f in dataclasses.fields(Usage))


def _model_entry_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "a model entry must be an object"
    entry = cast(dict[str, Any], value)
    if not isinstance(entry.get("text"), (str, type(None))):
        return "a model entry's text must be text or null"
    calls = entry.get("tool_calls", [])
    if not isinstance(calls, list):
        return "a model entry's tool_calls must be a list"
    if not isinstance(entry.get("finish_reason"), (str, type(None))):
        return "a model entry's finish_reason must be text or null"
    for call in cast(list[Any], calls):
        if not isinstance(call, dict) or not (
            {"id", "name", "arguments"}
            <= set(cast(dict[str, Any], call))
            <= {"id", "name", "arguments", "truncated"}
        ):
            return "each tool call must be an object with id, name and arguments"
        fields = cast(dict[str, Any], call)
        if not all(isinstance(fields[k], str) for k in ("id", "name", "arguments")):
            return "a tool call's id, name and arguments must be text"
        if not isinstance(fields.get("truncated", False), bool):
            return "a tool call's truncated must be true or false"
    usage = entry.get("usage", {})
    known = _usage_fields()
    if not isinstance(usage, dict) or not set(cast(dict[str, Any], usage)) <= known:
        return f"a model entry's usage must be an object with only {sorted(known)}"
    return None


def _step_entry_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "a step entry must be an object with a result or an error"
    entry = cast(dict[str, Any], value)
    if "result" in entry:
        return None
    error = entry.get("error")
    if isinstance(error, dict):
        fields = cast(dict[str, Any], error)
        if isinstance(fields.get("type"), str) and isinstance(fields.get("message"), str):
            return None
    return "a step entry must be an object with a result or an error (type and message)"


def entry_problem(kind: str, value: Any) -> str | None:
    """Why a journal entry of ``kind`` holding ``value`` cannot be replayed, or None."""
    if kind == "model":
        return _model_entry_problem(value)
    if kind == "tool":
        if not isinstance(value, dict):
            return "a tool entry must be an object"
        entry = cast(dict[str, Any], value)
        if not isinstance(entry.get("result"), str) or not isinstance(entry.get("is_error"), bool):
            return "a tool entry needs result (text) and is_error (true/false)"
        return None
    if kind == "alias":
        return None if isinstance(value, str) else "an alias entry must be a request id (text)"
    if kind == "conversation":
        return None if isinstance(value, list) else "a conversation entry must be a list"
    if kind == "step":
        return _step_entry_problem(value)
    if kind == "warning":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "a warning entry must be a number (when it went out)"
    return None  # a kind this check does not know: its reader checks it


def check_entries(run_id: str, entries: dict[str, JournalEntry]) -> dict[str, JournalEntry]:
    """``entries``, once each is known to be replayable (see ``entry_problem``).

    Raises:
        StoreCorruptError: Naming the run and the first bad entry's key.
    """
    for key, entry in entries.items():
        problem = entry_problem(entry.kind, entry.value)
        if problem is not None:
            raise StoreCorruptError(f"journal entry {key!r} of run {run_id}: {problem}")
    return entries


def refusal(record: RequestRecord | None, request_id: str) -> RequestError:
    """The error telling why ``request_id`` could not take an answer (it is not pending).

    Every store, and every other keeper of ``RequestRecord`` (a Temporal workflow), refuses
    an answer with it, so a caller sees the same error class whichever refused.

    Args:
        record: The request as found, or None if there is none with that id.
        request_id: The id the answer was for.

    Returns:
        ``UnknownRequestError``, ``RequestAlreadyAnsweredError`` (answered or declined),
        ``RequestExpiredError`` or ``RequestCancelledError`` (to raise).
    """
    if record is None:
        return UnknownRequestError(
            f"no request with id {request_id!r} in the store", request_id=request_id
        )
    if record.status == "answered":
        return RequestAlreadyAnsweredError(
            f"request {request_id} was already answered", request_id=request_id
        )
    if record.status == "declined":
        return RequestAlreadyAnsweredError(
            f"request {request_id} was declined: it takes no other answer", request_id=request_id
        )
    if record.status == "expired":
        return RequestExpiredError(
            f"request {request_id} expired before this answer came", request_id=request_id
        )
    return RequestCancelledError(f"request {request_id} was cancelled", request_id=request_id)
