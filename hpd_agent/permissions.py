"""Permission requests: which calls need the human's approval, and the decisions.

A tool built with ``requires_approval=True`` (or a policy callable on its arguments) emits a
``PermissionRequest`` before it runs and waits. ``Approve(scope="once")`` lets this call run,
``Approve(scope="run")`` lets every later call of that tool by that agent run for the rest of
the root run, ``Approve(scope="always")`` gives a remembered grant (``Grant``) that approves
that agent's later calls of the tool in any run on the same store (for a run kept nowhere:
in this process) until it expires or is revoked, and ``Deny(reason=...)`` keeps the tool
from running: the model gets the denial as the tool's result.

Grants are kept by a ``GrantBook``: the store's (``StoreCapabilities.grants``), else
``PROCESS_GRANTS`` for a run with no store. A call a live grant covers is approved without
asking; its request and resolution still go on the stream and into the store, answered by
``grant:<id>`` on channel ``"grant"``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic_core import SchemaSerializer, core_schema

from ._core.grants import (
    GRANT_CHANNEL,
    PROCESS_GRANTS,
    Grant,
    GrantBook,
    MemoryGrants,
    check_match,
    check_ttl,
    grant_author,
    grant_id_for,
    new_grant_id,
)
from ._core.requests import Asker, RequestSpec, RequestTable
from ._values.vocabulary import (
    APPROVE_ALWAYS_WORDS,
    APPROVE_RUN_WORDS,
    APPROVE_WORDS,
    REJECT_WORDS,
    normalise,
)
from .events import Event, PermissionRequest, PermissionResolved, RequestEvent, RequestStatus
from .text import shown

__all__ = [
    "GRANT_CHANNEL",
    "PROCESS_GRANTS",
    "Approve",
    "Decision",
    "Deny",
    "Grant",
    "GrantBook",
    "MemoryGrants",
    "PermissionSpec",
    "grant_author",
    "grant_for",
    "grant_id_for",
    "new_grant_id",
    "to_decision",
]

_SCOPES = ("once", "run", "always")


def _approve_json(value: Approve) -> dict[str, Any]:
    # match and ttl only when given: an approval once or for the run keeps its old form.
    data: dict[str, Any] = {"scope": value.scope, "kind": "approve"}
    if value.match is not None:
        data["match"] = dict(value.match)
    if value.ttl is not None:
        data["ttl"] = value.ttl
    return data


@dataclass(frozen=True, kw_only=True, slots=True)
class Approve:
    """Let the tool run: this call only (``"once"``), for the rest of the run (``"run"``),
    or from now on (``"always"``: a remembered grant, see the module docstring).

    Attributes:
        scope: How long the approval lasts.
        match: With ``"always"``: ``{"argument": "glob"}``, the grant covers only calls
            whose arguments fit (``fnmatch``, case-sensitive; a value that is not text is
            matched as its JSON text); None covers any arguments.
        ttl: With ``"always"``: seconds the grant lasts; None: until it is revoked.

    Raises:
        ValueError: An unknown scope, ``match`` or ``ttl`` without ``"always"``, or a
            malformed one.
    """

    scope: Literal["once", "run", "always"] = "once"
    match: Mapping[str, str] | None = None
    ttl: float | None = None
    kind: Literal["approve"] = "approve"

    # How a store, the web and every JSON path write it (``_approve_json``).
    __pydantic_serializer__: ClassVar[SchemaSerializer]

    def __post_init__(self) -> None:
        if self.scope not in _SCOPES:
            raise ValueError(f"scope must be 'once', 'run' or 'always', not {self.scope!r}")
        if self.scope != "always" and (self.match is not None or self.ttl is not None):
            raise ValueError('match and ttl belong to scope="always" (a remembered grant)')
        # Kept as a copy: the caller's dict changing later must not widen the grant.
        object.__setattr__(self, "match", check_match(self.match))
        object.__setattr__(self, "ttl", check_ttl(self.ttl))


Approve.__pydantic_serializer__ = SchemaSerializer(
    core_schema.any_schema(
        serialization=core_schema.plain_serializer_function_ser_schema(_approve_json)
    )
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Deny:
    """Keep the tool from running; ``reason`` is passed to the model."""

    reason: str = ""
    kind: Literal["deny"] = "deny"


Decision = Approve | Deny
"""An answer to a ``PermissionRequest``."""

_FORMS = (
    'expected {"kind": "approve", "scope": "once"|"run"|"always"} (with "always": '
    '"match": {"argument": "glob"} and "ttl": seconds, both optional) or {"kind": "deny"}'
)


def to_decision(answer: Any) -> Decision:
    """An answer to a permission request as a ``Decision``: ``Approve``/``Deny``, a bool, their
    JSON form (``{"kind": "approve", "scope": ...}``), or a word (yes, run, always, no, ...).

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
        if kind == "approve":
            scope = data.get("scope", "once")
            if scope not in _SCOPES:
                raise ValueError(_FORMS)
            return Approve(scope=scope, match=data.get("match"), ttl=data.get("ttl"))
        if kind == "deny":
            return Deny(reason=str(data.get("reason", "")))
        raise ValueError(_FORMS)
    if isinstance(answer, str):
        word = normalise(answer)
        if word in APPROVE_WORDS:
            return Approve()
        if word in APPROVE_RUN_WORDS:
            return Approve(scope="run")
        if word in APPROVE_ALWAYS_WORDS:
            return Approve(scope="always")
        if word in REJECT_WORDS:
            return Deny()
        raise ValueError(f"{shown(answer)} is neither an approval nor a denial")
    raise TypeError(f"expected Approve, Deny or bool, got {type(answer).__name__}")


class PermissionSpec(RequestSpec):
    """The request asking whether ``tool_name`` may run with ``arguments`` (``grant_id``: a
    remembered grant approves it as it is raised, see ``PermissionRequest.grant_id``)."""

    __slots__ = ("arguments", "grant_id", "tool_name")

    def __init__(
        self, tool_name: str, arguments: dict[str, Any], *, grant_id: str | None = None
    ) -> None:
        self.tool_name = tool_name
        self.arguments = arguments
        self.grant_id = grant_id

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
            grant_id=self.grant_id,
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
        if not isinstance(answer, Approve) or answer.scope == "once":
            return
        if answer.scope == "run":
            key = (request.agent_path, self.tool_name)
            table.run_approvals.add(key)
            # Parallel calls of the same tool may be waiting too: the approval covers them.
            table.resolve_matching(
                lambda e: isinstance(e, PermissionRequest) and (e.agent_path, e.tool_name) == key,
                Approve(scope="run"),
                table.author_of(request.request_id),
            )
            return
        if table.grants is None or not isinstance(request, PermissionRequest):
            return  # nowhere to keep a grant: this call alone is approved
        grant = grant_for(request, answer)
        # Parallel calls the new grant covers are approved by it, answered as the grant
        # (the asker records the grant itself, with who gave it).
        table.resolve_matching(
            lambda e: (
                isinstance(e, PermissionRequest)
                and grant.covers(e.tool_name, e.arguments, e.agent_path, grant.created_at)
            ),
            Approve(),
            grant.author,
        )


def grant_for(
    request: PermissionRequest,
    decision: Approve,
    *,
    by: str | None = None,
    channel: str | None = None,
    now: float | None = None,
) -> Grant:
    """The grant an ``Approve(scope="always")`` answer to ``request`` gives: its tool at its
    agent path, the decision's ``match``, until ``now`` + ``ttl``; its id derived from the
    request's (``grant_id_for``), so the same answer always gives the same grant.

    Args:
        request: The permission request answered.
        decision: The answer.
        by: Who gave it (the answer's author).
        channel: The channel the answer came on.
        now: When (default: the current time).
    """
    created = time.time() if now is None else now
    return Grant(
        grant_id=grant_id_for(request.request_id),
        tool_name=request.tool_name,
        agent_path=tuple(request.agent_path),
        match=decision.match,
        granted_by=by,
        channel=channel,
        request_id=request.request_id,
        created_at=created,
        until=None if decision.ttl is None else created + decision.ttl,
    )
