"""Permission requests: which calls need the human's approval, and the decisions.

A tool built with ``requires_approval=True`` (or a policy callable on its arguments) emits a
``PermissionRequest`` before it runs and waits. ``Approve(scope="once")`` lets this call run,
``Approve(scope="run")`` lets every later call of that tool by that agent run for the rest of
the root run, and ``Deny(reason=...)`` keeps the tool from running: the model gets the denial
as the tool's result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .coordinator import Coordinator, RequestSpec
from .events import Event, PermissionRequest, PermissionResolved, RequestEvent, RequestStatus
from .exceptions import QuestionNotAnswered

if TYPE_CHECKING:
    from ._context import ToolContext

__all__ = ["Approve", "Decision", "Deny", "ask_permission"]


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

_APPROVE_WORDS = {"y", "yes", "approve", "approved", "allow", "ok", "once"}
_RUN_WORDS = {"always", "run", "approve for run", "yes to all", "all"}
_DENY_WORDS = {"n", "no", "deny", "denied", "reject"}


def _to_decision(answer: Any) -> Decision:
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
        word = answer.strip().casefold()
        if word in _APPROVE_WORDS:
            return Approve()
        if word in _RUN_WORDS:
            return Approve(scope="run")
        if word in _DENY_WORDS:
            return Deny()
        raise ValueError(f"{answer!r} is neither an approval nor a denial")
    raise TypeError(f"expected Approve, Deny or bool, got {type(answer).__name__}")


class _PermissionSpec(RequestSpec):
    __slots__ = ("arguments", "tool_name")

    def __init__(self, tool_name: str, arguments: dict[str, Any]) -> None:
        self.tool_name = tool_name
        self.arguments = arguments

    def build(self, *, request_id: str, ctx: ToolContext) -> RequestEvent:
        return PermissionRequest(
            run_id=ctx.run_id,
            agent_path=ctx.agent_path,
            depth=ctx.depth,
            request_id=request_id,
            tool_name=self.tool_name,
            arguments=self.arguments,
            tool_call_id=ctx.tool_call_id,
        )

    def validate(self, answer: Any) -> Decision:
        return _to_decision(answer)

    def resolved(self, request: RequestEvent, status: RequestStatus, answer: Any) -> Event:
        approved = isinstance(answer, Approve)
        return PermissionResolved(
            run_id=request.run_id,
            agent_path=request.agent_path,
            depth=request.depth,
            request_id=request.request_id,
            tool_name=self.tool_name,
            status=status,
            approved=approved,
            scope=answer.scope if isinstance(answer, Approve) else None,
            reason=answer.reason if isinstance(answer, Deny) else None,
        )

    def after_answer(self, coordinator: Coordinator, request: RequestEvent, answer: Any) -> None:
        if isinstance(answer, Approve) and answer.scope == "run":
            key = (request.agent_path, self.tool_name)
            coordinator.run_approvals.add(key)
            # Parallel calls of the same tool may be waiting too: the approval covers them.
            coordinator.resolve_matching(
                lambda e: isinstance(e, PermissionRequest) and (e.agent_path, e.tool_name) == key,
                Approve(scope="run"),
            )


async def ask_permission(
    ctx: ToolContext,
    tool_name: str,
    arguments: dict[str, Any],
    *,
    timeout: float | None = None,
) -> str | None:
    """Ask the human whether ``tool_name`` may run with ``arguments``.

    Returns:
        None when the call may run; otherwise the text the model gets instead of the result.
    """
    coordinator = ctx.coordinator
    if (ctx.agent_path, tool_name) in coordinator.run_approvals:
        return None
    try:
        decision = await coordinator.request(
            ctx, _PermissionSpec(tool_name, arguments), timeout=timeout
        )
    except QuestionNotAnswered as e:
        return f"The tool {tool_name!r} did not run: it needs the user's approval. {e}"
    if isinstance(decision, Deny):
        reason = f" Reason: {decision.reason}" if decision.reason else ""
        return f"The user denied permission to run {tool_name!r}.{reason}"
    return None
