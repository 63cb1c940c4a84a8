"""``MCPTools``: an MCP server's tools for an agent (a ``hpd_agent.tools.Toolset``).

The server is reached when a call of an agent holding it first starts in a root run; its
tools are listed then, each becoming a ``Tool`` the model sees with the server's name
(``prefix_`` in front when given), description and input schema. Calling one calls the
server's tool through ``_client.Connections``; the result's text is the tool's result, and
``isError`` makes it that call's error result (``MCPToolError``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import mcp_types as types

from ..exceptions import UserError
from ..tools import RunResources, Tool, ToolContext, Toolset
from ._client import Address, Connections
from ._client_errors import MCPToolError

__all__ = ["MCPTools", "Mode"]

Mode = Literal["auto", "legacy"]
"""How a connection picks its protocol: ``"auto"`` (2026-07-28 when the server speaks it,
else the initialize handshake of 2025-11-25) or ``"legacy"`` (always 2025-11-25)."""

_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,40}")


class MCPTools(Toolset):
    """The tools of an MCP server, in ``Agent(tools=[...])`` beside plain tools.

    Build one with ``MCPTools.stdio(...)`` (a server run as a subprocess) or
    ``MCPTools.http(...)`` (a streamable HTTP endpoint). The server is reached when a call
    of an agent holding it first starts in a root run, and left when that root run ends
    (a stdio server's process ends then). A question the server asks during a call
    (elicitation, on either protocol version) reaches the root run's stream as the calling
    tool's question; see docs/mcp.md.
    """

    def __init__(self, address: Address, prefix: str | None) -> None:
        if prefix is not None and _PREFIX.fullmatch(prefix) is None:
            raise UserError(
                f"an MCP tool prefix is 1-40 letters, digits, '_' or '-', got {prefix!r}"
            )
        if address.mode not in ("auto", "legacy"):
            raise UserError(f"mode must be 'auto' or 'legacy', got {address.mode!r}")
        self.address = address
        self.prefix = prefix

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        prefix: str | None = None,
        mode: Mode = "auto",
    ) -> MCPTools:
        """A server run as a subprocess, spoken to over its stdin and stdout.

        Args:
            command: The program (found on ``PATH``).
            args: Its arguments.
            env: Environment variables for it, over the SDK's default environment (a few
                safe variables such as ``PATH`` and ``HOME``: not the whole of this
                process's); None gives it that default alone.
            cwd: Its working directory (default: this process's).
            prefix: Put ``prefix_`` in front of every tool name the model sees.
            mode: The protocol; see ``Mode``.
        """
        if not command:
            raise UserError("MCPTools.stdio needs a command")
        label = f"MCP server {_stdio_name(command, args)}"
        return cls(
            Address(
                label=label,
                mode=mode,
                command=command,
                args=tuple(args),
                env=None if env is None else dict(env),
                cwd=None if cwd is None else os.fspath(cwd),
            ),
            prefix,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        mode: Mode = "auto",
    ) -> MCPTools:
        """A server at a streamable HTTP endpoint (e.g. ``http://127.0.0.1:8000/mcp``).

        Args:
            url: The endpoint.
            headers: Sent with every request (e.g. ``Authorization``).
            prefix: Put ``prefix_`` in front of every tool name the model sees.
            mode: The protocol; see ``Mode``.
        """
        if not url.startswith(("http://", "https://")):
            raise UserError(f"MCPTools.http needs an http(s) URL, got {url!r}")
        return cls(
            Address(
                label=f"MCP server {_http_name(url)}",
                mode=mode,
                url=url,
                headers=dict(headers or {}),
            ),
            prefix,
        )

    @property
    def label(self) -> str:
        """The server, for messages and question payloads: ``MCP server`` and the command
        with its first argument (``python server.py``), or the URL without credentials or
        query; never the rest, which may hold secrets (an error text reaches the model)."""
        return self.address.label

    def __repr__(self) -> str:
        return f"MCPTools({self.address.label!r})"

    async def resolve(self, resources: RunResources) -> Sequence[Tool]:
        """Connect (for the rest of the root run) and list the server's tools.

        Raises:
            MCPServerError: The server cannot be reached or refused to list its tools.
        """
        connections = Connections(self.address, resources)
        first = await connections.open()
        listed = await connections.list_tools(first)
        connections.keep(first)
        return [ServerTool(connections, t, _tool_name(self.prefix, t.name)) for t in listed]


async def _never() -> None:  # a ServerTool's function: ServerTool.call is what runs
    """Call the server's tool."""


class ServerTool(Tool):
    """One tool of an MCP server, as the model sees it and calls it."""

    __slots__ = ("_connections", "server_name")

    def __init__(self, connections: Connections, listed: types.Tool, name: str) -> None:
        super().__init__(
            _never,
            name=name,
            description=listed.description or listed.title or f"The {listed.name} tool.",
            parameters=listed.input_schema,
        )
        self._connections = connections
        self.server_name = listed.name
        """The tool's name on the server (``name`` is what the model sees)."""

    async def call(self, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        """Call the server's tool; its text is the result.

        Raises:
            MCPToolError: The server's tool reported an error (``isError``).
            MCPServerError: The server failed the call.
        """
        result = await self._connections.call(ctx, self.server_name, arguments)
        text = _result_text(result)
        if result.is_error:
            raise MCPToolError(text or "the tool failed and said nothing more")
        return text


def _stdio_name(command: str, args: Sequence[str]) -> str:
    first = next((a for a in args if not a.startswith("-")), None)
    parts = [os.path.basename(command), *([] if first is None else [first])]
    return shlex.join(parts)


def _http_name(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _tool_name(prefix: str | None, name: str) -> str:
    """The name the model sees: ``prefix_name``, each character a tool name cannot hold
    made ``_``, cut to 64."""
    full = f"{prefix}_{name}" if prefix else name
    return re.sub(r"[^A-Za-z0-9_-]", "_", full)[:64] or "tool"


def _result_text(result: types.CallToolResult) -> str:
    """What the model reads of a result: its text blocks; other blocks named; the
    structured content as JSON when there is no text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        else:  # an embedded resource
            text = getattr(block.resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource: {block.resource.uri}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content)
    return "\n".join(parts)
