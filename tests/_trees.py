"""Agent trees shared by test modules: a root calling one sub-agent twice in parallel; and
a ``write_file`` tool that records where it wrote."""

from __future__ import annotations

import json
from typing import Any

from hpd_agent import Agent, ask_user, tool
from hpd_agent.messages import ToolCall, ToolResultMessage, UserMessage
from hpd_agent.models import ModelResponse
from hpd_agent.testing import FunctionModel, text, tool_call


def asking_writer() -> Agent:
    """A sub-agent that streams its query back, asks a question about it, and answers with
    the query and the answer it got (so each call's answer shows where it went)."""

    def reply(messages, params):  # type: ignore[no-untyped-def]
        query = next(m.content for m in messages if isinstance(m, UserMessage))
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if not results:
            return ModelResponse(
                text=f"working on {query}",
                tool_calls=(
                    ToolCall(
                        id="ask",
                        name="ask_user",
                        arguments=json.dumps({"question": f"detail for {query}?"}),
                    ),
                ),
                finish_reason="tool_calls",
            )
        return text(f"{query}: {results[-1].content}")

    return Agent("Writer", model=FunctionModel(reply), tools=[ask_user()])


def writers_root(writer: Agent) -> Agent:
    def plan(messages, params):  # type: ignore[no-untyped-def]
        if not any(isinstance(m, ToolResultMessage) for m in messages):
            return [tool_call("Writer", query="alpha"), tool_call("Writer", query="beta")]
        return text("done")

    return Agent("Root", model=FunctionModel(plan), tools=[writer.as_tool()])


def write_file_tool(written: list[str]) -> Any:
    """A ``write_file(path, content)`` tool that appends each path it is called with to
    ``written`` and answers "written"."""

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file.

        Args:
            path: Where.
            content: What.
        """
        written.append(path)
        return "written"

    return write_file
