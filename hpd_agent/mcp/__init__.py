"""MCP both ways (extra ``mcp``): an agent uses an MCP server's tools, and is served as one.

Client: ``MCPTools.stdio(...)`` / ``MCPTools.http(...)`` go into ``Agent(tools=[...])``
beside plain tools. A server's question during a call (elicitation, on protocol 2025-11-25
or 2026-07-28) reaches the root run's stream as a question of the calling tool: a form is
a ``"custom"`` question whose ``data["name"]`` is ``ELICITATION``, a URL an ``"action"``
question; answering with ``Decline()`` (``hpd_agent.Decline``, re-exported here) declines
it.

Server: ``mcp_server(agent)`` serves an agent as one MCP tool named after it; every question
asked in its tree during a call reaches the MCP client as an elicitation, once the run has
settled (``hpd-agent mcp MODULE:ATTR`` serves it over stdio or streamable HTTP). See
docs/mcp.md.

``import hpd_agent`` does not import this package (nor the ``mcp`` SDK): import it where
you use it.
"""

from __future__ import annotations

from ..questions import Decline
from ._client_elicitation import ELICITATION
from ._client_errors import MCPServerError, MCPToolError
from ._server import mcp_server
from ._tools import MCPTools, Mode, ServerTool

__all__ = [
    "ELICITATION",
    "Decline",
    "MCPServerError",
    "MCPToolError",
    "MCPTools",
    "Mode",
    "ServerTool",
    "mcp_server",
]
