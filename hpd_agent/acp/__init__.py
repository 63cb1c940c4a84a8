"""The Agent Client Protocol (ACP) both ways (extra ``acp``): an agent tree served to code
editors, and an editor's agent used as a sub-agent. See docs/acp.md.

``import hpd_agent`` never imports this package.
"""

from ._server import serve_stdio

__all__ = ["serve_stdio"]
