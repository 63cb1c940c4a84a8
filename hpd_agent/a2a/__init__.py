"""A2A (Agent2Agent) both ways: a remote agent as one more sub-agent, whose ``input-required``
is one more question at the root. Needs the ``a2a`` extra: ``pip install -e ".[a2a]"`` in the checkout.

Client: ``RemoteAgent(url).as_tool()`` calls an agent another process serves over A2A like
an agent called as a tool; its questions reach the human at the root of the run, tagged
with the remote's agent path, and a durable run re-attaches to the remote task on resume.

```python
from hpd_agent import Agent
from hpd_agent.a2a import RemoteAgent

planner = RemoteAgent("http://127.0.0.1:8001")
orchestrator = Agent("Orchestrator", model=..., tools=[planner.as_tool()])
```

Server: ``create_app(agent)`` serves an agent over A2A (``hpd-agent serve --a2a
MODULE:ATTR``): the questions of its whole tree reach the caller as ``input-required``, and
the caller's answers, sent in the same task, go on in the same run; a new task in the same
``contextId`` continues the conversation.

``import hpd_agent`` never imports this package (nor ``a2a``). See docs/a2a.md.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("a2a") is None:  # pragma: no cover - an install without the extra
    raise ImportError(
        'hpd_agent.a2a needs the a2a extra: pip install -e ".[a2a]" (in the hpd-agent checkout)'
    )

from ._error import RemoteAgentError
from ._remote import RemoteAgent
from ._server import create_app, is_loopback

__all__ = ["RemoteAgent", "RemoteAgentError", "create_app", "is_loopback"]
