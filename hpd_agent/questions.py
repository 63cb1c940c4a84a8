"""Typed questions: the kinds of ``ClarificationRequest`` and how their answers are checked.

A question's kind travels on the request event (``question_kind``, ``data``, ``options``), so
anything that holds the event alone (a stream consumer, a handler, a durable store that loaded
the record after a restart) can tell what answer fits and check it with ``validate_answer``.
The kinds:

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
from typing import Any, ClassVar, Literal, cast

from ._core.requests import Asker, RequestSpec
from ._values.schemas import MAX_SCHEMA_DEPTH, nesting_problem, schema_mismatch, schema_problem
from ._values.urls import action_url_problem
from ._values.vocabulary import DECLINED_WORDS, DONE_WORDS, NO_WORDS, YES_WORDS, normalise
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
    "ChoiceQuestion",
    "ConfirmQuestion",
    "CustomQuestion",
    "Decline",
    "InputQuestion",
    "Question",
    "TextQuestion",
    "answer_for",
    "check_answer",
    "restore_question",
    "validate_answer",
]

QUESTION_KINDS: tuple[str, ...] = ("text", "input", "choice", "confirm", "action", "custom")
"""Every ``ClarificationRequest.question_kind`` this version understands."""


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


# -- answer checks (work from the event's fields alone) ---------------------------------------
def _match_option(answer: str, options: tuple[str, ...]) -> str:
    if answer in options:
        return answer
    folded = answer.strip().casefold()
    for option in options:
        if option.strip().casefold() == folded:
            return option
    raise ValueError(f"{shown(answer)} is not one of the options {list(options)}")


def _check_text(answer: Any, options: tuple[str, ...] | None) -> str:
    if options is not None:
        # One of the options, by its text or its 0-based index, as for a choice.
        return _pick(answer, options)
    if not isinstance(answer, str):
        raise TypeError(f"expected text, got {type(answer).__name__}")
    return answer


def _check_input(answer: Any, data: Mapping[str, Any]) -> str:
    argument = data.get("argument", "the argument")
    if not isinstance(answer, str):
        raise TypeError(f"expected a text value for {argument!r}, got {type(answer).__name__}")
    value = answer.strip()
    if not value:
        raise ValueError(f"a value for {argument!r} is required; the answer was empty")
    return value


def _pick(answer: Any, options: tuple[str, ...]) -> str:
    if isinstance(answer, bool):
        raise TypeError("expected an option (text) or its 0-based index (int), got a bool")
    if isinstance(answer, int):
        if 0 <= answer < len(options):
            return options[answer]
        raise ValueError(f"index {shown(answer)} is out of range: there are {len(options)} options")
    if isinstance(answer, str):
        return _match_option(answer, options)
    raise TypeError(
        f"expected an option (text) or its 0-based index (int), got {type(answer).__name__}"
    )


def _check_choice(answer: Any, options: tuple[str, ...] | None, data: Mapping[str, Any]) -> Any:
    if not options:
        raise ValueError("the choice question has no options to choose from")
    if not data.get("multiple", False):
        if isinstance(answer, (list, tuple)):
            raise TypeError("this question takes one option, not a list")
        return _pick(answer, options)
    if not isinstance(answer, (list, tuple)):
        raise TypeError(f"expected a list of options, got {type(answer).__name__}")
    picked: list[str] = []
    for item in cast(Sequence[Any], answer):
        value = _pick(item, options)
        if value in picked:
            raise ValueError(f"option {value!r} was chosen twice")
        picked.append(value)
    if not picked:
        raise ValueError("choose at least one option")
    return picked


def _yes_no(answer: Any, yes: frozenset[str], no: frozenset[str], what: str) -> bool:
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, str):
        word = normalise(answer)
        if word in yes:
            return True
        if word in no:
            return False
        raise ValueError(f"expected {what}, got {shown(answer)}")
    raise TypeError(f"expected {what} (a bool), got {type(answer).__name__}")


def _to_json(answer: Any) -> Any:
    try:
        return json.loads(json.dumps(answer, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TypeError(f"the answer must be JSON data: {e}") from None


def _check_custom(answer: Any, data: Mapping[str, Any]) -> Any:
    deep = nesting_problem(answer, what="the answer")
    if deep is not None:
        raise ValueError(deep)
    value = _to_json(answer)
    schema = data.get("schema")
    if schema is None:
        return value
    # A schema restored from a store never passed CustomQuestion's checks: check it here.
    problem = schema_problem(schema)
    if problem is not None:
        raise ValueError(f"the question's JSON schema is invalid: {problem}")
    mismatch = schema_mismatch(schema, value)
    if mismatch is not None:
        raise ValueError(mismatch)
    return value


def check_answer(
    kind: str,
    answer: Any,
    *,
    options: Sequence[str] | None = None,
    data: Mapping[str, Any] | None = None,
) -> Any:
    """Check an answer against a question's kind, options and data.

    Args:
        kind: The question kind (one of ``QUESTION_KINDS``).
        answer: The answer given.
        options: The question's options, if any.
        data: The question's kind-specific data, if any.

    Returns:
        The answer in canonical form: the option's own spelling for a choice, a bool for a
        confirmation or an action, stripped text for an input, plain JSON for a custom kind.

    Raises:
        ValueError, TypeError: The answer does not fit; the message says why.
    """
    opts = tuple(options) if options else None
    details: Mapping[str, Any] = data or {}
    if kind == "text":
        return _check_text(answer, opts)
    if kind == "input":
        return _check_input(answer, details)
    if kind == "choice":
        return _check_choice(answer, opts, details)
    if kind == "confirm":
        return _yes_no(answer, YES_WORDS, NO_WORDS, "yes or no")
    if kind == "action":
        return _yes_no(answer, DONE_WORDS, DECLINED_WORDS, "True (done) or False (declined)")
    if kind == "custom":
        return _check_custom(answer, details)
    raise ValueError(f"unknown question kind {kind!r}; known kinds: {', '.join(QUESTION_KINDS)}")


def answer_for(request: RequestEvent, answer: Any) -> Any:
    """The one answer check: ``answer`` in canonical form for the request event ``request``
    (a question of any kind, or a permission request: then a ``Decision``).

    Every way an answer arrives goes through it (``run.respond``, a store's ``respond`` from
    another process, ``resume(answers=...)``), so they all accept exactly the same answers.

    Raises:
        ValueError, TypeError: The answer does not fit; the message says why.
    """
    if isinstance(request, PermissionRequest):
        return to_decision(answer)
    return check_answer(request.question_kind, answer, options=request.options, data=request.data)


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

    Args:
        question: What to ask, phrased for the user.
        context: Why it is asked.
        options: The allowed answers, for kinds that have them.
        data: Kind-specific details (JSON data).
    """

    kind: ClassVar[str] = "text"
    __slots__ = ("context", "data", "options", "question")

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

    @property
    def question_kind(self) -> str:
        """The kind this question has on the stream (``ClarificationRequest.question_kind``)."""
        return self.kind

    def build(self, *, request_id: str, asker: Asker) -> RequestEvent:
        """The ``ClarificationRequest`` event, tagged with the asking agent's path."""
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
        )

    def validate(self, answer: Any) -> Any:
        """The answer in canonical form; ``ValueError``/``TypeError`` say why it does not fit."""
        return check_answer(self.question_kind, answer, options=self.options, data=self.data)

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

    @property
    def question_kind(self) -> str:
        return self._kind


def restore_question(request: ClarificationRequest) -> Question:
    """The spec of a stored question event, e.g. to register it again after a restart.

    The spec builds the same question (kind, options, data) and checks answers exactly as
    the original did.
    """
    return _Restored(request)
