"""Typed questions: the kinds of ``ClarificationRequest``, their registry, and how answers are
checked.

A question's kind travels on the request event (``question_kind``, ``data``, ``options``, and
the ``answer_schema`` and ``label`` it was asked with), so anything that holds the event alone
(a stream consumer, a handler, a durable store that loaded the record after a restart, a
process that never imported the kind) can tell what answer fits and check it with
``validate_answer``. The built-in kinds:

- ``"text"``: free text; with ``options`` the answer must be one of them, by value or by
  0-based index (an int; a bool is refused).
- ``"input"``: a value for a named tool argument; ``data={"argument": ..., "tool": ...}``.
- ``"choice"``: one of ``options`` by value or 0-based index; ``data={"multiple": bool}``,
  and a multiple choice takes a list of values or indices.
- ``"confirm"``: yes or no, as a bool (the strings yes/no/y/n/true/false also count).
- ``"action"``: the user must visit ``data["url"]`` (e.g. an OAuth link); answered True when
  done, False when declined. The URL is ``https:`` (or ``http:`` to a loopback host): a
  ``javascript:``, ``data:`` or ``file:`` link is refused where the question is built.
- ``"custom"``: ``data={"name": ..., "payload": {...}, "schema": {...} | None}``; the answer
  is JSON, checked against the JSON schema when there is one (with ``jsonschema``, never
  fetching anything: only local ``$ref``s, bounded size and depth; see ``_schemas``).

A kind of your own is a ``QuestionKind`` (a name, the JSON Schema of its answers, how typed
text reads, a label) given to ``register_kind``; a tool asks it with ``ctx.ask_kind(name,
question, data=...)``. Its answer schema is its check, on every path.

Tools raise them with one awaited call on their context (``ctx.ask_choice(...)`` and friends);
the classes here are the ``RequestSpec``s behind those calls.

Whatever its kind, any request (a permission request too) can also be *declined*: the human
refuses to answer. ``run.respond(request_id, Decline())`` (or a store's ``respond``) ends it
with status ``"declined"``, and the asking tool gets ``QuestionNotAnswered(status="declined")``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ._core.requests import Asker, RequestSpec
from ._values.builtin_kinds import BUILTIN_KINDS
from ._values.kinds import (
    QuestionKind,
    answer_schema_of,
    asked_schema,
    check_kind,
    kind_named,
    register_kind,
)
from ._values.schemas import MAX_SCHEMA_DEPTH, nesting_problem, schema_problem
from ._values.typed import AnswerPrompt, parse_typed
from ._values.typed import answer_prompt as _answer_prompt
from ._values.urls import action_url_problem
from .events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    RequestEvent,
    RequestStatus,
)
from .exceptions import InvalidAnswerError, UserError
from .permissions import to_decision
from .text import mend, shown

__all__ = [
    "QUESTION_KINDS",
    "ActionQuestion",
    "AnswerPrompt",
    "ChoiceQuestion",
    "ConfirmQuestion",
    "CustomQuestion",
    "Decline",
    "InputQuestion",
    "KindQuestion",
    "Question",
    "QuestionKind",
    "TextQuestion",
    "answer_for",
    "answer_prompt",
    "answer_schema_of",
    "check_answer",
    "kind_named",
    "parse_typed",
    "register_kind",
    "restore_question",
    "validate_answer",
]

QUESTION_KINDS: tuple[str, ...] = tuple(kind.name for kind in BUILTIN_KINDS)
"""The built-in ``ClarificationRequest.question_kind`` names. Kinds registered with
``register_kind`` are in the registry (``kind_named``), not here."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Decline:
    """The human declines to answer: given in place of an answer, to any request.

    ``run.respond(request_id, Decline())`` (and ``hpd_agent.store.respond``, ``resume``'s
    ``answers``, a handler returning it, ``hpd-agent answer ID --decline``) ends the request
    with status ``"declined"``, atomically like any answer: a request that has ended
    (answered, declined, expired, cancelled) refuses it with the same distinct errors, and an
    answer after a decline is refused with ``RequestAlreadyAnsweredError``. The asking tool's
    ``ctx.ask*`` raises ``QuestionNotAnswered(status="declined")``, which the agent loop turns
    into a tool result telling the model the user declined; a declined permission request
    keeps its tool from running, like a denial. This is the MCP elicitation's "decline".

    Only an instance declines: JSON such as ``{"kind": "decline"}`` is an ordinary answer
    (a custom question may well take it).
    """

    kind: Literal["decline"] = "decline"


def check_answer(
    kind: str,
    answer: Any,
    *,
    options: Sequence[str] | None = None,
    data: Mapping[str, Any] | None = None,
) -> Any:
    """Check an answer against a question's kind, options and data.

    Args:
        kind: The question kind: a built-in one (``QUESTION_KINDS``) or one registered with
            ``register_kind`` (checked against its answer schema for ``data``).
        answer: The answer given.
        options: The question's options, if any.
        data: The question's kind-specific data, if any.

    Returns:
        The answer in canonical form: the option's own spelling for a choice, a bool for a
        confirmation or an action, stripped text for an input, plain JSON for a custom kind
        or a registered one.

    Raises:
        ValueError, TypeError: The answer does not fit; the message says why.
    """
    return check_kind(kind, answer, options=tuple(options) if options else None, data=data)


def answer_for(request: RequestEvent, answer: Any) -> Any:
    """The one answer check: ``answer`` in canonical form for the request event ``request``
    (a question of any kind, or a permission request: then a ``Decision``).

    Every way an answer arrives goes through it (``run.respond``, a store's ``respond`` from
    another process, ``resume(answers=...)``, the web, MCP and A2A servers, Temporal), so
    they all accept exactly the same answers. A built-in kind checks with its own rules; any
    other kind against the answer schema the question was asked with (its registered kind's
    schema for an event that carries none), so a process that never imported the kind
    decides exactly as the asking process does.

    Raises:
        ValueError, TypeError: The answer does not fit; the message says why.
    """
    if isinstance(request, PermissionRequest):
        return to_decision(answer)
    return check_kind(
        request.question_kind,
        answer,
        options=request.options,
        data=request.data,
        schema=request.answer_schema,
    )


def answer_prompt(request: RequestEvent) -> AnswerPrompt:
    """What ``request`` asks for and what to type to answer it: an ``AnswerPrompt`` whose
    ``label`` is in the words every surface uses (the web page's card, the console,
    ``hpd-agent pending``: ``Choose one``, ``Yes or no``, ``Permission``, a kind's own label
    such as ``Rate 1–5``) and whose ``hint`` is the typed answer it takes, e.g. ``type a
    number from 1 to 3 (as listed: 1 is the first) or the value``; ``str()`` of it is the
    two as one line (``Choose one: type ...``). What ``parse_typed`` reads is what the hint
    says to type.

    Example:
        ``print(f"{answer_prompt(event)}")`` under a listed request, as ``hpd-agent
        pending`` does for a store's runs and a Temporal run's alike.
    """
    return _answer_prompt(request)


def validate_answer(request: RequestEvent, answer: Any) -> Any:
    """Check an answer against a request event alone (e.g. a record loaded from a store).

    Returns:
        The answer in canonical form (see ``answer_for``).

    Raises:
        InvalidAnswerError: The answer does not fit the request.
    """
    try:
        return answer_for(request, answer)
    except (ValueError, TypeError) as e:
        raise InvalidAnswerError(
            f"invalid answer for request {request.request_id}: {e}",
            request_id=request.request_id,
        ) from None


# -- the specs tools raise ---------------------------------------------------------------------
class Question(RequestSpec):
    """A question of some kind: builds its ``ClarificationRequest`` and checks answers.

    Subclasses set ``kind`` and check their own arguments; ``ToolContext.ask_*`` build them.
    The kind must be registered (the built-in ones are): its answer schema and label are
    resolved when the question is asked and travel with the request. A subclass does not
    override ``validate`` to take other answers: no other path would know them (a store's
    ``respond`` in another process, the web routes, Temporal); register a ``QuestionKind``
    whose answer schema says what fits instead. One that does, for a kind nobody registered,
    is refused when asked.

    Args:
        question: What to ask, phrased for the user.
        context: Why it is asked.
        options: The allowed answers, for kinds that have them.
        data: Kind-specific details (JSON data).
    """

    kind: ClassVar[str] = "text"
    __slots__ = ("_label", "_schema", "context", "data", "options", "question")

    def __init__(
        self,
        *,
        question: str,
        context: str | None = None,
        options: Sequence[str] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(question, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"a question must be text, got {type(question).__name__}")
        self.question = mend(question)  # shown, stored and replayed alike (see text.mend)
        self.context = context
        self.options = tuple(options) if options else None
        self.data: dict[str, Any] | None = dict(data) if data is not None else None
        self._schema: dict[str, Any] | None = None  # resolved when asked (see _asked)
        self._label: str | None = None

    @property
    def question_kind(self) -> str:
        """The kind this question has on the stream (``ClarificationRequest.question_kind``)."""
        return self.kind

    def _asked(self) -> tuple[dict[str, Any] | None, str | None]:
        """The answer schema and label it is asked with (resolved once, then kept)."""
        if self._schema is not None:
            return self._schema, self._label
        kind = self.question_kind
        if type(self).validate is not Question.validate and kind_named(kind) is None:
            raise UserError(
                f"register a QuestionKind for {kind!r} (hpd_agent.questions.register_kind) "
                "instead of overriding validate: only its answer schema is known to every "
                "path an answer takes (a store's respond in another process, the web, Temporal)"
            )
        self._schema, self._label = asked_schema(kind, self.data, self.options)
        return self._schema, self._label

    def build(self, *, request_id: str, asker: Asker) -> RequestEvent:
        """The ``ClarificationRequest`` event, tagged with the asking agent's path.

        Raises:
            UserError: Its kind is not registered (see the class docstring).
        """
        schema, label = self._asked()
        return ClarificationRequest(
            run_id=asker.run_id,
            agent_path=asker.agent_path,
            depth=asker.depth,
            invocation_id=asker.invocation_id,
            request_id=request_id,
            question=self.question,
            context=self.context,
            options=self.options,
            question_kind=self.question_kind,
            data=self.data,
            tool_call_id=asker.tool_call_id,
            answer_schema=schema,
            label=label,
        )

    def validate(self, answer: Any) -> Any:
        """The answer in canonical form; ``ValueError``/``TypeError`` say why it does not fit."""
        return check_kind(
            self.question_kind,
            answer,
            options=self.options,
            data=self.data,
            schema=self._schema,
        )

    def resolved(self, request: RequestEvent, status: RequestStatus, answer: Any) -> Event:
        """The ``ClarificationResolved`` event."""
        return ClarificationResolved(
            run_id=request.run_id,
            agent_path=request.agent_path,
            depth=request.depth,
            invocation_id=request.invocation_id,
            request_id=request.request_id,
            status=status,
            answer=answer,
        )


class TextQuestion(Question):
    """A free-text question; with ``options``, the answer must be one of them.

    Options match exactly, or ignoring case and surrounding space (the answer is then given
    back in the option's own spelling), or by 0-based index (``0`` is the first option; a
    bool is not an index).
    """

    kind = "text"
    __slots__ = ()


class InputQuestion(Question):
    """Asks for the value of a named tool argument instead of letting the model invent it.

    Args:
        argument: The argument's name.
        tool: The tool that needs it.
        question: What to ask; defaults to asking for the argument by name.
        context: Why it is asked.
    """

    kind = "input"
    __slots__ = ()

    def __init__(
        self, *, argument: str, tool: str, question: str | None = None, context: str | None = None
    ) -> None:
        if not argument:
            raise UserError("an input question needs the argument's name")
        super().__init__(
            question=question or f"Please provide a value for {argument!r} (needed by {tool}).",
            context=context,
            data={"argument": argument, "tool": tool},
        )


class ChoiceQuestion(Question):
    """Multiple choice: the answer is one of ``options``, by value or by 0-based index.

    Args:
        question: What to ask.
        options: The choices (at least one, no duplicates).
        multiple: Take a list of options instead of one.
        context: Why it is asked.
    """

    kind = "choice"
    __slots__ = ()

    def __init__(
        self,
        *,
        question: str,
        options: Sequence[str],
        multiple: bool = False,
        context: str | None = None,
    ) -> None:
        if isinstance(options, str):
            raise UserError("options must be a sequence of strings, not one string")
        opts = tuple(options)
        if not opts:
            raise UserError("a choice question needs at least one option")
        if not all(isinstance(o, str) for o in opts):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"every option must be text, got {list(opts)!r}")
        if len(set(opts)) != len(opts):
            raise UserError(f"options must be distinct, got {list(opts)!r}")
        super().__init__(
            question=question, context=context, options=opts, data={"multiple": bool(multiple)}
        )


class ConfirmQuestion(Question):
    """A yes/no question; the answer is a bool and the asking tool decides what "no" means."""

    kind = "confirm"
    __slots__ = ()

    def __init__(self, *, question: str, context: str | None = None) -> None:
        super().__init__(question=question, context=context)


class ActionQuestion(Question):
    """The user must do something at a URL (sign in with OAuth, pay, ...), then say so.

    Answered True when done and False when declined; an app can also answer it itself when
    the action's callback arrives (``run.respond(request_id, True)``).

    Args:
        url: Where the user acts: an ``https://`` URL, or ``http://`` to this machine
            (``localhost``, ``127.0.0.1``, ``[::1]``); any other scheme (``javascript:``,
            ``data:``, ``file:``, ...) is refused.
        label: Short text for a link or button.
        question: What to tell the user; defaults to asking them to open the URL.
        context: Why it is needed.

    Raises:
        UserError: The URL is not one a person may be sent to (see ``url``).
    """

    kind = "action"
    __slots__ = ()

    def __init__(
        self,
        *,
        url: str,
        label: str | None = None,
        question: str | None = None,
        context: str | None = None,
    ) -> None:
        problem = action_url_problem(url)
        if problem is not None:
            raise UserError(problem)
        label = label or "Open link"
        super().__init__(
            question=question or f"Please complete this step: {label} ({url}), then confirm.",
            context=context,
            data={"url": url, "label": label},
        )


class CustomQuestion(Question):
    """A question of your own kind: a name, JSON payload, and an optional JSON schema.

    Args:
        name: What kind of question this is, for the handler (e.g. ``"pick_date_range"``).
        question: What to ask.
        payload: JSON data for whoever shows the question.
        schema: A JSON schema the answer must match; None accepts any JSON. Only local
            ``$ref``s (``#/...``) are allowed, and at most ``MAX_SCHEMA_BYTES`` bytes and
            ``MAX_SCHEMA_DEPTH`` levels of nesting: checking an answer never fetches anything.
        context: Why it is asked.

    Raises:
        UserError: The payload or schema is not JSON, or the schema is invalid, too big, too
            deep or refers outside itself (the message names the ``$ref``).
    """

    kind = "custom"
    __slots__ = ()

    def __init__(
        self,
        *,
        name: str,
        question: str,
        payload: Mapping[str, Any] | None = None,
        schema: Mapping[str, Any] | None = None,
        context: str | None = None,
    ) -> None:
        if not name:
            raise UserError("a custom question needs a name")
        deep = nesting_problem(payload, what="the payload") or nesting_problem(
            schema, MAX_SCHEMA_DEPTH, "the schema"
        )
        if deep is not None:
            raise UserError(f"invalid custom question {name!r}: {deep}")
        try:
            payload_json = json.loads(json.dumps(dict(payload or {}), allow_nan=False))
            schema_json = json.loads(json.dumps(dict(schema), allow_nan=False)) if schema else None
        except (TypeError, ValueError) as e:
            raise UserError(f"a custom question's payload and schema must be JSON: {e}") from None
        problem = None if schema_json is None else schema_problem(schema_json)
        if problem is not None:
            raise UserError(f"invalid JSON schema for {name!r}: {problem}")
        super().__init__(
            question=question,
            context=context,
            data={"name": name, "payload": payload_json, "schema": schema_json},
        )


def _json_object(value: Mapping[str, Any] | None, what: str) -> dict[str, Any] | None:
    """``value`` as plain JSON data (a dict), or ``UserError`` saying why it is not."""
    if value is None:
        return None
    if not isinstance(value, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"{what} must be a dict of JSON data, got {type(value).__name__}")
    deep = nesting_problem(value, MAX_SCHEMA_DEPTH if what.endswith("schema") else 200, what)
    if deep is not None:
        raise UserError(deep)
    try:
        return json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as e:
        raise UserError(f"{what} must be JSON data: {e}") from None


class KindQuestion(Question):
    """A question of a registered kind (``ToolContext.ask_kind`` asks one).

    Args:
        kind: The kind's name (``register_kind``).
        question: What to ask.
        data: The kind's details (JSON data): what its answer schema and parser read.
        context: Why it is asked.
        schema: The answer schema, for a question relayed from elsewhere whose kind this
            process may not know (checked: a safe, valid JSON Schema); None: the registered
            kind's, resolved when asked.
        label: The label shown with it, with ``schema``; None: the registered kind's.

    Raises:
        UserError: No kind ``kind`` is registered and no ``schema`` is given, or ``data`` or
            ``schema`` is not JSON (or the schema is invalid, too big, too deep, or refers
            outside itself).
    """

    __slots__ = ("_kind",)

    def __init__(
        self,
        kind: str,
        *,
        question: str,
        data: Mapping[str, Any] | None = None,
        context: str | None = None,
        schema: Mapping[str, Any] | None = None,
        label: str | None = None,
    ) -> None:
        known = kind_named(kind) if isinstance(kind, str) else None  # pyright: ignore[reportUnnecessaryIsInstance]
        if known is None and schema is None:
            raise UserError(
                f"no question kind named {shown(kind)} is registered: register a QuestionKind "
                "(hpd_agent.questions.register_kind) before asking it"
            )
        super().__init__(
            question=question, context=context, data=_json_object(data, "the question's data")
        )
        self._kind = kind
        if schema is not None:
            given = _json_object(schema, "the answer schema")
            problem = schema_problem(given)
            if problem is not None:
                raise UserError(f"invalid answer schema for {kind!r}: {problem}")
            self._schema = given
            self._label = label if label is not None else (known.label if known else None)

    @property
    def question_kind(self) -> str:
        """The kind's name."""
        return self._kind


class _Restored(Question):
    __slots__ = ("_kind",)

    def __init__(self, request: ClarificationRequest) -> None:
        super().__init__(
            question=request.question,
            context=request.context,
            options=request.options,
            data=request.data,
        )
        self._kind = request.question_kind
        self._schema = request.answer_schema
        self._label = request.label

    @property
    def question_kind(self) -> str:
        return self._kind

    def _asked(self) -> tuple[dict[str, Any] | None, str | None]:
        if self._schema is None and kind_named(self._kind) is None:
            # Recorded before schemas travelled with questions, of a kind unknown here: it
            # is asked again as it was (and checked as it was: see check_kind).
            return None, None
        return super()._asked()


def restore_question(request: ClarificationRequest) -> Question:
    """The spec of a stored question event, e.g. to register it again after a restart.

    The spec builds the same question (kind, options, data, answer schema, label) and checks
    answers exactly as the original did, even in a process that never imported its kind.
    """
    return _Restored(request)
