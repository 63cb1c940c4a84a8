"""Every exception hpd_agent raises.

One root, so ``except HpdAgentError`` catches everything the framework raises on purpose.
Misuse of the API (a bug in the caller's code) lives under ``UserError``; everything else is
a runtime condition a correct program can meet and handle.

```
HpdAgentError
├── UserError                       the caller used the API wrongly
│   ├── ToolDefinitionError         a function cannot become a tool
│   ├── RunNotFinishedError         result asked for before the run ended
│   ├── RunLeasedError              another process drives the run (it holds the lease)
│   ├── UnknownRunError             a server hosts no run with that id (hpd_agent.hosting)
│   ├── ConversationBusyError       a conversation's turn still runs (hpd_agent.hosting)
│   └── UnknownGrantError           no remembered grant has that id (revoke)
├── RequestError                    respond() refused an answer; nothing changed
│   ├── UnknownRequestError         no request has that id
│   ├── RequestAlreadyAnsweredError the request has its answer already (or was declined)
│   ├── RequestExpiredError         the request timed out before the answer came
│   ├── RequestCancelledError       the request was cancelled
│   ├── InvalidAnswerError          the answer does not fit the question
│   └── AnswerRefusedError          a policy does not let this identity answer it
├── QuestionNotAnswered             a question ended without an answer (tools see this)
│   └── ClarifyInterrupted          (presets) a clarify loop's question; carries its state
├── StepFailed                      a journaled step failed in an earlier life of the run
├── StoreError                      a durable store cannot be used
│   ├── StoreUnavailableError       it cannot be opened (missing, not a database, unreachable)
│   └── StoreCorruptError           it holds a row this version cannot read
├── AgentRunError                   a run could not complete
│   ├── MaxTurnsExceededError       the model kept calling tools past max_turns
│   ├── NoUserAvailableError        a request arose with nobody to answer (policy "error")
│   ├── OutputValidationError       the final answer never fitted the agent's output_type
│   └── RunCancelledError           the run was cancelled
└── ModelError                      the model call failed
    ├── ScriptExhaustedError        a scripted test model ran out of steps
    ├── ModelAuthenticationError    the provider refused the credentials (401/403)
    ├── ModelBadRequestError        the provider rejected the request as malformed (400)
    │   └── ContextWindowExceededError  the conversation is too long for the model
    ├── ModelNotFoundError          the provider does not know the model (404)
    └── TransientModelError         worth retrying (LiteLLMModel retries these with backoff)
        ├── ModelRateLimitError     too many requests (429)
        ├── ModelTimeoutError       no answer in time, or the connection failed
        └── ModelUnavailableError   the provider failed or is overloaded (5xx), or nothing
                                    listens at its address (refused: not retried)
```

Integrations add theirs under the same root: ``hpd_agent.a2a.RemoteAgentError`` (a remote
agent's task failed, was rejected or canceled, or the remote could not be reached) and
``hpd_agent.acp.ACPAgentError`` (an ACP agent's call failed: it could not be started, exited,
answered with an error, or ended its turn refused or cancelled).
"""

from __future__ import annotations

import sys
from typing import Any

from .text import bounded

__all__ = [
    "AgentRunError",
    "AnswerRefusedError",
    "ContextWindowExceededError",
    "ConversationBusyError",
    "HpdAgentError",
    "InvalidAnswerError",
    "MaxTurnsExceededError",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelError",
    "ModelNotFoundError",
    "ModelRateLimitError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "NoUserAvailableError",
    "OutputValidationError",
    "QuestionNotAnswered",
    "RequestAlreadyAnsweredError",
    "RequestCancelledError",
    "RequestError",
    "RequestExpiredError",
    "RunCancelledError",
    "RunLeasedError",
    "RunNotFinishedError",
    "ScriptExhaustedError",
    "StepFailed",
    "StoreCorruptError",
    "StoreError",
    "StoreUnavailableError",
    "ToolDefinitionError",
    "TransientModelError",
    "UnknownGrantError",
    "UnknownRequestError",
    "UserError",
]


class HpdAgentError(Exception):
    """Root of every exception hpd_agent raises on purpose."""


class UserError(HpdAgentError):
    """The API was used wrongly; the message says how to fix the call."""


class ToolDefinitionError(UserError):
    """A function or agent cannot be turned into a tool (bad name, unsupported signature)."""


class RunNotFinishedError(UserError):
    """A run's result was read before the run ended."""


class RunLeasedError(UserError):
    """Another process drives the run: it holds the run's lease in the store.

    Raised by ``resume``/``resume_stream`` (and ``run`` with a run id in use) before anything
    is written, and by a run whose process lost its lease (it stops driving the run, which
    the new holder continues). See docs/guarantees.md.

    Attributes:
        run_id: The run.
        holder: Who holds the lease (``host:pid:random``).
        expires_at: When the lease expires unless its holder renews it (seconds since the
            epoch); a holder that died is taken over after this.
        lost: True when this process drove the run and lost its lease on the way (it may
            have written before; the new holder continues the run): not to be retried as
            a refusal. False when a ``resume`` was refused before it wrote anything.
    """

    def __init__(
        self, message: str, *, run_id: str, holder: str, expires_at: float, lost: bool = False
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.holder = holder
        self.expires_at = expires_at
        self.lost = lost


class UnknownRunError(UserError):
    """A server hosts no run with that id: it ended without a store, or it is another
    agent's (``hpd_agent.hosting.RunHost.reopen``)."""


class ConversationBusyError(UserError):
    """A server was asked for a conversation's next turn while its last one still runs
    (``hpd_agent.hosting.RunHost.start``): wait for it to end, or cancel it."""


class UnknownGrantError(UserError):
    """No remembered grant has that id (``GrantBook.revoke_grant``, ``hpd-agent grants
    revoke``)."""


class RequestError(HpdAgentError):
    """An answer given to ``respond`` was refused. The request is left exactly as it was.

    Its message is bounded (``hpd_agent.text.bounded``): a refused answer of megabytes
    gives a message of a few KB, wherever it is shown.

    Attributes:
        request_id: The id the answer was addressed to.
    """

    def __init__(self, message: str, *, request_id: str) -> None:
        super().__init__(bounded(message))
        self.request_id = request_id


class UnknownRequestError(RequestError):
    """No request with this id exists in the run (or the store)."""


class RequestAlreadyAnsweredError(RequestError):
    """The request was answered (or declined) before; a request takes exactly one answer."""


class RequestExpiredError(RequestError):
    """The request timed out; a late answer is refused, never silently acknowledged."""


class RequestCancelledError(RequestError):
    """The request was cancelled (its run or its tool call ended) before the answer came."""


class InvalidAnswerError(RequestError):
    """The answer does not fit the question (wrong type, not one of the options, ...)."""


class AnswerRefusedError(RequestError):
    """An answer policy does not let this identity answer (or decline) the request
    (``hpd_agent.governance``); nothing was written. The message says why."""


class QuestionNotAnswered(HpdAgentError):
    """A question ended without an answer: the user declined it, it expired, was cancelled,
    or nobody was there.

    Raised inside the asking tool by ``ToolContext.ask`` and friends. The agent loop turns it
    into a plain tool result the model can act on, so waiting never crashes the model.

    Attributes:
        status: ``"declined"`` (the user refused to answer: ``Decline()``), ``"expired"``,
            ``"cancelled"`` or ``"unavailable"``.
        request_id: The id of the request that went unanswered.
    """

    def __init__(self, message: str, *, status: str, request_id: str) -> None:
        super().__init__(message)
        self.status = status
        self.request_id = request_id


class StepFailed(HpdAgentError):
    """A journaled step's function failed in an earlier life of the run, and its error
    cannot be raised again as its own type.

    A durable run journals a step that raises (the error's type and bounded message) as it
    journals a result. When the run is resumed, that step raises again without calling its
    function: as an error of the recorded type when that type is an ``Exception`` subclass
    in a module already imported (the message is the recorded one; ``__init__`` is not
    called), else as ``StepFailed``.

    Attributes:
        step: The step's name.
        error_type: The qualified name of the recorded error's type (``"builtins.KeyError"``).
        error_message: Its recorded message (bounded).
    """

    def __init__(self, message: str, *, step: str, error_type: str, error_message: str) -> None:
        super().__init__(message)
        self.step = step
        self.error_type = error_type
        self.error_message = error_message

    @staticmethod
    def revive(step: str, error_type: str, error_message: str) -> Exception:
        """The error a step whose failure was recorded raises again without running.

        Of the recorded type when ``error_type`` (``"module.Qualname"``) names an
        ``Exception`` subclass in a module already imported (never importing anything;
        ``__init__`` is not called, the message is the recorded one), else ``StepFailed``.
        Used by the journal's replay and by integrations that run steps elsewhere (Temporal).

        Args:
            step: The step's name.
            error_type: The qualified name of the recorded error's type.
            error_message: Its recorded message.
        """
        cls = _loaded_class(error_type)
        if cls is not None:
            try:
                revived = cls.__new__(cls, error_message)
                revived.args = (error_message,)
                str(revived)  # its __str__ may need what __init__ would have set
                return revived
            except Exception:  # a type that cannot be made this way: StepFailed says it
                pass
        return StepFailed(
            f"step {step!r} failed: {error_type}: {error_message}",
            step=step,
            error_type=error_type,
            error_message=error_message,
        )


def _loaded_class(qualified: str) -> type[Exception] | None:
    """The exception class named ``module.Qualname``, if its module is already imported."""
    module_name, _, qualname = qualified.rpartition(".")
    obj: Any = sys.modules.get(module_name)
    # A nested class has dots in its qualname: try each split of the name.
    while obj is None and "." in module_name:
        module_name, _, outer = module_name.rpartition(".")
        qualname = f"{outer}.{qualname}"
        obj = sys.modules.get(module_name)
    if obj is None or "<" in qualname:
        return None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, Exception):
        return obj
    return None


class StoreError(HpdAgentError):
    """A durable store cannot be used; the message names the store and what is wrong."""


class StoreUnavailableError(StoreError):
    """The store cannot be opened: no such file, not a database, or the server is unreachable."""


class StoreCorruptError(StoreError):
    """The store holds a row this version cannot read (bad JSON, a payload of the wrong kind).

    The message names where: the run id, request id or journal key. Nothing was changed.
    """


class AgentRunError(HpdAgentError):
    """A run could not complete."""


class MaxTurnsExceededError(AgentRunError):
    """The model was still calling tools after ``max_turns`` model turns."""


class NoUserAvailableError(AgentRunError):
    """A request arose with no handler and no stream consumer, under ``on_unhandled="error"``."""


class OutputValidationError(AgentRunError):
    """An agent with ``output_type`` never gave a final answer that validates.

    Every invalid answer went back to the model with the validation error, up to the
    agent's ``output_retries``; the message names the agent, the attempts and the last error.

    Attributes:
        agent_name: The agent whose answer did not validate.
        attempts: Final answers the model gave (the first and every retry).
        last_error: Why the last one was refused.
    """

    def __init__(self, message: str, *, agent_name: str, attempts: int, last_error: str) -> None:
        super().__init__(message)
        self.agent_name = agent_name
        self.attempts = attempts
        self.last_error = last_error


class RunCancelledError(AgentRunError):
    """The run was cancelled before it produced a result."""


class ModelError(HpdAgentError):
    """A model request failed.

    Attributes:
        status_code: The provider's HTTP status, when there was one.
        provider: The provider (or model) that failed, when known.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, provider: str | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.provider = provider


class ModelAuthenticationError(ModelError):
    """The provider refused the credentials: check the API key (retrying will not help)."""


class ModelBadRequestError(ModelError):
    """The provider rejected the request as malformed or unsupported (retrying will not help)."""


class ContextWindowExceededError(ModelBadRequestError):
    """The conversation no longer fits the model's context window."""


class ModelNotFoundError(ModelError):
    """The provider does not know the model name."""


class TransientModelError(ModelError):
    """A failure that may pass: ``LiteLLMModel`` retries these with exponential backoff."""


class ModelRateLimitError(TransientModelError):
    """The provider is rate limiting (HTTP 429)."""


class ModelTimeoutError(TransientModelError):
    """The provider did not answer in time, or could not be reached."""


class ModelUnavailableError(TransientModelError):
    """The provider failed or is overloaded (HTTP 5xx), or nothing listens at its address.

    A refused connection (a local server not started) fails at once, naming the address:
    ``LiteLLMModel`` does not retry it.
    """


class ScriptExhaustedError(ModelError):
    """A ``ScriptedModel`` was asked for more responses than its script holds."""
