"""Structured output: ``Agent(output_type=...)`` told to the model, read back and validated.

The model is told the JSON schema of the output type in its instructions. Its final answer
is read (the whole text, a fenced block, or the first JSON value found in prose) and
validated by pydantic; an answer that does not validate goes back to the model as a user
message carrying the validation error, and the model tries again, up to ``retries`` times.
The retry message depends only on the model's answer, so a durable run that replays the
journaled answers rebuilds the same conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pydantic
import pydantic_core

from ..exceptions import OutputValidationError, UserError
from ..messages import UserMessage
from ..text import bounded

__all__ = ["OutputSpec", "output_spec", "output_text"]

_FENCE = "```"
_HEADER = re.compile(r"[a-zA-Z]*[ \t]*\n?")
"""What may follow an opening fence before the block: every part optional and nothing after
it, so the match never backtracks."""
_MAX_STARTS = 64
"""Positions in prose tried as the start of a JSON value (bounds the work on odd text)."""
_MAX_ERROR_CHARS = 2_000


def output_spec(output_type: Any, retries: int, agent_name: str) -> OutputSpec | None:
    """The output check of an agent, or None for plain text (no type, or ``str``).

    Raises:
        UserError: ``retries`` is negative, or pydantic cannot validate ``output_type``.
    """
    if retries < 0:
        raise UserError("output_retries must be 0 or more")
    if output_type is None or output_type is str:
        return None
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as e:
        raise UserError(
            f"agent {agent_name!r}: output_type {output_type!r} is not a type pydantic can "
            f"validate and describe as JSON schema: {e}"
        ) from e
    return OutputSpec(adapter, schema, retries, agent_name)


class OutputSpec:
    """How one agent's final answer is checked (built once per ``Agent``)."""

    __slots__ = ("_adapter", "agent_name", "retries", "schema")

    def __init__(
        self,
        adapter: pydantic.TypeAdapter[Any],
        schema: dict[str, Any],
        retries: int,
        agent_name: str,
    ) -> None:
        self._adapter = adapter
        self.schema = schema
        self.retries = retries
        self.agent_name = agent_name

    def instructions(self) -> str:
        """What the model is told about its final answer (added to the system prompt)."""
        return (
            "When you give your final answer, reply with only a JSON value that matches "
            "this JSON schema (no other text):\n"
            f"```json\n{json.dumps(self.schema, ensure_ascii=False)}\n```"
        )

    def check(self, answer: str | None, failures: int) -> tuple[Any, UserMessage | None]:
        """Validate a final answer after ``failures`` refused ones.

        Returns:
            ``(value, None)`` when it validates; ``(None, message)`` when it does not and a
            retry is left: send ``message`` to the model and ask again.

        Raises:
            OutputValidationError: It does not validate and the retries are spent.
        """
        try:
            return self.parse(answer or ""), None
        except _Invalid as e:
            error = str(e)
        if failures >= self.retries:
            attempts = failures + 1
            raise OutputValidationError(
                f"agent {self.agent_name!r} gave no valid output in {attempts} "
                f"attempt{'s' if attempts > 1 else ''} (output_retries={self.retries}); "
                f"last error: {error}",
                agent_name=self.agent_name,
                attempts=attempts,
                last_error=error,
            )
        return None, UserMessage(
            content=(
                f"Your final answer could not be used: {error}\n"
                "Reply again with only the JSON value, matching the schema in your instructions."
            )
        )

    def parse(self, answer: str) -> Any:
        """The validated value in ``answer``: the whole text, a fenced block, or the first
        JSON value in it that validates.

        Raises:
            _Invalid: Nothing in ``answer`` validates (the message says why, for the model).
        """
        first_error: str | None = None
        for candidate in _candidates(answer):
            try:
                return self._adapter.validate_json(candidate)
            except pydantic.ValidationError as e:
                if first_error is None and not _is_json_error(e):
                    first_error = _summarise(e)
        if first_error is None:
            raise _Invalid("no JSON value was found in it")
        raise _Invalid(first_error)


class _Invalid(Exception):
    """An answer that does not validate; the message is written for the model."""


def _candidates(answer: str) -> Iterator[str]:
    """Pieces of ``answer`` that may hold the value, most likely first: the whole text,
    fenced blocks, then JSON objects and arrays found in the prose."""
    stripped = answer.strip()
    if stripped:
        yield stripped
    for body in fenced(answer):
        yield body.strip()
    decoder = json.JSONDecoder()
    starts = 0
    for m in re.finditer(r"[{\[]", answer):
        starts += 1
        if starts > _MAX_STARTS:
            return
        try:
            _, end = decoder.raw_decode(answer, m.start())
        except (ValueError, RecursionError):
            continue
        yield answer[m.start() : end]


def fenced(text: str) -> Iterator[str]:
    """The bodies of the fenced blocks in ``text``, in order, found in linear time.

    A block opens with three backticks, an optional language word (ASCII letters), spaces
    or tabs and an optional newline, and closes at the next three backticks. Each search
    starts where the previous one ended, so every character is looked at a bounded number
    of times; a block left open ends the scan (no later block could close either), where a
    backtracking pattern would retry from every later position.
    """
    pos = text.find(_FENCE)
    while pos >= 0:
        header = _HEADER.match(text, pos + len(_FENCE))
        start = header.end() if header is not None else pos + len(_FENCE)
        end = text.find(_FENCE, start)
        if end < 0:
            return
        yield text[start:end]
        pos = text.find(_FENCE, end + len(_FENCE))


def _is_json_error(error: pydantic.ValidationError) -> bool:
    return any(e["type"] == "json_invalid" for e in error.errors(include_url=False))


def _summarise(error: pydantic.ValidationError) -> str:
    parts: list[str] = []
    for err in error.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "the value"
        parts.append(f"{loc}: {err['msg']}")
    return bounded("; ".join(parts), _MAX_ERROR_CHARS)


def output_text(value: Any) -> str | None:
    """A final answer as text (events, run records): text as is, a value as its JSON."""
    if value is None or isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError:
        return str(value)
