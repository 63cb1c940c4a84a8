"""Every event a run emits, and the ``Event`` union.

Events of the whole agent tree arrive on the root run's one ordered stream. Each carries the
root ``run_id``, the ``agent_path`` of the agent that produced it (names from the root, e.g.
``("Orchestrator", "CodingAgent")``), its ``depth`` (0 for the root agent) and its
``invocation_id``: which call of that agent it was (two parallel calls of one sub-agent share
an ``agent_path`` but not an ``invocation_id``). ``AgentStarted.parent_invocation_id`` links a
nested call to the call of the agent that made it, so the events form a tree.

Events are frozen keyword-only dataclasses with a ``kind`` literal. ``event_adapter()`` is the
one pydantic ``TypeAdapter`` that turns any event into JSON and back.
"""

from __future__ import annotations

import functools
import hashlib
import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from ._values.arguments import split_arguments
from .messages import Usage

__all__ = [
    "PATH_SEPARATOR",
    "AgentFinished",
    "AgentStarted",
    "ClarificationRequest",
    "ClarificationResolved",
    "Event",
    "PermissionRequest",
    "PermissionResolved",
    "RequestEvent",
    "RequestExpiring",
    "RunFinished",
    "RunStarted",
    "RunStatus",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "dump_event",
    "event_adapter",
    "format_path",
    "invocation_id",
    "load_event",
]

PATH_SEPARATOR = " > "
"""How an agent path is written for people: ``Orchestrator > CodingAgent > Clarifier``."""

RunStatus = Literal["completed", "failed", "cancelled", "interrupted", "rejected"]
"""How a run (or one agent's part of it) ended."""

RequestStatus = Literal["answered", "declined", "expired", "cancelled", "unavailable"]
"""How a request ended: answered, declined (the human refused to answer: ``Decline()``),
timed out, cancelled, or nobody was there to answer."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Base:
    run_id: str
    """Id of the root run; the same for every event of the tree."""
    agent_path: tuple[str, ...]
    """Agent names from the root to the agent that produced the event."""
    depth: int
    """Nesting depth of that agent: 0 for the root agent."""
    invocation_id: str = ""
    """Which call of that agent produced the event: the root run's, or one nested call's.
    Parallel calls of one sub-agent have different ids; a resumed run keeps them (they
    derive from the call's stable path, like request ids)."""
    replayed: bool = False
    """True when a resumed run re-emits a fact from its journal (nothing ran again)."""

    @property
    def agent_name(self) -> str:
        """Name of the agent that produced the event."""
        return self.agent_path[-1] if self.agent_path else ""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(_Base):
    """The root run began. Always the first event of a stream."""

    prompt: str
    kind: Literal["run_started"] = "run_started"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFinished(_Base):
    """The root run ended. Always the last event of a stream."""

    status: RunStatus
    output: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    kind: Literal["run_finished"] = "run_finished"


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentStarted(_Base):
    """An agent began working on ``input`` (the root prompt, or a query it got as a tool)."""

    input: str
    tool_call_id: str | None = None
    """For a nested agent, the parent's tool call that started it."""
    parent_invocation_id: str | None = None
    """For a nested agent, the ``invocation_id`` of the agent call whose tool started it."""
    kind: Literal["agent_started"] = "agent_started"


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentFinished(_Base):
    """An agent finished: ``output`` is its final answer when ``status`` is completed.

    ``usage`` is what the agent spent, whatever the status; ``truncated`` says the final
    answer was cut off by the model's token limit (``finish_reason="length"``).
    """

    status: RunStatus
    output: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    tool_call_id: str | None = None
    truncated: bool = False
    kind: Literal["agent_finished"] = "agent_finished"


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta(_Base):
    """A piece of model text, as it streams."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStarted(_Base):
    """The model called a tool with ``arguments``.

    ``arguments`` is always a dict: the JSON object the model sent, parsed. When its text
    did not parse as a JSON object (broken JSON, a list, text too long or holding lone
    surrogates: the bounds of ``tools.MAX_ARGUMENT_CHARS``), ``arguments`` is ``{}`` and
    ``raw_arguments`` holds the text as sent (cut at ``MAX_ARGUMENT_CHARS``, lone surrogates
    shown as U+FFFD so the event stays JSON); when it parsed, ``raw_arguments`` is None. The
    tool itself then gets an error result saying why.
    """

    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None
    kind: Literal["tool_call_started"] = "tool_call_started"

    def __post_init__(self) -> None:
        raw: object = self.arguments
        if isinstance(raw, str):  # the spelling before 0.2: the argument text itself
            warnings.warn(
                "ToolCallStarted(arguments=<str>) is deprecated: pass the parsed dict as "
                "arguments= and the unparsed text as raw_arguments=",
                DeprecationWarning,
                stacklevel=3,
            )
            arguments, unparsed = split_arguments(raw)
            object.__setattr__(self, "arguments", arguments)
            object.__setattr__(self, "raw_arguments", unparsed)

    @property
    def arguments_json(self) -> str:
        """Deprecated: the arguments as JSON text (``raw_arguments`` when they did not parse).

        Use ``arguments`` (a dict) or ``raw_arguments`` instead; removed in the next release.
        """
        warnings.warn(
            "ToolCallStarted.arguments_json is deprecated: use arguments (a dict) or "
            "raw_arguments (the text, when it did not parse)",
            DeprecationWarning,
            stacklevel=2,
        )
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallFinished(_Base):
    """A tool call ended; ``result`` is exactly what the model is sent."""

    tool_call_id: str
    tool_name: str
    result: str
    is_error: bool = False
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True, kw_only=True, slots=True)
class ClarificationRequest(_Base):
    """An agent asks the human a question and waits, mid-turn, for ``respond(request_id, ...)``.

    ``question_kind`` says what answer fits: ``"text"`` (free text; with ``options`` it must be
    one of them, by value or 0-based index), the typed kinds of ``hpd_agent.questions``, and
    any kind registered there (``register_kind``).
    """

    request_id: str
    question: str
    context: str | None = None
    options: tuple[str, ...] | None = None
    question_kind: str = "text"
    data: dict[str, Any] | None = None
    """Kind-specific details (an argument name, a URL, a custom payload and schema)."""
    tool_call_id: str | None = None
    answer_schema: dict[str, Any] | None = None
    """The JSON Schema of a valid answer, resolved from the kind when the question was asked:
    how a process that never imported the kind checks an answer (None on events recorded
    before schemas travelled with questions)."""
    label: str | None = None
    """The kind's short label (``"Rate 1–5"``), for whoever shows the question."""
    expires_at: float | None = None
    """When it expires unanswered (seconds since the epoch), for a question asked with a
    ``timeout``; a resumed run keeps the first deadline. None: it waits as long as the run."""
    kind: Literal["clarification_request"] = "clarification_request"


@dataclass(frozen=True, kw_only=True, slots=True)
class ClarificationResolved(_Base):
    """A clarification request ended: answered, declined, expired, cancelled or unavailable
    (``answer`` is None unless answered); an answer or a decline says who gave it and on
    which channel (``answered_by``, ``channel``)."""

    request_id: str
    status: RequestStatus
    answer: Any = None
    answered_by: str | None = None
    """Who answered or declined it (``Author.by`` in ``hpd_agent.backend``); None when
    nobody was named or it ended otherwise."""
    channel: str | None = None
    """The channel the answer or decline came on (``"console"``, ``"cli"``, ``"web"``,
    ``"mcp"``, ``"api"``, ...); None when it ended without one (expired, cancelled)."""
    kind: Literal["clarification_resolved"] = "clarification_resolved"


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionRequest(_Base):
    """A tool that needs approval is about to run; answer with ``Approve`` or ``Deny``."""

    request_id: str
    tool_name: str
    arguments: dict[str, Any]
    tool_call_id: str
    expires_at: float | None = None
    """When it expires unanswered (seconds since the epoch), for a permission asked with a
    ``timeout``; None: it waits as long as the run."""
    grant_id: str | None = None
    """Set when a remembered grant (``Approve(scope="always")``) covers the call: the grant
    approves it at once (answered by ``grant:<grant_id>``), nobody is asked."""
    kind: Literal["permission_request"] = "permission_request"


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionResolved(_Base):
    """A permission request ended. ``approved`` tells whether the tool runs (never when it
    was declined, expired, cancelled or unavailable)."""

    request_id: str
    tool_name: str
    status: RequestStatus
    approved: bool
    scope: Literal["once", "run", "always"] | None = None
    reason: str | None = None
    answered_by: str | None = None
    """Who decided or declined it; None when nobody was named or it ended otherwise."""
    channel: str | None = None
    """The channel the decision or decline came on; None when it ended without one."""
    kind: Literal["permission_resolved"] = "permission_resolved"


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestExpiring(_Base):
    """A request asked with ``timeout=`` and ``warn_before=`` is still pending
    ``warn_before`` seconds before it expires (once per request, a resumed run included).

    What the asker gets on expiry is unchanged; this is for whoever can still answer it
    (a card's countdown, a notification: ``Hook.request_expiring``).
    """

    request_id: str
    expires_at: float
    """When it expires (seconds since the epoch), as on the request event."""
    kind: Literal["request_expiring"] = "request_expiring"


Event = (
    RunStarted
    | RunFinished
    | AgentStarted
    | AgentFinished
    | TextDelta
    | ToolCallStarted
    | ToolCallFinished
    | ClarificationRequest
    | ClarificationResolved
    | PermissionRequest
    | PermissionResolved
    | RequestExpiring
)
"""Any event of a run's stream."""

RequestEvent = ClarificationRequest | PermissionRequest
"""The events that wait for ``respond``."""


def format_path(path: Iterable[str]) -> str:
    """An agent path as people read it, root first: ``"Orchestrator > CodingAgent"``.

    The one way a path is shown to a person (the console, the CLI, error messages).
    Programs get the path as a list of names (``agent_path`` in JSON), never this text.
    """
    return PATH_SEPARATOR.join(path)


def invocation_id(path: str) -> str:
    """The ``invocation_id`` of the agent call whose stable path is ``path``: a root run's
    is ``invocation_id(run_id)``.

    A digest, not the path: the path holds the run id, which may be a secret (the web
    server's), and events leave the process.
    """
    return "inv_" + hashlib.blake2b(path.encode(), digest_size=8).hexdigest()


@functools.cache
def event_adapter() -> TypeAdapter[Event]:
    """The pydantic adapter for any ``Event`` (built on first use, then cached)."""
    return TypeAdapter(Annotated[Event, Field(discriminator="kind")])


def dump_event(event: Event) -> bytes:
    """Serialise an event to JSON bytes."""
    return event_adapter().dump_json(event)


def load_event(data: str | bytes) -> Event:
    """Parse an event from JSON produced by ``dump_event``."""
    return event_adapter().validate_json(data)
