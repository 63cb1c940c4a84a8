"""The agent tree a ``TemporalAgent`` registers, and the JSON that crosses into activities.

The workflow and the worker's activities hold two different copies of the same agents (the
workflow sandbox imports the workflow module afresh), so nothing crosses by identity: a model
is named by a key computed by the same walk of the tree on both sides (``"Planner/Research"``
for an agent's model, ``".../Clarifier#model"`` for a clarifier's), and a tool by its agent
path and name.

Nested agents are found through the tools of each agent: a tool whose function closes over an
``Agent`` or one of its bound methods (``Agent.as_tool`` does, and so does a tool defined
inside a function around ``other.run(...)``) leads to that agent. Agents a tool reaches another way (a module global)
are passed to ``TemporalAgent(agents=[...])``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..agent import Agent
from ..exceptions import UserError
from ..messages import Message, ToolCall, Usage, message_adapter
from ..models import Model, ModelRequestParams, ModelResponse, ToolDefinition
from ..text import mend
from ..tools import Tool

__all__ = [
    "AgentTree",
    "dump_params",
    "dump_response",
    "error_class",
    "load_params",
    "load_response",
]

_E = TypeVar("_E", bound=BaseException)

_MAX_DEPTH = 32


class AgentTree:
    """Every agent, model and tool reachable from a root agent, by stable names.

    Args:
        root: The root agent.
        extra: Agents reached by tools in ways the walk cannot see; each is walked as a
            child of every agent (its path is found when it runs: by its name).
    """

    def __init__(self, root: Agent, extra: Sequence[Agent] = ()) -> None:
        self.root = root
        self.agents: dict[tuple[str, ...], Agent] = {}
        self.by_name: dict[str, Agent | None] = {}
        self.models: dict[str, Model] = {}
        self._model_keys: dict[int, str] = {}
        self._walk(root, (root.name,), 0)
        for agent in extra:
            self._walk(agent, (agent.name,), 0)

    def _walk(self, agent: Agent, path: tuple[str, ...], depth: int) -> None:
        if path in self.agents or depth > _MAX_DEPTH:
            return
        if agent.toolsets:
            labels = ", ".join(t.label for t in agent.toolsets)
            raise UserError(
                f"agent {agent.name!r} has toolsets ({labels}): their tools are known only "
                "when a run starts, which a Temporal workflow cannot do; give it plain tools"
            )
        self.agents[path] = agent
        known = self.by_name.get(agent.name, agent)
        self.by_name[agent.name] = agent if known is agent else None  # None: ambiguous
        key = "/".join(path)
        self._add_model(key, agent.model)
        clarifier: Any = agent.clarifier
        if clarifier is not None:
            cpath = f"{key}/{getattr(clarifier, 'name', 'clarifier')}"
            for attr in ("model", "planner_model"):
                model = getattr(clarifier, attr, None)
                if isinstance(model, Model):
                    self._add_model(f"{cpath}#{attr}", model)
        for tool in agent.tools.values():
            child = tool.agent
            if isinstance(child, Agent):
                self._walk(child, (*path, child.name), depth + 1)

    def _add_model(self, key: str, model: Model) -> None:
        self.models.setdefault(key, model)
        self._model_keys.setdefault(id(model), key)

    # -- lookups ------------------------------------------------------------------------
    def agent(self, path: Sequence[str]) -> Agent | None:
        """The agent at ``path``, else the only agent of that name in the tree."""
        found = self.agents.get(tuple(path))
        if found is None and path:
            found = self.by_name.get(path[-1])
        return found

    def tool(self, path: Sequence[str], name: str) -> Tool | None:
        """The tool ``name`` of the agent at ``path``, if the tree has it."""
        agent = self.agent(path)
        return None if agent is None else agent.tools.get(name)

    def model_key(self, model: Model, path: Sequence[str]) -> str:
        """The name the worker finds ``model`` under (its agent path when not walked)."""
        return self._model_keys.get(id(model), "/".join(path))

    def model(self, key: str) -> Model | None:
        """The model registered under ``key`` (by the last agent name as a fallback)."""
        found = self.models.get(key)
        if found is None:
            agent = self.by_name.get(key.rsplit("/", 1)[-1])
            found = None if agent is None else agent.model
        return found

    def names(self) -> Iterable[str]:
        """The registered model keys (for error messages)."""
        return self.models.keys()


# -- JSON across the activity boundary ---------------------------------------------------
def dump_params(messages: Sequence[Message], params: ModelRequestParams) -> dict[str, Any]:
    """A model request's conversation and parameters as JSON data."""
    return {
        "messages": message_adapter().dump_python(list(messages), mode="json"),
        "tools": [dataclasses.asdict(t) for t in params.tools],
        "settings": dict(params.settings),
        "agent_name": params.agent_name,
        "agent_path": list(params.agent_path),
        "turn": params.turn,
    }


def load_params(data: Mapping[str, Any]) -> tuple[list[Message], ModelRequestParams]:
    """The inverse of ``dump_params`` (no streaming callback: text comes back whole)."""
    messages = message_adapter().validate_python(data["messages"])
    params = ModelRequestParams(
        tools=tuple(ToolDefinition(**t) for t in data["tools"]),
        settings=dict(data["settings"]),
        agent_name=data["agent_name"],
        agent_path=tuple(data["agent_path"]),
        turn=data["turn"],
    )
    return messages, params


def dump_response(response: ModelResponse) -> dict[str, Any]:
    """A model response as JSON data, its text mended (``hpd_agent.text.mend``) as a durable
    run mends it before the journal keeps it: the workflow's history keeps it too."""
    return {
        "text": None if response.text is None else mend(response.text),
        "tool_calls": [dataclasses.asdict(c) for c in response.tool_calls],
        "usage": dataclasses.asdict(response.usage),
    }


def load_response(data: Mapping[str, Any]) -> ModelResponse:
    """The inverse of ``dump_response``; ``streamed=False`` so the loop emits the text."""
    return ModelResponse(
        text=data.get("text"),
        tool_calls=tuple(ToolCall(**c) for c in data.get("tool_calls", ())),
        usage=Usage(**data.get("usage", {})),
        streamed=False,
    )


def error_class(base: type[_E], name: str | None) -> type[_E] | None:
    """The subclass of ``base`` (or ``base`` itself) named ``name``, if there is one: how an
    error crossing Temporal as an ``ApplicationError`` type comes back as its own class."""
    todo: list[type[_E]] = [base]
    while todo:
        cls = todo.pop()
        if cls.__name__ == name:
            return cls
        todo.extend(cls.__subclasses__())
    return None
