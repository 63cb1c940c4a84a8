"""Who answered: the identities the shipped surfaces give an answer's ``Author``.

The value itself (``Author``) and the channel names (``Channel``, ``CHANNELS``) are the
core's (``hpd_agent.backend``: the core carries them with every answer and cannot import
this package); here is how an identity is found where the surface does not bring one. A
remembered grant's (``grant_author``: ``grant:<id>`` on channel ``"grant"``) is the core's
too (``hpd_agent.permissions``), named here with the others.
"""

from __future__ import annotations

import getpass

from ..permissions import grant_author

__all__ = ["grant_author", "os_user"]


def os_user() -> str | None:
    """The operating-system user running this process (who answers at a console or with
    ``hpd-agent answer`` unless ``--as`` says otherwise); None when it cannot be told (no
    such user in the password database and no ``LOGNAME``/``USER``/``USERNAME``)."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):  # a container's uid with no passwd entry, say
        return None
    return name or None
