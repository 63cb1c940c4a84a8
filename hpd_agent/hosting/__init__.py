"""What every protocol adapter (web, MCP, A2A) stands on: the runs a server hosts and the rules
of who may reach it.

- ``RunHost`` / ``HostedRun``: runs a server hosts in its task group, found again by id (maybe
  on another connection, maybe after a restart), resumed from the store when this process does
  not hold them.
- ``is_loopback``: where a server may run without a token.
"""

from ..exceptions import UnknownRunError
from ._guard import is_loopback
from ._runs import HostedRun, RunHost

__all__ = ["HostedRun", "RunHost", "UnknownRunError", "is_loopback"]
