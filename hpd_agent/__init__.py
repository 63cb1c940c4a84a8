"""hpd_agent: nested multi-agent orchestration with the human in the loop, mid-turn.

Agents are tools (``agent.as_tool()``); any agent at any depth can ask the human
(``ask_user()``) or need permission (``requires_approval=True``); the request reaches the root
run's one event stream, the asker waits, and the answer comes back by request id in the same
turn.

Importing the package also registers the default tracing (``hpd_agent.otel``): runs are
traced as soon as the application installs an OpenTelemetry SDK, with no other call; the
OpenTelemetry API itself is imported only then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core.context import ToolContext, current_context
from .agent import Agent
from .clarification import ask_user
from .coordinator import OnUnhandled
from .events import (
    AgentFinished,
    AgentStarted,
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    RequestEvent,
    RequestExpiring,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from .exceptions import (
    AgentRunError,
    AnswerRefusedError,
    ContextWindowExceededError,
    ConversationBusyError,
    HpdAgentError,
    InvalidAnswerError,
    MaxTurnsExceededError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
    NoUserAvailableError,
    OutputValidationError,
    QuestionNotAnswered,
    RequestAlreadyAnsweredError,
    RequestCancelledError,
    RequestError,
    RequestExpiredError,
    RunCancelledError,
    RunLeasedError,
    RunNotFinishedError,
    StepFailed,
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
    ToolDefinitionError,
    TransientModelError,
    UnknownGrantError,
    UnknownRequestError,
    UnknownRunError,
    UserError,
)
from .handlers import BaseHandler, Handler
from .hooks import Hook
from .messages import Message, Usage
from .models import Model
from .otel import instrument
from .permissions import Approve, Decision, Deny
from .questions import QUESTION_KINDS, Decline, validate_answer
from .run import Run, RunResult
from .tools import Tool, tool
from .version import __version__

if TYPE_CHECKING:
    from .handlers.console import ConsoleHandler


def __getattr__(name: str) -> Any:
    # The console pulls in rich: `import hpd_agent` loads it only when it is asked for.
    if name == "ConsoleHandler":
        from .handlers.console import ConsoleHandler

        return ConsoleHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "QUESTION_KINDS",
    "Agent",
    "AgentFinished",
    "AgentRunError",
    "AgentStarted",
    "AnswerRefusedError",
    "Approve",
    "BaseHandler",
    "ClarificationRequest",
    "ClarificationResolved",
    "ConsoleHandler",
    "ContextWindowExceededError",
    "ConversationBusyError",
    "Decision",
    "Decline",
    "Deny",
    "Event",
    "Handler",
    "Hook",
    "HpdAgentError",
    "InvalidAnswerError",
    "MaxTurnsExceededError",
    "Message",
    "Model",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelError",
    "ModelNotFoundError",
    "ModelRateLimitError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "NoUserAvailableError",
    "OnUnhandled",
    "OutputValidationError",
    "PermissionRequest",
    "PermissionResolved",
    "QuestionNotAnswered",
    "RequestAlreadyAnsweredError",
    "RequestCancelledError",
    "RequestError",
    "RequestEvent",
    "RequestExpiredError",
    "RequestExpiring",
    "Run",
    "RunCancelledError",
    "RunFinished",
    "RunLeasedError",
    "RunNotFinishedError",
    "RunResult",
    "RunStarted",
    "StepFailed",
    "StoreCorruptError",
    "StoreError",
    "StoreUnavailableError",
    "TextDelta",
    "Tool",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolDefinitionError",
    "TransientModelError",
    "UnknownGrantError",
    "UnknownRequestError",
    "UnknownRunError",
    "Usage",
    "UserError",
    "__version__",
    "ask_user",
    "current_context",
    "instrument",
    "tool",
    "validate_answer",
]
