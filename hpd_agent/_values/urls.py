"""URLs and hosts: which hosts only this machine reaches, which URLs a person may be sent to.

- ``is_loopback``: a host name or address that only listens on this machine (where a
  server may run without a token; where a plain ``http:`` link stays on this machine).
- ``action_url_problem``: why a URL may not be the link of an ``action`` question (the user
  opens it to sign in, pay, ...), or None. Only a web page qualifies: ``https:``, or
  ``http:`` to a loopback host (a local callback). ``javascript:``, ``data:``, ``file:`` and
  every other scheme run or open something in the user's browser or machine instead; a URL
  holding whitespace, control characters or a backslash is refused too (browsers drop or
  reinterpret them, so the page opened is not the one shown).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from ..text import bounded

__all__ = ["action_url_problem", "is_loopback"]

_SHOWN = 200
_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f\\\u2028\u2029\u200b-\u200f\u202a-\u202e\ufeff]")


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (127.0.0.0/8, ::1, localhost): where a
    server (web, MCP, A2A) may run without a token."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def action_url_problem(url: Any) -> str | None:
    """Why ``url`` may not be an action question's link (see the module), or None."""
    rule = "an action question's URL must be https:// (or http:// to this machine)"
    if not isinstance(url, str):
        return f"{rule}, got {type(url).__name__}"
    shown = bounded(repr(url), _SHOWN)
    if _UNSAFE.search(url) is not None:
        return f"{rule} with no spaces, control characters or backslashes, got {shown}"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:  # a malformed IPv6 literal, a bad port
        return f"{rule}, got {shown}"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and is_loopback(host) and "@" not in parts.netloc:
        return None
    return f"{rule}, got {shown}"
