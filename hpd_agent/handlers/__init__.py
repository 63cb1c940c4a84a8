"""Handlers answer a run's requests and watch its events: ``Agent.run(prompt, handler=...)``.

``Handler`` is the protocol; ``BaseHandler`` gives it defaults to override; ``serve`` drives a
``Run`` with a handler (what ``Agent.run`` does when given one); ``ConsoleHandler`` runs it
in a terminal.
"""

from __future__ import annotations

from ._base import BaseHandler, Handler, serve
from .console import ConsoleHandler

__all__ = ["BaseHandler", "ConsoleHandler", "Handler", "serve"]
