"""Handlers answer a run's requests and watch its events: ``Agent.run(prompt, handler=...)``.

``Handler`` is the protocol; ``BaseHandler`` gives it defaults to override; ``serve`` drives a
``Run`` with a handler (what ``Agent.run`` does when given one); ``ConsoleHandler`` runs it
in a terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import BaseHandler, Handler, serve

if TYPE_CHECKING:
    from .console import ConsoleHandler


def __getattr__(name: str) -> Any:
    # The console pulls in rich: load it only when asked for.
    if name == "ConsoleHandler":
        from .console import ConsoleHandler

        return ConsoleHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BaseHandler", "ConsoleHandler", "Handler", "serve"]
