"""What every protocol adapter (web, MCP, A2A) stands on: the runs a server hosts and the rules
of who may reach it.

- ``RunHost`` / ``HostedRun``: runs a server hosts in its task group, found again by id (maybe
  on another connection, maybe after a restart), resumed from the store when this process does
  not hold them.
- ``Guard``: who may reach a server, in front of every route of every server we ship (web,
  A2A, MCP over HTTP): the Host and Origin rules, the bearer token (its name put in the
  request's scope under ``IDENTITY``), JSON bodies of bounded size.
- ``is_loopback``: where a server may run without a token.
"""

from ..exceptions import UnknownRunError
from ._guard import DEFAULT_MAX_BODY, IDENTITY, LOCAL, TOKEN, Guard, is_loopback
from ._runs import HostedRun, RunHost

__all__ = [
    "DEFAULT_MAX_BODY",
    "IDENTITY",
    "LOCAL",
    "TOKEN",
    "Guard",
    "HostedRun",
    "RunHost",
    "UnknownRunError",
    "is_loopback",
]
