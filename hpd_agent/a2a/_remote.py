"""``RemoteAgent``: an agent served elsewhere over A2A, called like a sub-agent."""

from __future__ import annotations

import asyncio
import re
import ssl
import sys
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import anyio.to_thread
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard
from a2a.utils.errors import A2AError

from ..exceptions import UserError
from ..text import bounded, error_text
from ..tools import ApprovalPolicy, Tool, ToolContext
from ._call import RemoteCall
from ._error import RemoteAgentError

__all__ = ["RemoteAgent"]

_TIMEOUT = httpx.Timeout(30.0, read=None)
"""Connecting and sending give up after 30 s; reading waits (a task may work for long)."""
_LIMITS = httpx.Limits(max_keepalive_connections=0)
"""No idle connection kept: a call's streams end early (at the state waited for), which
closes their connections anyway."""
_NOT_A_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_ssl_context: ssl.SSLContext | None = None


async def _ssl() -> ssl.SSLContext:
    """One TLS context for every client (building one costs ~40 ms: once, off the loop)."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = await anyio.to_thread.run_sync(httpx.create_ssl_context)
    return _ssl_context


class RemoteAgent:
    """An agent another process serves over A2A (Agent2Agent), used as one more sub-agent.

    ``remote.as_tool()`` gives a tool taking ``{"query": str}``, like ``Agent.as_tool``. A
    call sends the query as a task (streaming when the agent card allows), follows the task
    and relays what it asks: a question the remote task waits for (``input-required``)
    reaches the root run's stream as a ``ClarificationRequest`` whose ``agent_path`` is the
    caller's path, the remote agent's name, then the path the remote reports below itself;
    the answer goes back in the same task and context. The tool's result is the completed
    task's artifacts (else its last agent message); a task that failed, was rejected or was
    canceled gives the calling model an error result naming the state. Cancelling the run
    cancels the remote task. With a store, the remote task's id is journaled as soon as the
    task exists, and a resumed run re-attaches to it instead of sending the query again.
    See docs/a2a.md.

    Args:
        url: The remote agent's base URL (its card is at ``/.well-known/agent-card.json``).
        name: Its name in agent paths and the tool's default name; default: the card's.
        headers: HTTP headers sent with every request (e.g. ``Authorization``).

    Raises:
        UserError: The URL is not ``http://`` or ``https://``, or the name is empty.
    """

    def __init__(
        self, url: str, *, name: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None  # pyright: ignore[reportUnnecessaryIsInstance]
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise UserError(f"RemoteAgent needs an http:// or https:// URL, got {url!r}")
        if name is not None and not name:
            raise UserError("RemoteAgent's name must not be empty")
        self.url = url
        self.headers = dict(headers or {})
        self._name = name
        self._card: AgentCard | None = None
        self._calls: tuple[anyio.lowlevel.EventLoopToken, Client] | None = None

    def __repr__(self) -> str:
        return f"RemoteAgent({self.url!r}, name={self.name!r})"

    @property
    def name(self) -> str | None:
        """The name given, else the agent card's once it has been read, else None."""
        if self._name is not None:
            return self._name
        return self._card.name if self._card is not None and self._card.name else None

    @property
    def card(self) -> AgentCard | None:
        """The agent card, once read (``read_card``), else None."""
        return self._card

    async def read_card(self) -> AgentCard:
        """Read the agent card (once: later calls return it again).

        Raises:
            RemoteAgentError: The card cannot be fetched or read, or names no agent when
                this ``RemoteAgent`` was given no name.
        """
        if self._card is None:
            async with self._http(httpx.Timeout(30.0)) as http:
                try:
                    card = await A2ACardResolver(http, self.url).get_agent_card()
                except (A2AError, httpx.HTTPError) as e:
                    raise RemoteAgentError(
                        bounded(f"cannot read the agent card at {self.url}: {error_text(e)}")
                    ) from None
            if not card.name and self._name is None:
                raise RemoteAgentError(f"the agent card at {self.url} has no name: give name=")
            self._card = card
        return self._card

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        requires_approval: ApprovalPolicy = False,
    ) -> Tool:
        """The remote agent as a tool taking ``{"query": str}`` and returning its answer.

        Building the tool needs the agent's name: without ``name`` here or in the
        constructor, the card is read now, with a blocking request (so at import time or
        in synchronous code; inside a running event loop, ``await remote.read_card()``
        first, or give a name). The card's description is used when it has been read.

        Args:
            name: Tool name; default: the agent's name (made a valid tool name).
            description: For the calling model; default: the card's description.
            requires_approval: Ask the human before each call; see ``Tool``.

        Raises:
            UserError: The card would have to be read inside a running event loop.
            RemoteAgentError: The card cannot be read.
        """
        if name is None and self.name is None:
            self._read_card_now()
        agent_name = self.name or name or "remote_agent"
        card = self._card
        remote = self

        async def call_remote(ctx: ToolContext, query: str) -> str:
            """Send a task to the remote agent and get its answer.

            Args:
                query: The task or question for the agent, with every detail it needs.
            """
            return await remote.call(ctx, query)

        tool = Tool(
            call_remote,
            name=name or _tool_name(agent_name),
            description=description
            or (card.description if card is not None and card.description else None)
            or f"Delegate a task to the remote agent {agent_name} and get its answer.",
            requires_approval=requires_approval,
        )
        tool.agent = self
        return tool

    async def call(self, ctx: ToolContext, query: str) -> str:
        """Send ``query`` from the tool call ``ctx`` and follow the task to its answer (what
        the tool of ``as_tool`` does; for a tool of your own that calls the remote agent).

        Returns:
            The completed task's artifacts' text, else its last agent message's.

        Raises:
            RemoteAgentError: The task failed, was rejected or canceled, needs an
                authentication nobody gave, or the remote could not be reached.
            QuestionNotAnswered: A question of the remote ended unanswered (the remote task
                is canceled).
        """
        card = await self.read_card()
        client = await self._client(card)
        call = RemoteCall(
            self._name or card.name, ctx, client, streaming=card.capabilities.streaming
        )
        return await call.run(query)

    # -- connections -----------------------------------------------------------------------
    @asynccontextmanager
    async def _http(self, timeout: httpx.Timeout = _TIMEOUT) -> AsyncGenerator[httpx.AsyncClient]:
        http = httpx.AsyncClient(headers=self.headers, timeout=timeout, verify=await _ssl())
        try:
            yield http
        finally:
            with anyio.CancelScope(shield=True):
                await http.aclose()

    async def _client(self, card: AgentCard) -> Client:
        """An a2a-sdk client over this event loop's HTTP client (made once per loop: a
        remote agent serves many calls; none keeps a connection open between requests, so
        a client left behind by a finished loop holds no socket)."""
        token = anyio.lowlevel.current_token()
        if self._calls is None or self._calls[0] != token:
            http = httpx.AsyncClient(
                headers=self.headers, timeout=_TIMEOUT, verify=await _ssl(), limits=_LIMITS
            )
            config = ClientConfig(streaming=True, httpx_client=http)
            try:
                client = ClientFactory(config).create(card)
            except ValueError as e:
                raise RemoteAgentError(
                    f"the agent card at {self.url} offers no interface this client speaks "
                    f"(JSON-RPC): {e}"
                ) from None
            self._calls = (token, client)
        return self._calls[1]

    def _read_card_now(self) -> None:
        loop = _running_loop()
        if loop is not None:
            raise UserError(
                f"RemoteAgent({self.url!r}).as_tool() needs the agent's name from its card: "
                f"inside a running {loop} event loop, `await remote.read_card()` first, or "
                "give a name"
            )
        anyio.run(self.read_card)


def _tool_name(name: str) -> str:
    """``name`` as a tool name (1-64 letters, digits, ``_`` or ``-``)."""
    return _NOT_A_NAME.sub("_", name).strip("_")[:64] or "remote_agent"


def _running_loop() -> str | None:
    """The event loop running in this thread (``"asyncio"`` or ``"trio"``), or None."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        return "trio"
    return None
