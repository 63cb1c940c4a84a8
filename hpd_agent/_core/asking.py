"""The typed questions a tool asks from its frame: ``ToolContext``'s ``ask*`` methods.

``Asking`` is a mixin of ``ToolContext``: ``ask``, ``ask_input``, ``ask_choice``,
``confirm``, ``ask_action`` (racing a resolver), ``ask_custom``, ``ask_kind`` (a registered
kind) and ``ask_permission``. Each
builds its question (a ``RequestSpec`` of ``hpd_agent.questions`` or ``permissions``) and
raises it through the frame's ``request``, so its id comes from the call's path. A mixin with
no slots of its own: a frame is made for every tool call and stays as small as it was.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import anyio

from ..coordinator import Coordinator
from ..exceptions import InvalidAnswerError, QuestionNotAnswered, RequestError
from ..permissions import Deny, PermissionSpec
from ..questions import (
    ActionQuestion,
    ChoiceQuestion,
    ConfirmQuestion,
    CustomQuestion,
    InputQuestion,
    KindQuestion,
    TextQuestion,
)
from .requests import RequestSpec

__all__ = ["Asking"]


class Asking:
    """The typed questions of a tool call's frame (``ToolContext``'s, documented there)."""

    __slots__ = ()

    if TYPE_CHECKING:
        # Declared for the type checker only: ToolContext sets and defines these, and under
        # TYPE_CHECKING no class attribute here can stand in for them at run time.
        coordinator: Coordinator
        run_id: str
        agent_path: tuple[str, ...]
        depth: int
        tool_name: str
        tool_call_id: str
        invocation_id: str

        def request(self, spec: RequestSpec, *, timeout: float | None = None) -> Awaitable[Any]: ...
        def next_request_id(self) -> str: ...

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
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
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
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
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
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
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
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
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
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
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
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """

        spec = CustomQuestion(
            name=name, question=question, payload=payload, schema=schema, context=context
        )
        return await self.request(spec, timeout=timeout)

    async def ask_kind(
        self,
        name: str,
        question: str,
        *,
        data: Mapping[str, Any] | None = None,
        context: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Ask a question of a registered kind (``hpd_agent.questions.register_kind``).

        The kind's answer schema for ``data`` is resolved now and travels with the request,
        so every path an answer takes (``run.respond``, a store's ``respond`` in another
        process, the web, MCP and A2A servers, Temporal) checks it the same way.

        Args:
            name: The kind's name.
            question: What to ask.
            data: The kind's details (JSON data), as its answer schema and parser read them.
            context: Why it is asked.
            timeout: Seconds to wait; None waits as long as the run lives.

        Returns:
            The answer, as plain JSON data matching the kind's answer schema.

        Raises:
            UserError: No kind ``name`` is registered, or its answer schema for ``data`` is
                not a safe, valid JSON Schema.
            QuestionNotAnswered: Declined by the user, expired, cancelled, or nobody was there.
        """

        spec = KindQuestion(name, question=question, data=data, context=context)
        return await self.request(spec, timeout=timeout)

    async def ask_permission(
        self, tool_name: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> str | None:
        """Ask the human whether ``tool_name`` may run with ``arguments``.

        Returns:
            None when the call may run; otherwise the text the model gets instead of a result
            (denied, declined: the user would not say, or unanswered).
        """
        if (self.agent_path, tool_name) in self.coordinator.run_approvals:
            return None
        try:
            decision = await self.request(PermissionSpec(tool_name, arguments), timeout=timeout)
        except QuestionNotAnswered as e:
            if e.status == "declined":
                return (
                    f"The tool {tool_name!r} did not run: the user declined to answer "
                    "whether it may run."
                )
            return f"The tool {tool_name!r} did not run: it needs the user's approval. {e}"
        if isinstance(decision, Deny):
            reason = f" Reason: {decision.reason}" if decision.reason else ""
            return f"The user denied permission to run {tool_name!r}.{reason}"
        return None


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
            await asking.coordinator.respond(request_id, await resolver())
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
            outcome["value"] = await asking.coordinator.request(
                asking, spec, request_id=request_id, timeout=timeout
            )
        except QuestionNotAnswered as e:
            outcome["error"] = e
        tg.cancel_scope.cancel()
    if "resolver_error" in outcome:
        raise outcome["resolver_error"]
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
