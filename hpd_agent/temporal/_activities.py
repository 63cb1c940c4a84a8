"""The two activities every ``TemporalAgent`` shares: one model request, one plain tool call.

They run on the worker, outside the workflow sandbox, against the worker's own copy of the
registered agent trees (``HpdAgentPlugin(planner, ...)``), found by the ``TemporalAgent``'s
name. A model error the model already retried itself fails the activity for good
(non-retryable, its class name kept so the workflow raises the same error); anything else
(the worker died, the network dropped) is retried by Temporal. A tool's own failure is a
result the model reads, exactly as in a local run, so it never fails the activity.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import anyio
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..exceptions import ModelError
from ..text import bounded, error_text
from ..tools import ToolArgumentsError, ToolContext, result_to_text
from ._tree import AgentTree, dump_response, load_params

__all__ = ["MODEL_ACTIVITY", "STEPS", "STEP_ACTIVITY", "TOOL_ACTIVITY", "Activities"]

MODEL_ACTIVITY = "hpd_agent.model_request"
TOOL_ACTIVITY = "hpd_agent.tool_call"
STEP_ACTIVITY = "hpd_agent.step"

STEPS: dict[str, Callable[[], Awaitable[Any]]] = {}
"""Steps (``ctx.step``) a workflow in this process is running as local activities, by token.

A step's function is a closure of the tool that takes it, so it cannot cross to another
process; a local activity always runs in the worker process that runs the workflow task, and
this module is shared by the sandbox and the worker (it is passed through), so the workflow
leaves the closure here and the local activity picks it up."""


def _failed(text: str, error_type: str) -> dict[str, Any]:
    """A tool call's failure as the model reads it (the same texts as a local run)."""
    return {"text": text, "is_error": True, "error_type": error_type}


class Activities:
    """The activities of a worker, over the agent trees it was given (by name)."""

    def __init__(self, trees: Mapping[str, AgentTree]) -> None:
        self.trees = dict(trees)

    def _tree(self, name: str) -> AgentTree:
        tree = self.trees.get(name)
        if tree is None:
            raise ApplicationError(
                f"this worker has no TemporalAgent named {name!r} "
                f"(it has {sorted(self.trees)}): pass it to HpdAgentPlugin",
                type="UserError",
                non_retryable=True,
            )
        return tree

    def definitions(self) -> Sequence[Any]:
        """The activity callables to register on a worker."""
        return [self.model_request, self.tool_call, self.step]

    @activity.defn(name=MODEL_ACTIVITY)
    async def model_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one model request with the worker's model; the response as JSON data."""
        tree = self._tree(request["temporal_agent"])
        model = tree.model(request["model_key"])
        if model is None:
            raise ApplicationError(
                f"no model registered under {request['model_key']!r} "
                f"(known: {sorted(tree.names())}); pass the agent to TemporalAgent(agents=...)",
                type="UserError",
                non_retryable=True,
            )
        messages, params = load_params(request)
        try:
            response = await model.request(messages, params)
        except ModelError as e:
            raise ApplicationError(str(e), type=type(e).__name__, non_retryable=True) from e
        return dump_response(response)

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool_call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one plain tool (validated again here); its result text and error flag."""
        tree = self._tree(request["temporal_agent"])
        path: list[str] = request["agent_path"]
        name: str = request["tool"]
        tool = tree.tool(path, name)
        if tool is None:
            return _failed(f"Unknown tool {name!r}.", "unknown_tool")
        try:
            arguments = tool.validate_arguments(request["arguments"])
        except ToolArgumentsError as e:
            return _failed(str(e), type(e).__name__)
        # A plain tool takes no context: nothing reads it.
        ctx = cast(ToolContext, None)
        try:
            if tool.timeout is None:
                value = await tool.call(ctx, arguments)
            else:
                value = None
                with anyio.move_on_after(tool.timeout) as scope:
                    value = await tool.call(ctx, arguments)
                if scope.cancelled_caught:
                    text = f"Error: tool {tool.name!r} timed out after {tool.timeout:g} seconds."
                    return _failed(text, "timeout")
        except Exception as e:
            return _failed(f"Error: {error_text(e)}", type(e).__name__)
        return {"text": result_to_text(value), "is_error": False}

    @activity.defn(name=STEP_ACTIVITY)
    async def step(self, token: str) -> Any:
        """Do one ``ctx.step`` side effect left by the workflow (a local activity)."""
        run = STEPS.get(token)
        if run is None:
            raise ApplicationError(
                f"step {token!r} is not waiting in this worker process",
                type="UserError",
                non_retryable=True,
            )
        try:
            return await run()
        except Exception as e:  # the tool's own failure: it sees it, nothing retries it
            # The qualified type and the bare message, so that the workflow raises it again
            # as the journal's replay would (StepFailed.revive).
            cls = type(e)
            raise ApplicationError(
                bounded(_message(e)),
                type=f"{cls.__module__}.{cls.__qualname__}",
                non_retryable=True,
            ) from e


def _message(error: Exception) -> str:
    try:
        return str(error)
    except Exception as e:  # a hostile __str__ must not hide the real failure
        return f"<unprintable message: {type(e).__name__}>"
