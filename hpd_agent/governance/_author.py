"""Who answered: the identities the shipped surfaces give an answer's ``Author``.

The value itself (``Author``) and the channel names (``Channel``, ``CHANNELS``) are the
core's (``hpd_agent.backend``: the core carries them with every answer and cannot import
this package); here is how an identity is found where the surface does not bring one.
"""

from __future__ import annotations

import getpass

from ..backend import Author

__all__ = ["GRANT_PREFIX", "grant_author", "os_user"]

GRANT_PREFIX = "grant:"
"""How a remembered grant is named as an author: ``grant:<id>``."""


def os_user() -> str | None:
    """The operating-system user running this process (who answers at a console or with
    ``hpd-agent answer`` unless ``--as`` says otherwise); None when it cannot be told (no
    such user in the password database and no ``LOGNAME``/``USER``/``USERNAME``)."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):  # a container's uid with no passwd entry, say
        return None
    return name or None


def grant_author(grant_id: str) -> Author:
    """The author of an answer a remembered grant gave: ``grant:<id>`` on channel
    ``"grant"``."""
    return Author(f"{GRANT_PREFIX}{grant_id}", "grant")
