"""``clarify_loop``: generate, evaluate, ask the human, regenerate with the clarification.

The loop's progress lives in a ``ClarifyState`` (rounds asked, clarifications received, the
question waiting for an answer). It is plain JSON: persist it (``on_state`` is called after
every change) and pass it back as ``state=`` after an interrupt or a restart, and the loop
continues at the round it had reached instead of starting over.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast

from ..exceptions import QuestionNotAnswered, UserError
from ..tools import ToolContext
from ._shared import frame

__all__ = [
    "ClarifyInterrupted",
    "ClarifyResult",
    "ClarifyState",
    "clarify_loop",
    "default_clarify_prompt",
    "low_confidence",
]

T = TypeVar("T")


@dataclass(kw_only=True)
class ClarifyState:
    """A clarify loop's progress: save it, hand it back, and the loop resumes where it was.

    Attributes:
        rounds: Clarification questions asked so far (the one pending included).
        clarifications: The human's answers, oldest first.
        pending_question: A question asked and not answered yet (set while waiting, and in
            the state of a ``ClarifyInterrupted``); a resumed loop asks it again, unless the
            answer is recorded first with ``answer()``.
    """

    rounds: int = 0
    clarifications: list[str] = field(default_factory=list[str])
    pending_question: str | None = None

    @property
    def clarification(self) -> str | None:
        """The latest clarification (what ``generate`` should take into account), if any."""
        return self.clarifications[-1] if self.clarifications else None

    def answer(self, text: str) -> None:
        """Record the answer to the pending question (given outside the run, e.g. by mail).

        Raises:
            UserError: No question is pending.
        """
        if self.pending_question is None:
            raise UserError("no clarification question is pending in this state")
        self.clarifications.append(text)
        self.pending_question = None

    def to_json(self) -> str:
        """The state as JSON text."""
        return json.dumps(
            {
                "rounds": self.rounds,
                "clarifications": self.clarifications,
                "pending_question": self.pending_question,
            }
        )

    @classmethod
    def from_json(cls, data: str | bytes) -> ClarifyState:
        """A state from ``to_json`` output.

        Raises:
            UserError: The text is not a saved clarify state.
        """
        try:
            raw: Any = json.loads(data)
        except ValueError:
            raw = None
        obj = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
        rounds = obj.get("rounds")
        items = obj.get("clarifications")
        pending = obj.get("pending_question")
        texts = (
            [c for c in cast(list[Any], items) if isinstance(c, str)]
            if isinstance(items, list)
            else None
        )
        if (
            not isinstance(rounds, int)
            or isinstance(rounds, bool)
            or rounds < 0
            or texts is None
            or len(texts) != len(cast(list[Any], items))
            or not (pending is None or isinstance(pending, str))
        ):
            raise UserError(f"not a saved clarify state: {data!r:.200}")
        return cls(rounds=rounds, clarifications=texts, pending_question=pending)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClarifyResult(Generic[T]):
    """How a clarify loop ended.

    Attributes:
        output: The last output generated.
        satisfied: The output passed evaluation (False: rounds ran out, or the last question
            went unanswered under ``if_unanswered="return"``).
        rounds: Clarification rounds used.
        clarifications: The human's answers, oldest first.
        state: The final state.
    """

    output: T
    satisfied: bool
    rounds: int
    clarifications: tuple[str, ...]
    state: ClarifyState


class ClarifyInterrupted(QuestionNotAnswered):
    """A clarify loop's question went unanswered; ``state`` resumes the loop later.

    Attributes:
        state: The loop's state, with ``pending_question`` set. Save it (``to_json``), and
            pass it back as ``clarify_loop(..., state=...)``, after ``state.answer(...)`` if
            the answer arrived some other way.
    """

    def __init__(self, error: QuestionNotAnswered, state: ClarifyState) -> None:
        super().__init__(str(error), status=error.status, request_id=error.request_id)
        self.state = state


def low_confidence(output: Any, state: ClarifyState, threshold: float = 0.7) -> bool:
    """The default evaluation: ask when the output's confidence is below ``threshold``.

    Confidence is read from an attribute or key named ``confidence``; without one, the
    output needs clarification when its text mentions "unclear".
    """
    text = str(output).lower()
    confidence: Any = getattr(output, "confidence", None)
    if confidence is None and isinstance(output, Mapping):
        mapping = cast(Mapping[str, Any], output)
        confidence = mapping.get("confidence")
    if isinstance(confidence, (int, float)) and not isinstance(confidence, bool):
        return confidence < threshold
    return "unclear" in text


def default_clarify_prompt(output: Any, state: ClarifyState) -> str:
    """The default question: shows the output and asks the human to clarify."""
    shown: Any = output
    if isinstance(output, Mapping):
        mapping = cast(Mapping[str, Any], output)
        shown = mapping.get("output", output)
    return f"The result is unclear or low-confidence. Please clarify what you need:\n\n{shown}"


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def clarify_loop(
    generate: Callable[[ClarifyState], T | Awaitable[T]],
    *,
    evaluate: Callable[[T, ClarifyState], bool | Awaitable[bool]] | None = None,
    prompt: str | Callable[[T, ClarifyState], str] | None = None,
    max_rounds: int = 3,
    state: ClarifyState | None = None,
    on_state: Callable[[ClarifyState], Any] | None = None,
    if_unanswered: Literal["interrupt", "return"] = "interrupt",
    timeout: float | None = None,
    ctx: ToolContext | None = None,
) -> ClarifyResult[T]:
    """Generate an output; while it needs clarification, ask the human and regenerate.

    Each round: ``generate(state)`` (``state.clarification`` holds the latest answer), then
    ``evaluate(output, state)``; if it returns True and fewer than ``max_rounds`` questions
    were asked, the human is asked ``prompt`` and the loop goes again. After ``max_rounds``
    the last output is returned even if it still fails evaluation.

    Args:
        generate: Produces the output, sync or async.
        evaluate: True when the output needs clarification; default ``low_confidence``.
        prompt: The question, or a function of (output, state) giving it; default
            ``default_clarify_prompt``.
        max_rounds: Most clarification questions, counted across resumes.
        state: A saved state to resume from; None starts afresh.
        on_state: Called (sync or async) with the state after every change: persist it
            there to survive a crash mid-question.
        if_unanswered: When a question goes unanswered: ``"interrupt"`` raises
            ``ClarifyInterrupted`` (with the state to resume from); ``"return"`` returns the
            last output, unsatisfied.
        timeout: Seconds to wait for each answer; None waits as long as the run lives.
        ctx: The call frame to ask from; defaults to the running tool's.

    Raises:
        ClarifyInterrupted: A question went unanswered (``if_unanswered="interrupt"``).
        UserError: Called outside any run, or with ``max_rounds`` below 0.
    """
    if max_rounds < 0:
        raise UserError("max_rounds must be 0 or more")
    if if_unanswered not in ("interrupt", "return"):
        raise UserError(f"if_unanswered must be 'interrupt' or 'return', got {if_unanswered!r}")
    loop = _Loop[T](frame(ctx, "clarify_loop"), state or ClarifyState(), on_state, if_unanswered)
    return await loop.run(generate, evaluate or low_confidence, prompt, max_rounds, timeout)


class _Loop(Generic[T]):
    """One clarify loop's progress (its state, whether an output exists yet)."""

    def __init__(
        self,
        asker: ToolContext,
        state: ClarifyState,
        on_state: Callable[[ClarifyState], Any] | None,
        if_unanswered: Literal["interrupt", "return"],
    ) -> None:
        self.asker = asker
        self.st = state
        self.on_state = on_state
        self.if_unanswered = if_unanswered
        self.generated = False

    async def save(self) -> None:
        if self.on_state is not None:
            await _call(self.on_state, self.st)

    async def ask(self, question: str, max_rounds: int, timeout: float | None) -> bool:
        """Ask the pending question; False when it went unanswered under "return"."""
        st = self.st
        try:
            answer = await self.asker.ask(
                question,
                context=f"Clarification {st.rounds} of at most {max_rounds}.",
                timeout=timeout,
            )
        except QuestionNotAnswered as e:
            if self.if_unanswered == "return" and self.generated:
                return False
            raise ClarifyInterrupted(e, st) from None
        st.answer(answer)
        await self.save()
        return True

    async def run(
        self,
        generate: Callable[[ClarifyState], T | Awaitable[T]],
        check: Callable[[T, ClarifyState], Any],
        prompt: str | Callable[[T, ClarifyState], str] | None,
        max_rounds: int,
        timeout: float | None,
    ) -> ClarifyResult[T]:
        st = self.st
        if st.pending_question is not None:
            # Resumed while a question was waiting: ask it again before generating anything
            # (with no output to return yet, an unanswered question interrupts again).
            await self.ask(st.pending_question, max_rounds, timeout)
        while True:
            output = cast(T, await _call(generate, st))
            self.generated = True
            if not await _call(check, output, st):
                return _result(output, True, st)
            if st.rounds >= max_rounds:
                return _result(output, False, st)
            question = prompt(output, st) if callable(prompt) else prompt
            st.rounds += 1
            st.pending_question = question or default_clarify_prompt(output, st)
            await self.save()
            if not await self.ask(st.pending_question, max_rounds, timeout):
                return _result(output, False, st)


def _result(output: T, satisfied: bool, state: ClarifyState) -> ClarifyResult[T]:
    return ClarifyResult(
        output=output,
        satisfied=satisfied,
        rounds=state.rounds,
        clarifications=tuple(state.clarifications),
        state=state,
    )
