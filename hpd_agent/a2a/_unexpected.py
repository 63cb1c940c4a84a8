"""What an A2A client reads of an error the server did not expect: ``unexpected``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from a2a.utils.errors import A2AError, InternalError

__all__ = ["INTERNAL", "unexpected"]

logger = logging.getLogger("hpd_agent.a2a")

INTERNAL = "Internal server error"
"""All a client reads of an error the server did not expect (it is logged)."""

T = TypeVar("T")


async def unexpected(step: Callable[[], Awaitable[T]], what: str) -> T:
    """``await step()``; an error it raises that is not the protocol's own is logged (to
    the ``hpd_agent.a2a`` logger) and becomes the JSON-RPC ``Internal server error``
    (a2a-sdk would send its text: a path, a lease holder are not the client's to read).
    """
    try:
        return await step()
    except A2AError:
        raise
    except Exception:
        logger.exception("the A2A server failed to %s", what)
        raise InternalError(message=INTERNAL) from None
