"""Permission requests: which calls need the human's approval, and the decisions.

A tool built with ``requires_approval=True`` (or a policy callable on its arguments) emits a
``PermissionRequest`` before it runs and waits. ``Approve(scope="once")`` lets this call run,
``Approve(scope="run")`` lets every later call of that tool by that agent run for the rest of
the root run, and ``Deny(reason=...)`` keeps the tool from running: the model gets the denial
as the tool's result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ._core.requests import Asker, RequestSpec, RequestTable
from ._values.vocabulary import APPROVE_RUN_WORDS, APPROVE_WORDS, REJECT_WORDS, normalise
from .events import Event, PermissionRequest, PermissionResolved, RequestEvent, RequestStatus
from .text import shown

__all__ = ["Approve", "Decision", "Deny", "PermissionSpec", "to_decision"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Approve:
    """Let the tool run: this call only (``"once"``) or for the rest of the run (``"run"``)."""

    scope: Literal["once", "run"] = "once"
    kind: Literal["approve"] = "approve"


@dataclass(frozen=True, kw_only=True, slots=True)
class Deny:
    """Keep the tool from running; ``reason`` is passed to the model."""

    reason: str = ""
    kind: Literal["deny"] = "deny"


Decision = Approve | Deny
"""An answer to a ``PermissionRequest``."""


def to_decision(answer: Any) -> Decision:
    """An answer to a permission request as a ``Decision``: ``Approve``/``Deny``, a bool, their
    JSON form (``{"kind": "approve", "scope": ...}``), or a word (yes, always, no, ...).

    Raises:
        ValueError, TypeError: It is neither an approval nor a denial.
    """
    if isinstance(answer, (Approve, Deny)):
        return answer
    if isinstance(answer, bool):
        return Approve() if answer else Deny()
    if isinstance(answer, dict):
        data: dict[str, Any] = answer  # type: ignore[assignment]
        kind = data.get("kind")
        if kind == "approve" and data.get("scope", "once") in ("once", "run"):
            return Approve(scope=data.get("scope", "once"))
        if kind == "deny":
            return Deny(reason=str(data.get("reason", "")))
        raise ValueError('expected {"kind": "approve", "scope": "once"|"run"} or {"kind": "deny"}')
    if isinstance(answer, str):
        word = normalise(answer)
        if word in APPROVE_WORDS:
            return Approve()
        if word in APPROVE_RUN_WORDS:
            return Approve(scope="run")
        if word in REJECT_WORDS:
            return Deny()
        raise ValueError(f"{shown(answer)} is neither an approval nor a denial")
    raise TypeError(f"expected Approve, Deny or bool, got {type(answer).__name__}")


class PermissionSpec(RequestSpec):
    """The request asking whether ``tool_name`` may run with ``arguments``."""

    __slots__ = ("arguments", "tool_name")

    def __init__(self, tool_name: str, arguments: dict[str, Any]) -> None:
        self.tool_name = tool_name
        self.arguments = arguments

    def build(self, *, request_id: str, asker: Asker) -> RequestEvent:
        return PermissionRequest(
            run_id=asker.run_id,
            agent_path=asker.agent_path,
            depth=asker.depth,
            invocation_id=asker.invocation_id,
            request_id=request_id,
            tool_name=self.tool_name,
            arguments=self.arguments,
            tool_call_id=asker.tool_call_id,
        )

    def validate(self, answer: Any) -> Decision:
        return to_decision(answer)

    def resolved(self, request: RequestEvent, status: RequestStatus, answer: Any) -> Event:
        approved = isinstance(answer, Approve)
        return PermissionResolved(
            run_id=request.run_id,
            agent_path=request.agent_path,
            depth=request.depth,
            invocation_id=request.invocation_id,
            request_id=request.request_id,
            tool_name=self.tool_name,
            status=status,
            approved=approved,
            scope=answer.scope if isinstance(answer, Approve) else None,
            reason=answer.reason if isinstance(answer, Deny) else None,
        )

    def after_answer(self, table: RequestTable, request: RequestEvent, answer: Any) -> None:
        if isinstance(answer, Approve) and answer.scope == "run":
            key = (request.agent_path, self.tool_name)
            table.run_approvals.add(key)
            # Parallel calls of the same tool may be waiting too: the approval covers them.
            table.resolve_matching(
                lambda e: isinstance(e, PermissionRequest) and (e.agent_path, e.tool_name) == key,
                Approve(scope="run"),
                table.author_of(request.request_id),
            )
