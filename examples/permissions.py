"""Permissions: a tool that needs the human's approval before each call.

Approve once, deny with a reason (the model gets the reason as the tool result and adapts),
or approve for the rest of the run (later calls go through without asking).

    python examples/permissions.py
"""

from __future__ import annotations

import anyio

from hpd_agent import Agent, Approve, Deny, tool
from hpd_agent.events import PermissionRequest, PermissionResolved, ToolCallFinished
from hpd_agent.testing import ScriptedModel, text, tool_call

deleted: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    deleted.append(path)
    return f"deleted {path}"


agent = Agent(
    "Janitor",
    model=ScriptedModel(
        [
            tool_call("delete_file", path="build/cache.bin"),
            tool_call("delete_file", path="README.md"),
            tool_call("delete_file", path="build/a.o"),
            tool_call("delete_file", path="build/b.o"),
            text("Cleaned the build directory; kept README.md as asked."),
        ]
    ),
    tools=[delete_file],
)

DECISIONS = {
    "build/cache.bin": Approve(scope="once"),
    "README.md": Deny(reason="README.md is not a build artefact"),
    "build/a.o": Approve(scope="run"),
}


async def main() -> None:
    async with agent.stream("Clean up the build") as run:
        async for event in run:
            match event:
                case PermissionRequest():
                    decision = DECISIONS[event.arguments["path"]]
                    print(f"{event.tool_name}({event.arguments['path']}) -> {decision}")
                    await run.respond(event.request_id, decision)
                case PermissionResolved(scope="run"):
                    print("approved for the rest of the run")
                case ToolCallFinished():
                    print(f"  result: {event.result}")
                case _:
                    pass
    print("deleted:", deleted)
    print("Result:", run.result.output)


if __name__ == "__main__":
    anyio.run(main)
