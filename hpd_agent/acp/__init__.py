"""The Agent Client Protocol (ACP) both ways (extra ``acp``): an agent tree served to code
editors, and an editor's agent used as a sub-agent. See docs/acp.md.

Client: ``ACPAgent(command, args).as_tool()`` goes into ``Agent(tools=[...])``: an ACP
agent (Claude Code's ACP adapter, Gemini CLI, ``hpd-agent acp``) run as a process of the
root run, one session per call. Its permission requests reach the root run's stream as
``PermissionRequest``s, its form elicitations as ``"custom"`` questions whose
``data["name"]`` is ``ELICITATION``; answering with ``Decline()`` (``hpd_agent.Decline``,
re-exported here) declines them. A call that fails is an ``ACPAgentError`` result.

``import hpd_agent`` never imports this package.
"""

from __future__ import annotations

from ..questions import Decline
from ._client import ELICITATION, ACPAgent, ACPAgentError
from ._server import serve_stdio

__all__ = ["ELICITATION", "ACPAgent", "ACPAgentError", "Decline", "serve_stdio"]
