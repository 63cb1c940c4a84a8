"""The agent tree ``hpd-agent serve tests.web.agents:root`` serves in the web tests.

Offline: every model is a ``FunctionModel`` reacting to the prompt. ``write_note`` appends its
line to ``notes.txt`` in ``HPD_WEB_TEST_DIR`` (when set), so a test counts side effects across
server processes.

Orchestrator (depth 0) --Manager--> Manager (1) --Specialist--> Specialist (2).
Prompts:
- ``hello``: plain text reply, streamed in pieces.
- ``note``: calls ``write_note``, then replies.
- ``deep``: Orchestrator -> Manager -> Specialist; the Specialist writes a note and asks
  "Which database?" (options postgres/sqlite); its answer travels back up.
- ``parallel``: in one turn the Orchestrator asks "First question?" itself and the Manager
  (via the Specialist) asks "Which database?".
- ``two``: in one turn the Orchestrator asks "First question?" and "Second question?".
- ``permission``: calls ``delete_file``, which needs approval.
- ``writers``: in one turn the Orchestrator calls the Writer twice (queries alpha and beta);
  each call streams ``working on <query>``, asks ``detail for <query>?`` and answers
  ``<query>: <the answer>``.
- ``turns N``: N model turns of one ``count`` tool call each, then text (benchmark workload).

``tests.web.agents:fanout`` is another root: ``fanout A T`` calls its ``Speaker`` sub-agent A
times in one turn, each call streaming T text pieces (``tok ``), then answers ``done``: a
run of A x (T + 8) AG-UI events, for the stalled-client tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from hpd_agent import Agent, ask_user, tool
from hpd_agent.governance import PathPolicy
from hpd_agent.messages import Message, ToolCall, ToolResultMessage, UserMessage
from hpd_agent.models import ModelRequestParams, ModelResponse
from hpd_agent.testing import FunctionModel, text, tool_call
from tests._logged_policy import LoggedPolicy

DB_QUESTION = "Which database?"
FIRST_QUESTION = "First question?"
SECOND_QUESTION = "Second question?"


def _prompt(messages: Sequence[Message]) -> str:
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            return m.content
    return ""


def _result(messages: Sequence[Message], name: str) -> str:
    for m in reversed(messages):
        if isinstance(m, ToolResultMessage) and m.name == name:
            return m.content
    raise AssertionError(f"no result of {name}")


@tool
def write_note(line: str) -> str:
    """Append a line to the notes file.

    Args:
        line: The note.
    """
    folder = os.environ.get("HPD_WEB_TEST_DIR")
    if folder:
        with open(os.path.join(folder, "notes.txt"), "a") as f:
            f.write(line + "\n")
    return f"noted: {line}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (pretend).

    Args:
        path: The file.
    """
    return f"deleted {path}"


@tool
def count(n: int) -> str:
    """Count one step.

    Args:
        n: The step number.
    """
    return str(n)


def specialist_turn(messages: Sequence[Message], info: ModelRequestParams):
    if info.turn == 0:
        return [
            tool_call("write_note", line="specialist started"),
            tool_call("ask_user", question=DB_QUESTION, options=["postgres", "sqlite"]),
        ]
    return text("use " + _result(messages, "ask_user"))


def manager_turn(messages: Sequence[Message], info: ModelRequestParams):
    if info.turn == 0:
        return tool_call("Specialist", query="pick a database")
    return text("manager: " + _result(messages, "Specialist"))


def writer_turn(messages: Sequence[Message], info: ModelRequestParams):
    query = next(m.content for m in messages if isinstance(m, UserMessage))
    if info.turn == 0:
        ask = ToolCall(
            id="ask", name="ask_user", arguments=json.dumps({"question": f"detail for {query}?"})
        )
        return ModelResponse(
            text=f"working on {query}", tool_calls=(ask,), finish_reason="tool_calls"
        )
    return text(f"{query}: " + _result(messages, "ask_user"))


def _first_turn(prompt: str):
    if prompt == "note":
        return tool_call("write_note", line="hello note")
    if prompt == "broken arguments":  # what a model cut off by its token limit sends
        return [
            tool_call("write_note", _raw='{"line": "cut off'),
            tool_call("write_note", line="é ünïcode"),
        ]
    if prompt == "deep":
        return tool_call("Manager", query="plan the storage")
    if prompt == "parallel":
        return [
            tool_call("ask_user", question=FIRST_QUESTION),
            tool_call("Manager", query="plan the storage"),
        ]
    if prompt == "two":
        return [
            tool_call("ask_user", question=FIRST_QUESTION),
            tool_call("ask_user", question=SECOND_QUESTION),
        ]
    if prompt == "writers":
        return [tool_call("Writer", query="alpha"), tool_call("Writer", query="beta")]
    if prompt == "permission":
        return tool_call("delete_file", path="/tmp/x")
    if prompt.startswith("turns "):
        return tool_call("count", n=1)
    return text(f"Hello! You said: {prompt}")


def orchestrator_turn(messages: Sequence[Message], info: ModelRequestParams):
    prompt = _prompt(messages)
    if prompt.startswith("turns "):
        total = int(prompt.split()[1])
        if info.turn + 1 < total:
            return tool_call("count", n=info.turn + 2)
        if info.turn + 1 == total:
            return text(f"counted {total}")
    if info.turn == 0:
        return _first_turn(prompt)
    results = [m.content for m in messages if isinstance(m, ToolResultMessage)]
    return text("done: " + " | ".join(results))


def build() -> Agent:
    """A fresh tree (new models)."""
    specialist = Agent(
        "Specialist",
        model=FunctionModel(specialist_turn, name="specialist"),
        tools=[write_note, ask_user()],
    )
    manager = Agent(
        "Manager",
        model=FunctionModel(manager_turn, name="manager"),
        tools=[specialist.as_tool()],
    )
    writer = Agent(
        "Writer",
        model=FunctionModel(writer_turn, name="writer", chunk_size=3),
        tools=[ask_user()],
    )
    return Agent(
        "Orchestrator",
        model=FunctionModel(orchestrator_turn, name="orchestrator", chunk_size=4),
        max_turns=1000,  # the benchmark's long runs
        tools=[manager.as_tool(), writer.as_tool(), write_note, delete_file, count, ask_user()],
    )


root = build()


def speaker_turn(messages: Sequence[Message], info: ModelRequestParams):
    return text("tok " * int(_prompt(messages)))


def fanout_turn(messages: Sequence[Message], info: ModelRequestParams):
    if info.turn > 0:
        return text("done")
    _, agents, tokens = _prompt(messages).split()
    return [tool_call("Speaker", query=tokens) for _ in range(int(agents))]


def build_fanout() -> Agent:
    """A fresh fan-out root (see the module's docstring)."""
    speaker = Agent("Speaker", model=FunctionModel(speaker_turn, name="speaker", chunk_size=4))
    return Agent(
        "Fanout", model=FunctionModel(fanout_turn, name="fanout"), tools=[speaker.as_tool()]
    )


fanout = build_fanout()


POLICY = PathPolicy(
    {"alice": ["*"], "bob": ["Orchestrator", "Orchestrator > Manager*"]},
    permissions={"delete_file": ["alice"]},
)
"""``serve --policy tests.web.agents:POLICY``: alice answers anything; bob the Orchestrator's
requests and the Manager's tree (not the Writer's), but only alice decides ``delete_file``."""

LOGGED = LoggedPolicy(POLICY, "HPD_TEST_POLICY_LOG")
"""``POLICY``, each question it is asked written to the file ``$HPD_TEST_POLICY_LOG``."""
