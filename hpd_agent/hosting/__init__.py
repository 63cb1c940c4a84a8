"""What every protocol adapter (web, MCP, A2A) stands on: the runs a server hosts and the rules
of who may reach it.

- ``RunHost`` / ``HostedRun``: runs a server hosts in its task group, found again by id (maybe
  on another connection, maybe after a restart), resumed from the store when this process does
  not hold them.
  A run another process drives (``HostedRun.elsewhere``) is answered through the store
  (``StoreRelay``; ``given`` reads why an answer was refused either way), followed there
  until it moves on (``RunHost.moved_on``) and cancelled through it (``RunHost.cancel``).
- ``Guard``: who may reach a server, in front of every route of every server we ship (web,
  A2A, MCP over HTTP): the Host and Origin rules, the bearer token (its name put in the
  request's scope under ``IDENTITY``), JSON bodies of bounded size.
- ``public_error``: what a client may read of a run's failure, raised or stored (no run id,
  no lease holder).
- ``is_loopback``: where a server may run without a token.
"""

from ..exceptions import UnknownRunError
from ._errors import public_error
from ._guard import DEFAULT_MAX_BODY, IDENTITY, LOCAL, TOKEN, Guard, is_loopback
from ._relay import StoreRelay
from ._runs import HostedRun, RunHost, given

__all__ = [
    "DEFAULT_MAX_BODY",
    "IDENTITY",
    "LOCAL",
    "TOKEN",
    "Guard",
    "HostedRun",
    "RunHost",
    "StoreRelay",
    "UnknownRunError",
    "given",
    "is_loopback",
    "public_error",
]
