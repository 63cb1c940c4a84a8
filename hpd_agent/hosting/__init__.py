"""What every protocol adapter (web, MCP, A2A) stands on: the runs a server hosts and the rules
of who may reach it.

- ``RunHost`` / ``HostedRun``: runs a server hosts in its task group, found again by id (maybe
  on another connection, maybe after a restart), resumed from the store when this process does
  not hold them.
  A run another process drives (``HostedRun.elsewhere``) is answered through the store
  (``given`` reads why an answer was refused either way).
- ``public_error``: what a client may read of a run's failure (no run id, no lease holder).
- ``is_loopback``: where a server may run without a token.
"""

from ..exceptions import UnknownRunError
from ._errors import public_error
from ._guard import is_loopback
from ._runs import HostedRun, RunHost, given

__all__ = ["HostedRun", "RunHost", "UnknownRunError", "given", "is_loopback", "public_error"]
