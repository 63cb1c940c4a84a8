"""Where a server may be reached from: the loopback rule every server we ship applies."""

from __future__ import annotations

from .._values.urls import is_loopback  # shared with the action questions' URL rule

__all__ = ["is_loopback"]
