"""``TemporalAgent``: an agent tree run as a Temporal workflow.

Inside the workflow the agent loop runs as it always does, deterministically: the same code,
the same ordered event stream, the same request ids. One hook turns the two things that
touch the world into activities:

- every model request of every agent becomes a ``hpd_agent.model_request`` activity;
- every plain tool call (a tool that takes no ``ToolContext``) becomes a
  ``hpd_agent.tool_call`` activity. Its arguments are validated, and its permission asked,
  in the workflow first (a permission request is a human wait, never an activity).

Tools that take a ``ToolContext`` run in the workflow: agents-as-tools (a nested agent is
more workflow code: its own model and tool calls become activities in turn), ``ask_user``
and any tool that asks the human. They need the run's request table, which lives in the
workflow, and their waits must be workflow state, not a worker holding a coroutine. Such a
tool must therefore be deterministic like workflow code: its side effects go in
``ctx.step(...)``, which becomes a local activity (done once, its result in the history),
or in plain tools.

Nested agents run in the same workflow rather than as child workflows: one run keeps one
ordered event stream, one request table (a nested agent's question is answered through the
root workflow's update like any other) and run-wide approvals, exactly as in a local run; a
child workflow would split all three across executions for no gain, since the nested
agent's work is already in activities.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from ..agent import Agent
from ..events import format_path
from ..exceptions import ModelError, StepFailed, UserError
from ..hooks import CallNext, Hook, ModelCall, StepCall, ToolExecution, ToolOutcome
from ..messages import Message
from ..models import ModelResponse
from ..run import Run, RunResult
from ..text import error_text
from ..tools import Tool, ToolArgumentsError, ToolContext
from ._activities import MODEL_ACTIVITY, STEP_ACTIVITY, STEPS, TOOL_ACTIVITY
from ._state import RunState, WorkflowRequests
from ._tree import AgentTree, dump_params, error_class, load_response

__all__ = ["TemporalAgent"]

_DEFAULT_RETRY = RetryPolicy(maximum_attempts=5)


class TemporalAgent:
    """An agent tree that runs inside a Temporal workflow (build it at import time).

    Args:
        agent: The root agent. Nested agents reached through its tools are found and
            registered too (see ``hpd_agent.temporal._tree``).
        name: The name workers know this tree by (default: the agent's name). Give each
            ``TemporalAgent`` of a worker a distinct name.
        agents: Agents a tool starts in a way the tree walk cannot see (e.g. a module-level
            agent called from a tool with ``other.run(...)``).
        model_timeout: Start-to-close timeout of each model request activity.
        tool_timeout: Start-to-close timeout of each tool activity (a tool's own
            ``timeout`` is enforced inside the activity, with the same text as locally).
        retry_policy: Retries of both activities when the worker or the network fails
            (a tool's exception is a result for the model, never retried; a model error
            the model already retried fails at once).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        name: str | None = None,
        agents: Sequence[Agent] = (),
        model_timeout: timedelta = timedelta(minutes=5),
        tool_timeout: timedelta = timedelta(minutes=5),
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.agent = agent
        self.name = name or agent.name
        self.tree = AgentTree(agent, agents)
        self.model_timeout = model_timeout
        self.tool_timeout = tool_timeout
        self.retry_policy = retry_policy or _DEFAULT_RETRY

    def __repr__(self) -> str:
        return f"TemporalAgent({self.name!r})"

    async def run(
        self,
        prompt: str,
        *,
        history: Sequence[Message] | None = None,
        hooks: Sequence[Hook] = (),
    ) -> RunResult:
        """Run the agent tree to its final answer; call it from a workflow's run method.

        The run's id is the workflow id. Its questions and permission requests wait as
        workflow state (``pending``/``respond``), its events are readable from the workflow
        (``stream``), and cancelling the workflow cancels the run (its pending requests end
        as cancelled; the workflow ends cancelled).

        Raises:
            ApplicationError: The run failed; ``type`` is the error's class name.
        """
        if not workflow.in_workflow():
            raise UserError("TemporalAgent.run() runs inside a workflow; outside, use agent.run()")
        state = RunState()
        state.install()
        hook = _ActivityHook(self)
        session = _Session(prompt, history, hook, state.requests)
        runs: list[Run] = []

        async def drive() -> RunResult:
            run = self.agent.stream(
                prompt, history=history, run_id=workflow.info().workflow_id, session=session,
                hooks=hooks,
            )  # fmt: skip
            runs.append(run)
            try:
                async with run:
                    async for event in run:
                        state.add(event)
            except Exception:
                if not run.done:
                    raise
            return run.result

        task = asyncio.ensure_future(drive())
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            # The workflow was cancelled: cancel the run on purpose, so its requests end as
            # cancelled and its stream ends with RunFinished, then end cancelled.
            if runs:
                runs[0].cancel()
            else:
                task.cancel()
            await asyncio.wait([task])
            state.finished = True
            raise
        state.finished = True
        error = result.error
        if result.status == "failed" and error is not None:
            raise ApplicationError(
                f"{type(error).__name__}: {error}", type=type(error).__name__, non_retryable=True
            )
        return result


class _ActivityHook(Hook):
    """Model requests and plain tool calls as activities (see the module docstring)."""

    def __init__(self, owner: TemporalAgent) -> None:
        self.owner = owner

    async def wrap_model_request(
        self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
    ) -> ModelResponse:
        owner = self.owner
        key = owner.tree.model_key(call.model, call.agent_path)
        request = {
            "temporal_agent": owner.name,
            "model_key": key,
            **dump_params(call.messages, call.params),
        }
        try:
            data = await workflow.execute_activity(
                MODEL_ACTIVITY,
                request,
                result_type=dict,
                start_to_close_timeout=owner.model_timeout,
                retry_policy=owner.retry_policy,
                summary=f"{key} turn {call.turn}",
            )
        except ActivityError as e:
            raise _model_error(e) from None
        return load_response(data)

    async def wrap_step(self, step: StepCall, call_next: CallNext[StepCall, Any]) -> Any:
        # A local activity: its result is recorded in the history, so a replay (a new
        # worker) returns it without doing the side effect again.
        token = f"{workflow.info().run_id}|{step.key}"
        STEPS[token] = step.run
        try:
            return await workflow.execute_local_activity(
                STEP_ACTIVITY,
                token,
                start_to_close_timeout=self.owner.tool_timeout,
                retry_policy=self.owner.retry_policy,
                summary=f"step {step.name}",
            )
        except (ActivityError, ApplicationError) as e:
            # A local activity's failure may arrive wrapped or as the activity's own error.
            cause = e.cause if isinstance(e, ActivityError) else e
            if isinstance(cause, ApplicationError) and cause.type:
                # The step's own error, as a replay of a journaled step raises it.
                raise StepFailed.revive(step.name, cause.type, cause.message) from None
            raise StepFailed(
                f"step {step.name!r} could not run: {cause or e}",
                step=step.name,
                error_type=type(cause or e).__name__,
                error_message=str(cause or e),
            ) from None
        finally:
            STEPS.pop(token, None)

    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        tool = self.owner.tree.tool(execution.agent_path, execution.tool_name)
        if tool is None or tool.takes_context:
            return await call_next(execution)  # runs here, in the workflow
        execution.emit(execution.started_event())
        outcome = await self._remote(execution, tool)
        execution.emit(execution.finished_event(outcome))
        return outcome

    async def _remote(self, execution: ToolExecution, tool: Tool) -> ToolOutcome:
        call = execution.call
        try:
            arguments = tool.validate_arguments(call.arguments)
        except ToolArgumentsError as e:
            return ToolOutcome(text=str(e), is_error=True, error_type=type(e).__name__)
        try:
            refusal = await self._permission(execution, tool, arguments)
        except Exception as e:
            return ToolOutcome(
                text=f"Error: {error_text(e)}", is_error=True, error_type=type(e).__name__
            )
        if refusal is not None:
            return ToolOutcome(text=refusal)
        owner = self.owner
        timeout = owner.tool_timeout
        if tool.timeout is not None:
            timeout = max(timeout, timedelta(seconds=tool.timeout * 2))
        request = {
            "temporal_agent": owner.name,
            "agent_path": list(execution.agent_path),
            "tool": tool.name,
            "arguments": call.arguments,
        }
        try:
            data = await workflow.execute_activity(
                TOOL_ACTIVITY,
                request,
                result_type=dict,
                start_to_close_timeout=timeout,
                retry_policy=owner.retry_policy,
                summary=f"{format_path(execution.agent_path)}: {tool.name}",
            )
        except ActivityError as e:
            cause = e.cause or e
            return ToolOutcome(
                text=f"Error: the tool could not run: {cause}",
                is_error=True,
                error_type=type(cause).__name__,
            )
        return ToolOutcome(
            text=str(data["text"]),
            is_error=bool(data["is_error"]),
            error_type=data.get("error_type"),
        )

    async def _permission(
        self, execution: ToolExecution, tool: Tool, arguments: dict[str, Any]
    ) -> str | None:
        if not tool.needs_approval(arguments):
            return None
        # The same frame the loop would build, so the request id is the same as locally
        # (outside a run it raises: a guarded tool never runs unasked).
        ctx = ToolContext.for_execution(execution, tool.name)
        return await ctx.ask_permission(tool.name, arguments)


def _model_error(error: ActivityError) -> BaseException:
    """The model error an activity failed with, as its own class when the core has it."""
    cause = error.cause
    if isinstance(cause, ApplicationError):
        cls = error_class(ModelError, cause.type)
        if cls is not None:
            return cls(cause.message)
        if cause.type == "UserError":
            return UserError(cause.message)
    return ModelError(f"model request failed: {error.cause or error}")


class _Session:
    """The run's ``RunSession``: the activity hook and the workflow's request table."""

    resumed = False

    def __init__(
        self,
        prompt: str,
        history: Sequence[Message] | None,
        hook: _ActivityHook,
        requests: WorkflowRequests,
    ) -> None:
        self.prompt = prompt
        self.history = list(history) if history else None
        self.hooks: Sequence[Hook] = (hook,)
        self.backend = requests
        self._conversations: dict[str, list[Message]] = {}

    def held(self) -> AbstractAsyncContextManager[None]:
        # No lease to take: Temporal already lets one worker at a time drive a workflow.
        return contextlib.nullcontext()

    async def attach(self, coordinator: object) -> None:
        # The workflow replays the run from its history: nothing to bring back.
        return None

    async def finish(self, result: RunResult) -> None:
        return None

    def conversation(self, key: str) -> list[Message] | None:
        return self._conversations.get(key)

    async def record_conversation(self, key: str, messages: list[Message]) -> None:
        self._conversations[key] = list(messages)
