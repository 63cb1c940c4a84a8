"""Where a run's requests are kept: the ``RequestBackend`` protocol a store implements.

The coordinator calls its run's backend around every request to the human: ``open``
before the request's event goes out (a durable backend writes it first), ``wait`` while
the asker waits for an answer from outside (another process, a later resume), ``resolve``
when it ends. The default keeps nothing (the run's memory is enough); ``hpd_agent.store``
supplies a durable one through a run's session (``hpd_agent.sessions``), and a workflow
engine may bring its own. A durable backend may also be a ``RequestMemory``: what it
remembers of a request across the lives of its run (a store's does).

Every answer and decline has an author: ``Author(by, channel)``, who gave it and on which
channel, handed to ``resolve`` with it (a backend keeps it with the answer, once) and put on
the resolved event. An ``AnswerPolicy`` may refuse an author before anything is written
(``check_policy``); ``hpd_agent.governance`` has a ready one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from ._values.records import Author, RequestRecord
from .events import RequestEvent, format_path
from .exceptions import AnswerRefusedError
from .text import shown

__all__ = [
    "API",
    "CHANNELS",
    "AnswerPolicy",
    "Author",
    "Authored",
    "Channel",
    "Final",
    "Reopened",
    "RequestBackend",
    "RequestMemory",
    "Settlement",
    "check_policy",
]

Final = Literal["answered", "declined", "expired", "cancelled"]
"""How a kept request ended, as a backend records it."""

Channel = Literal["console", "cli", "web", "inbox", "mcp", "a2a", "acp", "temporal", "api", "grant"]
"""The channels an answer comes on, as the shipped surfaces name them: the console handler,
``hpd-agent answer``, the web page, the inbox, MCP, A2A, ACP, Temporal, code calling
``respond`` (``"api"``), a remembered grant. An adapter of your own names its own."""

CHANNELS: tuple[str, ...] = get_args(Channel)
"""The shipped channel names, in ``Channel``'s order."""


API = Author(None, "api")
"""The author of an answer given by code that names nobody (``run.respond`` without ``by``)."""


@dataclass(frozen=True, slots=True)
class Authored:
    """An answer handed over with its author where no ``by`` keyword reaches it: a value of
    ``Agent.resume(answers=...)`` (``hpd-agent resume --answer``, AG-UI's ``resume``).

    Attributes:
        answer: The answer (or ``Decline()``).
        author: Who gave it, on which channel.
    """

    answer: Any
    author: Author


@dataclass(frozen=True, kw_only=True, slots=True)
class Settlement:
    """How a request ended outside this coroutine (a store: an earlier life, another process).

    Attributes:
        status: How it ended.
        answer: The stored answer (JSON data) when answered.
        waited: For an expired request, the seconds it had been given, when known.
        author: Who answered or declined it, as kept with the answer (None otherwise).
    """

    status: Final
    answer: Any = None
    waited: float | None = None
    author: Author | None = None
    """Who answered or declined it, when it was answered or declined and the keeper
    recorded it."""


class RequestBackend(Protocol):
    """Where a run's requests live; the coordinator calls it around every request.

    ``LocalRequests`` (the default) keeps nothing; ``hpd_agent.store`` supplies a durable one.
    """

    @property
    def durable(self) -> bool:
        """Whether others (another process, a later resume) can answer requests kept here."""
        ...

    def alias_of(self, request_id: str) -> str | None:
        """For a request that an earlier life merged into an identical one, that one's id."""
        ...

    async def record_alias(self, request_id: str, first_id: str) -> None:
        """Remember that ``request_id`` was merged into the identical ``first_id``."""
        ...

    async def open(
        self, event: RequestEvent, timeout: float | None
    ) -> tuple[Settlement | None, float | None]:
        """Keep a request before its event goes out.

        Returns:
            How it already ended (an earlier life raised it) or None, and the timeout left.
        """
        ...

    async def wait(self, request_id: str) -> Settlement:
        """Wait until the request is resolved from outside (only called when durable)."""
        ...

    async def resolve(
        self, request_id: str, status: Final, answer: Any, *, author: Author | None = None
    ) -> None:
        """Write how a request ended; raises ``RequestError`` if it had already ended.

        ``author`` comes with an answer or a decline (None when the request expired or was
        cancelled): keep it with the outcome, once, and give it back in its
        ``Settlement``. A backend whose ``resolve`` takes no ``author`` keyword still works
        (it is then not passed): such a backend keeps no author.
        """
        ...

    async def settlement(self, request_id: str) -> tuple[RequestEvent, Settlement | None] | None:
        """A kept request's event and how it ended (None while pending); None if unknown."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Reopened:
    """A request ``open`` found kept, still pending, from an earlier life of its run.

    Attributes:
        expires_at: The deadline that life gave it (seconds since the epoch; None: none).
        warned: Whether its expiry warning went out then (``RequestMemory.record_warning``).
    """

    expires_at: float | None
    warned: bool = False


@runtime_checkable
class RequestMemory(Protocol):
    """Optional, beside ``RequestBackend``: what a durable backend remembers of a request
    across the lives of its run. The coordinator uses it when its backend has it: a request
    an earlier life opened is announced to hooks as ``replayed`` (not new: nobody is
    notified twice), keeps its deadline, and its expiry warning goes out once.
    """

    def reopened(self, request_id: str) -> Reopened | None:
        """Asked once, right after ``open`` returned no settlement: the request as an earlier
        life of the run kept it, or None when ``open`` just created it."""
        ...

    async def record_warning(self, request_id: str) -> None:
        """Remember that the request's expiry warning goes out (written before it does)."""
        ...


class AnswerPolicy(Protocol):
    """Decides who may answer (or decline) which request: ``run.respond(..., policy=)``,
    ``hpd_agent.store.respond(..., policy=)`` and the servers ask it before anything is
    written. ``hpd_agent.governance.PathPolicy`` is a ready one.
    """

    def allows(self, identity: str, request: RequestRecord) -> bool | str:
        """True when ``identity`` may answer ``request`` (a pending record); False, or a
        string saying why not, to refuse."""
        ...


def check_policy(policy: AnswerPolicy | None, by: str | None, request: RequestRecord) -> None:
    """Raise ``AnswerRefusedError`` unless ``policy`` lets ``by`` answer ``request``.

    No policy allows everyone; under a policy an answer needs an identity. Only ``True``
    from ``allows`` allows; a string is the refusal's reason (bounded in the message).
    An exception from the policy is raised as it is (nothing is written either way).
    """
    if policy is None:
        return
    rid = request.request_id
    if by is None:
        raise AnswerRefusedError(
            f"request {rid}: an answer under a policy needs an identity", request_id=rid
        )
    verdict = policy.allows(by, request)
    if verdict is True:
        return
    reason = verdict if isinstance(verdict, str) and verdict else "the policy does not allow it"
    where = format_path(request.agent_path)
    raise AnswerRefusedError(
        f"{shown(by)} may not answer request {rid} ({where}): {reason}", request_id=rid
    )
