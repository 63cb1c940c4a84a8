"""MCP both ways (extra ``mcp``): an agent served as an MCP tool whose questions reach the
client as elicitations (``mcp_server``; ``hpd-agent mcp MODULE:ATTR``). ``import hpd_agent``
does not load it. See docs/mcp.md.
"""

from __future__ import annotations

from ._server import mcp_server

__all__ = ["mcp_server"]
