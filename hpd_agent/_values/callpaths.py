"""The call paths of a frame that relays questions for other agents
(``ToolContext.on_behalf_of``): a relayed question's request id derives from its frame's
path, so the path must be the same on every replay and never shared by two frames.
"""

from __future__ import annotations

import json

__all__ = ["relayed_paths"]


def relayed_paths(
    own: str, levels: tuple[tuple[str, ...], ...], names: tuple[str, ...], key: str
) -> tuple[str, str]:
    """The paths of a frame relaying for ``names`` under ``key`` (``on_behalf_of``): the
    agent's (its invocation id derives from it) and the frame's (its request ids do).

    Injective: different names, keys or levels never share a path, whatever text the names
    and keys hold (a remote chooses them). A first level whose names hold no ``/`` or ``#``
    keeps the form it always had, ``{own}>{names joined by /}#{key}``, because journals of
    durable runs replay answers by the request ids derived from it: the names end at the
    first ``#``, the key runs to the end, and the names are not empty, so no such path
    starts ``{own}>#``. Every other frame's paths do: ``{own}>#`` and the JSON list of its
    levels (the agent's path: the last level's names without the key).
    """
    if not levels and not any("/" in n or "#" in n for n in names):
        below = f"{own}>{'/'.join(names)}"
        return below, f"{below}#{key}"
    below = json.dumps([*levels, names], separators=(",", ":"))
    path = json.dumps([*levels, (*names, key)], separators=(",", ":"))
    return f"{own}>#{below}", f"{own}>#{path}"
