"""The typed questions any call frame can ask: ``ctx.ask``, ``ask_input``, ``ask_choice``,
``confirm``, ``ask_action`` and ``ask_custom``, each one awaited call.

``Asking`` is the half of ``ToolContext`` that builds question specs
(``hpd_agent.questions``) and hands them to ``request``; the other half (``_context``) knows
the call frame and the coordinator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, overload

import anyio

from ..exceptions import InvalidAnswerError, QuestionNotAnswered, RequestError
from ..questions import (
    ActionQuestion,
    ChoiceQuestion,
    ConfirmQuestion,
    CustomQuestion,
    InputQuestion,
    TextQuestion,
)
from .requests import RequestSpec

__all__ = ["Asking"]


class Asking(ABC):
    """Question helpers over ``request`` (implemented by ``ToolContext``)."""

    __slots__ = ()
    tool_name: str

    @abstractmethod
    def next_request_id(self) -> str:
        """A request id for the next request of this call, stable across replays."""

    @abstractmethod
    def request(self, spec: RequestSpec, *, timeout: float | None = None) -> Awaitable[Any]:
        """Raise a request; await the result for its answer."""

    @abstractmethod
    async def _request_as(self, spec: RequestSpec, request_id: str, timeout: float | None) -> Any:
        """Raise a request under a given id and wait for its answer."""

    @abstractmethod
    async def _respond(self, request_id: str, answer: Any) -> Any:
        """Answer one of this run's requests (as ``run.respond`` would)."""

    async def ask(
        self,
        question: str,
        *,
        context: str | None = None,
        options: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> str:
        """Ask the human a free-text question and wait for the answer, mid-turn.

        The question reaches the root run's stream as a ``ClarificationRequest`` tagged with
        this agent's path. Time spent waiting does not count against tool timeouts.

        Args:
            question: What to ask.
            context: Why it is asked, shown with the question.
            options: If given, the answer must be one of them.
            timeout: Seconds to wait; None waits as long as the run lives.

        Returns:
            The answer text.

        Raises:
            QuestionNotAnswered: The question expired, was cancelled, or nobody was there.
                Left uncaught, the loop turns it into a plain tool result for the model.
        """

        spec = TextQuestion(question=question, context=context, options=options)
        return str(await self.request(spec, timeout=timeout))

    async def ask_input(
        self,
        argument: str,
        question: str | None = None,
        *,
        context: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Ask the human for the value of a named argument instead of letting the model guess.

        Emits a ``"input"`` question with ``data={"argument": argument, "tool": tool_name}``.

        Args:
            argument: The argument that is missing (e.g. ``"recipient_email"``).
            question: What to ask; defaults to asking for the argument by name.
            context: Why it is needed.
            timeout: Seconds to wait; None waits as long as the run lives.

        Returns:
            The value, stripped of surrounding space (never empty).

        Raises:
            QuestionNotAnswered: The question expired, was cancelled, or nobody was there.
        """

        spec = InputQuestion(
            argument=argument, tool=self.tool_name, question=question, context=context
        )
        return str(await self.request(spec, timeout=timeout))

    @overload
    async def ask_choice(
        self,
        question: str,
        options: Sequence[str],
        *,
        multiple: Literal[False] = False,
        context: str | None = None,
        timeout: float | None = None,
    ) -> str: ...

    @overload
    async def ask_choice(
        self,
        question: str,
        options: Sequence[str],
        *,
        multiple: Literal[True],
        context: str | None = None,
        timeout: float | None = None,
    ) -> list[str]: ...

    async def ask_choice(
        self,
        question: str,
        options: Sequence[str],
        *,
        multiple: bool = False,
        context: str | None = None,
        timeout: float | None = None,
    ) -> str | list[str]:
        """Ask the human to pick one of ``options`` (or several, with ``multiple=True``).

        The human answers with an option or its 0-based index; ``respond`` refuses anything
        else.

        Args:
            question: What to ask.
            options: The choices (distinct, at least one).
            multiple: Let the human pick a list of options.
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.

        Returns:
            The chosen option (its own spelling), or the list of them with ``multiple``.

        Raises:
            QuestionNotAnswered: The question expired, was cancelled, or nobody was there.
        """

        spec = ChoiceQuestion(
            question=question, options=options, multiple=multiple, context=context
        )
        answer: Any = await self.request(spec, timeout=timeout)
        return answer

    async def confirm(
        self, question: str, *, context: str | None = None, timeout: float | None = None
    ) -> bool:
        """Ask the human a yes/no question; the tool decides what "no" means.

        Args:
            question: What to confirm (e.g. "Delete 12 files?").
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.

        Returns:
            True for yes, False for no.

        Raises:
            QuestionNotAnswered: The question expired, was cancelled, or nobody was there.
        """

        spec = ConfirmQuestion(question=question, context=context)
        return bool(await self.request(spec, timeout=timeout))

    async def ask_action(
        self,
        url: str,
        *,
        label: str | None = None,
        question: str | None = None,
        context: str | None = None,
        timeout: float | None = None,
        resolver: Callable[[], Awaitable[bool]] | None = None,
    ) -> bool:
        """Ask the human to do something at ``url`` (e.g. sign in with OAuth) and wait.

        The request is resolved by the human (True: done, False: declined), by the app
        calling ``run.respond(request_id, True)`` when the action's callback arrives, or by
        ``resolver``, whichever comes first.

        Args:
            url: Where the human acts.
            label: Short text for a link or button.
            question: What to tell the human; defaults to asking them to open the URL.
            context: Why it is needed.
            timeout: Seconds to wait; None waits as long as the run lives.
            resolver: Awaited alongside the question (e.g. waits for the OAuth callback);
                its result answers the request unless the human answered first.

        Returns:
            True when the action was completed, False when it was declined.

        Raises:
            QuestionNotAnswered: The question expired, was cancelled, or nobody was there.
        """

        spec = ActionQuestion(url=url, label=label, question=question, context=context)
        if resolver is None:
            return bool(await self.request(spec, timeout=timeout))
        return bool(await _ask_racing(self, spec, resolver, timeout))

    async def ask_custom(
        self,
        name: str,
        question: str,
        *,
        payload: Mapping[str, Any] | None = None,
        schema: Mapping[str, Any] | None = None,
        context: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Ask a question of your own kind: a name and JSON payload, answered with JSON.

        Args:
            name: What kind of question it is, for the handler that shows it.
            question: What to ask.
            payload: JSON data for whoever shows the question.
            schema: A JSON schema the answer must match (checked by ``respond``).
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.

        Returns:
            The answer, as plain JSON data.

        Raises:
            QuestionNotAnswered: The question expired, was cancelled, or nobody was there.
        """

        spec = CustomQuestion(
            name=name, question=question, payload=payload, schema=schema, context=context
        )
        return await self.request(spec, timeout=timeout)


async def _ask_racing(
    asking: Asking,
    spec: RequestSpec,
    resolver: Callable[[], Awaitable[Any]],
    timeout: float | None,
) -> Any:
    """Ask ``spec`` while ``resolver`` runs; whichever answers first wins.

    The resolver's result goes through ``respond`` like a human's answer (checked and
    announced); if the request ended meanwhile it is dropped. An exception from the
    resolver, or an answer ``respond`` refuses, propagates and cancels the question.
    """
    request_id = asking.next_request_id()
    outcome: dict[str, Any] = {}

    async def resolve() -> None:
        # Starts once the asker is waiting, so the request is registered by then.
        try:
            await asking._respond(request_id, await resolver())
        except InvalidAnswerError as e:
            # A resolver giving a wrong answer is a bug in the app: say so.
            outcome["resolver_error"] = e
            tg.cancel_scope.cancel()
        except RequestError:
            pass  # the human answered first, or the request ended: that stands
        except Exception as e:
            outcome["resolver_error"] = e
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(resolve)
        try:
            outcome["value"] = await asking._request_as(spec, request_id, timeout)
        except QuestionNotAnswered as e:
            outcome["error"] = e
        tg.cancel_scope.cancel()
    if "resolver_error" in outcome:
        raise outcome["resolver_error"]
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
