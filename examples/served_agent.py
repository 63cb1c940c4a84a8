"""An agent tree to serve in the browser, offline: questions from two levels down, a permission.

    hpd-agent serve examples/served_agent.py:agent     # from the root of a checkout
    # open http://127.0.0.1:8000 and send any task, e.g. "Build a todo API"

Orchestrator -> Coder -> Clarifier. The Orchestrator hands the task to the Coder; the Coder
asks the Clarifier, which asks you (depth 2) which web framework to use, with options; the
Coder then asks your permission before ``write_file`` writes the code. Every model is a
``FunctionModel`` that reads the conversation, so every new conversation (and every new task
in one) plays the whole exchange again, and your answers change what it says. ``write_file``
writes into ``WORKSPACE``, a dict in the server's memory: nothing lands on your disk.

Run as a script, it plays one conversation with a scripted human and prints it:

    python examples/served_agent.py
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from hpd_agent import Agent, ask_user, tool
from hpd_agent.events import ClarificationRequest, PermissionRequest, format_path
from hpd_agent.messages import Message, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams
from hpd_agent.testing import FunctionModel, ScriptedHuman, Step, text, tool_call

FRAMEWORKS = ["FastAPI", "Express", "Django"]
FILES = {"FastAPI": "app.py", "Express": "app.js", "Django": "views.py"}
WORKSPACE: dict[str, str] = {}
"""What ``write_file`` wrote, by path (in memory only)."""


@tool(requires_approval=True)
def write_file(path: str, content: str) -> str:
    """Write a text file into the in-memory workspace (asks you first).

    Args:
        path: The file's name.
        content: Its full text.
    """
    WORKSPACE[path] = content
    return f"wrote {path} ({len(content.splitlines())} lines)"


def _since_prompt(messages: Sequence[Message]) -> tuple[str, list[str]]:
    """The latest user message and the tool results after it: where this turn stands.

    A conversation's earlier tasks come before it, so a second task plays the same exchange.
    """
    last = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    prompt = messages[last].content if last >= 0 else ""
    assert isinstance(prompt, str)
    results = [m.content for m in messages[last + 1 :] if isinstance(m, ToolResultMessage)]
    return prompt.strip(), results


def _framework(answer: str) -> str:
    return next((f for f in FRAMEWORKS if f.lower() in answer.lower()), FRAMEWORKS[0])


def clarifier_turn(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    task, results = _since_prompt(messages)
    if not results:
        return tool_call(
            "ask_user", question=f'Which web framework for "{task}"?', options=FRAMEWORKS
        )
    return text(f"The user chose {_framework(results[-1])}.")


def coder_turn(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    task, results = _since_prompt(messages)
    if not results:
        return tool_call("Clarifier", query=task)
    framework = _framework(results[0])
    path = FILES[framework]
    if len(results) == 1:
        code = f"# {task}, built with {framework}\n# (the offline example writes no real code)\n"
        return tool_call("write_file", path=path, content=code)
    if results[-1].startswith("wrote"):
        return text(f"Built it with {framework} and wrote {path}.")
    return text(f"Chose {framework}, but did not write {path}: {results[-1]}")


def orchestrator_turn(messages: Sequence[Message], info: ModelRequestParams) -> Step:
    task, results = _since_prompt(messages)
    if not results:
        return tool_call("Coder", query=task or "Build a todo API")
    return text(f"Done. {results[-1]}")


clarifier = Agent(
    "Clarifier",
    model=FunctionModel(clarifier_turn, name="clarifier", chunk_size=8),
    tools=[ask_user()],
    description="Asks the user the decisions only they can make.",
)
coder = Agent(
    "Coder",
    model=FunctionModel(coder_turn, name="coder", chunk_size=8),
    tools=[clarifier.as_tool(), write_file],
    description="Builds the task: asks the Clarifier, then writes the code.",
)
agent = Agent(
    "Orchestrator",
    model=FunctionModel(orchestrator_turn, name="orchestrator", chunk_size=8),
    tools=[coder.as_tool()],
    description="Hands the task to the Coder and reports what was built.",
    examples=["Build a todo API", "Build a blog with comments"],
)


class PrintingHuman(ScriptedHuman):
    async def on_event(self, event: object) -> None:
        if isinstance(event, ClarificationRequest):
            print(f"question from {format_path(event.agent_path)}: {event.question}")
        elif isinstance(event, PermissionRequest):
            print(f"permission asked by {format_path(event.agent_path)}: {event.tool_name}")


async def main() -> None:
    human = PrintingHuman({"framework": "Express"}).approve("write_file")
    for task in ("Build a todo API", "Build a blog"):  # the same agent object, twice
        result = await agent.run(task, handler=human)
        print("Result:", result.output)
    print("workspace:", sorted(WORKSPACE))


if __name__ == "__main__":
    anyio.run(main)
