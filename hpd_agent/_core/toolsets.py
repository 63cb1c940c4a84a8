"""An agent's toolsets resolved into tools for one root run (``resolve_tools``).

``AgentSpec.toolsets`` holds what ``Agent(tools=[...])`` got that is not a plain tool. When
an agent call starts, each toolset is resolved at most once per root run
(``RunServices.once``: concurrent calls wait for the first), and the agent's tools for the
call are its own plus theirs, in order. The loop keeps the merged spec for the run too, so
every call after the first costs a dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from ..exceptions import UserError
from ..tools import Tool, Toolset
from .services import RunServices

__all__ = ["resolve_tools"]


async def resolve_tools(
    agent_name: str,
    tools: Mapping[str, Tool],
    toolsets: Sequence[Toolset],
    services: RunServices,
) -> dict[str, Tool]:
    """``tools`` and the tools of ``toolsets`` as resolved for this run, by name.

    Raises:
        UserError: Two tools of the agent have one name, or a toolset gave a non-``Tool``.
        Exception: A toolset's own failure to resolve (its server cannot be reached, ...).
    """
    found = dict(tools)
    for toolset in toolsets:
        for tool in await services.once(toolset, _resolver(toolset, services)):
            if tool.name in found:
                raise UserError(
                    f"agent {agent_name!r} has two tools named {tool.name!r} (one from "
                    f"{toolset.label}): give the toolset a prefix or rename one"
                )
            found[tool.name] = tool
    return found


def _resolver(toolset: Toolset, services: RunServices) -> Callable[[], Awaitable[tuple[Tool, ...]]]:
    async def resolve() -> tuple[Tool, ...]:
        given = tuple(await toolset.resolve(services))
        for tool in given:
            if not isinstance(tool, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise UserError(f"{toolset.label}.resolve() returned {tool!r}, not a Tool")
        return given

    return resolve
