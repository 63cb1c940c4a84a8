"""An agent served to a code editor over ACP: a nested agent's question and a permission
become the editor's dialogs.

``planner`` (offline, scripted) hands the task to its Clarifier, which asks which database
the plan should assume, then writes the plan with ``write_plan``, a tool that needs
approval. Served with ``hpd-agent acp acp_planner:planner`` (run from this folder; in an
editor's settings, ``hpd-agent acp /abs/path/examples/acp_planner.py:planner``), the
Clarifier's question reaches the editor as a form (``elicitation/create``) whose message
names the asker, ``Planner > Clarifier: ...``, and the permission as a
``session/request_permission`` on the tool call the editor was shown. Each answer goes back
to the agent waiting for it, which goes on in the same turn.

Run as a program, this starts that server as a subprocess and plays the editor with the ACP
Python SDK's client (``acp.spawn_agent_process``)::

    python examples/acp_planner.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import Message, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, Step, text, tool_call


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def _clarify(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        return tool_call(
            "ask_user",
            question="Which database should the plan assume?",
            options=["SQLite", "PostgreSQL"],
        )
    return text(f"The user chose {got[-1]}.")


@tool(requires_approval=True)
async def write_plan(plan: str) -> str:
    """Write the plan to PLAN.md (needs approval).

    Args:
        plan: The plan.
    """
    return f"wrote {len(plan)} characters to PLAN.md"


def _plan(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    got = _results(messages)
    if not got:
        task = next(m.content for m in messages if isinstance(m, UserMessage))
        return tool_call("Clarifier", query=f"What must I know to plan: {task}?")
    if len(got) == 1:
        return tool_call("write_plan", plan=f"Build it on {got[0]}")
    return text(f"The plan is in PLAN.md ({got[0]})")


clarifier = Agent(
    "Clarifier",
    model=FunctionModel(_clarify),
    tools=[ask_user()],
    description="Finds out what the plan depends on, asking the user.",
)
planner = Agent(
    "Planner",
    model=FunctionModel(_plan),
    tools=[clarifier.as_tool(), write_plan],
    description="Plans a software task; asks what it must know first.",
)


HERE = Path(__file__).resolve().parent


class Editor:
    """The editor's side (the ACP SDK's ``Client``): shows updates, answers the dialogs."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "tool_call":
            print(f"  tool call: {update.title}")
        elif update.session_update == "agent_message_chunk":
            print(f"  agent: {update.content.text}")

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        print(f"  question: {message}")
        return {"action": "accept", "content": {"answer": "PostgreSQL"}}

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        print(f"  permission: {tool_call.title} ({', '.join(o.kind for o in options)})")
        return {"outcome": {"outcome": "selected", "optionId": options[0].option_id}}


async def main() -> None:
    import acp
    from acp.schema import ClientCapabilities, ElicitationCapabilities, ElicitationFormCapabilities

    command = [sys.executable, "-m", "hpd_agent.cli", "acp", "acp_planner:planner"]
    spawned = acp.spawn_agent_process(
        Editor(), *command, env=dict(os.environ), cwd=HERE, use_unstable_protocol=True
    )
    async with spawned as (conn, _process):
        forms = ElicitationCapabilities(form=ElicitationFormCapabilities())
        ready = await conn.initialize(
            protocol_version=1, client_capabilities=ClientCapabilities(elicitation=forms)
        )
        print(f"serving {ready.agent_info.name if ready.agent_info else '?'} over ACP")
        session = await conn.new_session(cwd=str(HERE))
        answer = await conn.prompt(
            session_id=session.session_id, prompt=[acp.text_block("a todo API")]
        )
        print(f"stop: {answer.stop_reason}")


if __name__ == "__main__":
    import anyio

    anyio.run(main, backend="asyncio")
