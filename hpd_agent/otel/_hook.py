"""The tracing hook: one span per agent run, model call, tool call and human wait.

Spans are made current while their work runs (an OTel context is a contextvar, and anyio
copies contextvars into every task), so a model call's span is the child of its agent's, a
nested agent's is the child of the tool call that runs it, and a request's is the child of
the tool call that asks. A request's span is ended from whichever side resolves it (the
responder's task, another process through the store, or the run's end), so open ones are kept
by (run id, request id).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..backend import Author
from ..events import RequestEvent, RequestStatus, invocation_id
from ..hooks import (
    AgentInvocation,
    AgentOutcome,
    CallNext,
    Hook,
    ModelCall,
    ToolExecution,
    ToolOutcome,
)
from ..models import ModelResponse
from . import _attributes as a
from ._probe import global_metrics, global_tracing, records

__all__ = ["OtelHook", "Telemetry"]

Attributes = dict[str, AttributeValue]


class Telemetry:
    """What ``instrument`` chose: the tracer, the instruments, and whether content is kept."""

    __slots__ = (
        "_live",
        "capture",
        "duration",
        "meter_provider",
        "pending",
        "token_usage",
        "tracer",
        "tracer_provider",
        "wait",
    )

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
        capture: bool,
    ) -> None:
        from ..version import __version__

        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.capture = capture
        self._live = False
        # With no provider given these are the global proxies: they start emitting as soon
        # as the application installs an SDK, whenever it does.
        self.tracer = trace.get_tracer(a.SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(a.SCOPE, __version__, meter_provider=meter_provider)
        self.token_usage = meter.create_histogram(
            a.TOKEN_USAGE,
            unit="{token}",
            description="Tokens used per model request, by token type.",
            explicit_bucket_boundaries_advisory=a.TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            a.OPERATION_DURATION,
            unit="s",
            description="Duration of model requests.",
            explicit_bucket_boundaries_advisory=a.DURATION_BUCKETS,
        )
        self.wait = meter.create_histogram(
            a.HUMAN_WAIT,
            unit="s",
            description="How long a question or permission request waited for the human.",
            explicit_bucket_boundaries_advisory=a.WAIT_BUCKETS,
        )
        self.pending = meter.create_up_down_counter(
            a.REQUESTS_PENDING,
            unit="{request}",
            description="Questions and permission requests waiting for the human.",
        )

    def live(self) -> bool:
        """Whether any provider records anything (False while only the API's no-ops are in).

        Asked once per root run, so it costs next to nothing while no SDK is set (see
        ``_probe``). A provider that records never stops (the globals are set once).
        """
        if not self._live:
            tp, mp = self.tracer_provider, self.meter_provider
            self._live = (records(tp) if tp is not None else global_tracing()) or (
                records(mp) if mp is not None else global_metrics()
            )
        return self._live


class _Tally:
    """Token counts of one agent run's own model calls (for its ``invoke_agent`` span)."""

    __slots__ = ("input_tokens", "output_tokens")

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0


# The tally of the agent whose loop is running here; None inside a tool call, so a model call
# a tool makes itself (a preset, a clarifier) is not counted as the agent's own.
_tally: ContextVar[_Tally | None] = ContextVar("hpd_agent_otel_tally", default=None)


class _Wait:
    """An open ``await_human`` span."""

    __slots__ = ("kind", "span", "started", "telemetry")

    def __init__(self, span: Span, kind: str, telemetry: Telemetry) -> None:
        self.span = span
        self.kind = kind
        self.telemetry = telemetry
        self.started = time.monotonic()


def _fail(span: Span, error: BaseException, capture: bool) -> str:
    """Mark ``span`` failed by ``error``; returns the ``error.type``.

    The exception's message can quote content (a prompt, an argument), so it is recorded
    only with capture on; the class name always is.
    """
    name = a.name(type(error).__name__)
    span.set_attribute(a.ERROR_TYPE, name)
    if capture:
        span.set_status(Status(StatusCode.ERROR, f"{name}: {error}"))
        span.record_exception(error)
    else:
        span.set_status(Status(StatusCode.ERROR, name))
    return name


class OtelHook(Hook):
    """Emits the spans and metrics of every root run (installed by ``instrument``).

    Args:
        telemetry: The tracer, instruments and capture setting; ``instrument`` replaces it.
    """

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self._waits: dict[tuple[str, str], _Wait] = {}

    def active(self) -> bool:
        """Take part only while an SDK records something: otherwise a run pays nothing."""
        return self.telemetry.live()

    # -- agents ----------------------------------------------------------------------------
    async def wrap_agent(
        self, invocation: AgentInvocation, call_next: CallNext[AgentInvocation, AgentOutcome]
    ) -> AgentOutcome:
        """An ``invoke_agent`` span, current while the agent runs."""
        t = self.telemetry
        name = a.name(invocation.agent_name)
        attributes: Attributes = {
            a.OPERATION: "invoke_agent",
            a.AGENT_NAME: name,
            # A digest of the run id: the web server's run ids are secrets.
            a.CONVERSATION_ID: invocation_id(invocation.run_id),
            a.AGENT_PATH: a.path_attribute(invocation.agent_path),
            a.REQUEST_MODEL: a.name(invocation.model.name),
        }
        if invocation.invocation_id:
            attributes[a.INVOCATION_ID] = a.name(invocation.invocation_id)
        if invocation.parent_invocation_id:
            attributes[a.PARENT_INVOCATION_ID] = a.name(invocation.parent_invocation_id)
        if invocation.resumed:
            attributes[a.RESUMED] = True
        span = t.tracer.start_span(
            f"invoke_agent {name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        tally = _Tally()
        context_token = otel_context.attach(trace.set_span_in_context(span))
        tally_token = _tally.set(tally)
        try:
            return await call_next(invocation)
        except Exception as e:
            _fail(span, e, t.capture)
            raise
        finally:
            _tally.reset(tally_token)
            otel_context.detach(context_token)
            span.set_attribute(a.INPUT_TOKENS, tally.input_tokens)
            span.set_attribute(a.OUTPUT_TOKENS, tally.output_tokens)
            if invocation.depth == 0:
                # The root is done: a request still open was left for a later resume.
                self._close_waits(invocation.run_id, "interrupted")
            span.end()

    # -- model requests --------------------------------------------------------------------
    async def wrap_model_request(
        self, call: ModelCall, call_next: CallNext[ModelCall, ModelResponse]
    ) -> ModelResponse:
        """A ``chat`` span (CLIENT), current during the request; usage and duration metrics."""
        t = self.telemetry
        model = a.name(call.model.name)
        common: Attributes = {
            a.OPERATION: "chat",
            a.PROVIDER: a.name(a.provider_name(call.model)),
            a.REQUEST_MODEL: model,
        }
        attributes = dict(common)
        if call.invocation_id:
            attributes[a.INVOCATION_ID] = a.name(call.invocation_id)
        if t.capture:
            attributes[a.INPUT_MESSAGES] = a.input_messages_json(call.messages)
        span = t.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes)
        started = time.monotonic()
        context_token = otel_context.attach(trace.set_span_in_context(span))
        try:
            response = await call_next(call)
        except Exception as e:
            otel_context.detach(context_token)
            failed = {**common, a.ERROR_TYPE: _fail(span, e, t.capture)}
            t.duration.record(time.monotonic() - started, failed)
            span.end()
            raise
        except BaseException:
            otel_context.detach(context_token)
            span.end()
            raise
        otel_context.detach(context_token)
        t.duration.record(time.monotonic() - started, common)
        self._record_response(span, response, common)
        span.end()
        return response

    def _record_response(self, span: Span, response: ModelResponse, common: Attributes) -> None:
        t = self.telemetry
        usage = response.usage
        span.set_attribute(a.INPUT_TOKENS, usage.input_tokens)
        span.set_attribute(a.OUTPUT_TOKENS, usage.output_tokens)
        span.set_attribute(a.FINISH_REASONS, (a.finish_reason(response),))
        if t.capture:
            span.set_attribute(a.OUTPUT_MESSAGES, a.output_messages_json(response))
        t.token_usage.record(usage.input_tokens, {**common, a.TOKEN_TYPE: "input"})
        t.token_usage.record(usage.output_tokens, {**common, a.TOKEN_TYPE: "output"})
        tally = _tally.get()
        if tally is not None:
            tally.input_tokens += usage.input_tokens
            tally.output_tokens += usage.output_tokens

    # -- tool calls ------------------------------------------------------------------------
    async def wrap_tool_call(
        self, execution: ToolExecution, call_next: CallNext[ToolExecution, ToolOutcome]
    ) -> ToolOutcome:
        """An ``execute_tool`` span, current while the tool (and any agent it runs) runs."""
        t = self.telemetry
        call = execution.call
        # A tool the agent does not have was named by the model: content.
        tool = a.name(call.name) if execution.known or t.capture else a.UNKNOWN_TOOL
        attributes: Attributes = {
            a.OPERATION: "execute_tool",
            a.TOOL_NAME: tool,
            a.TOOL_CALL_ID: a.name(call.id),
            a.AGENT_PATH: a.path_attribute(execution.agent_path),
        }
        if execution.invocation_id:
            attributes[a.INVOCATION_ID] = a.name(execution.invocation_id)
        if t.capture:
            attributes[a.TOOL_ARGUMENTS] = call.arguments
        span = t.tracer.start_span(
            f"execute_tool {tool}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        context_token = otel_context.attach(trace.set_span_in_context(span))
        tally_token = _tally.set(None)
        try:
            outcome = await call_next(execution)
        except BaseException as e:
            if isinstance(e, Exception):  # a cancellation is no failure of the tool
                _fail(span, e, t.capture)
            span.end()
            raise
        finally:
            _tally.reset(tally_token)
            otel_context.detach(context_token)
        if outcome.is_error:
            error = a.name(outcome.error_type or "_OTHER")
            span.set_attribute(a.ERROR_TYPE, error)
            span.set_status(Status(StatusCode.ERROR, error))
        if t.capture:
            span.set_attribute(a.TOOL_RESULT, outcome.text)
        span.end()
        return outcome

    # -- human requests --------------------------------------------------------------------
    def request_opened(self, event: RequestEvent) -> None:
        """Start an ``await_human`` span under the asking tool call's span."""
        t = self.telemetry
        kind = a.name(a.request_kind(event))
        attributes: Attributes = {
            a.REQUEST_ID: a.name(event.request_id),
            a.REQUEST_KIND: kind,
            a.AGENT_PATH: a.path_attribute(event.agent_path),
        }
        if event.invocation_id:
            attributes[a.INVOCATION_ID] = a.name(event.invocation_id)
        if t.capture:
            attributes[a.REQUEST_QUESTION] = a.request_question(event)
        span = t.tracer.start_span(
            f"await_human {kind}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        self._waits[(event.run_id, event.request_id)] = _Wait(span, kind, t)
        t.pending.add(1, {a.REQUEST_KIND: kind})

    def request_resolved(
        self,
        event: RequestEvent,
        status: RequestStatus,
        answer: Any,
        author: Author | None = None,
    ) -> None:
        """End the request's span with its outcome (from whichever side resolved it) and,
        for an answer or a decline, who gave it on which channel."""
        wait = self._waits.pop((event.run_id, event.request_id), None)
        if wait is None:
            return
        outcome = a.request_outcome(event, status, answer)
        span = wait.span
        if wait.telemetry.capture and status == "answered":
            span.set_attribute(a.REQUEST_ANSWER, a.to_json(answer))
        if author is not None:
            if author.by is not None:
                span.set_attribute(a.ANSWERED_BY, a.name(author.by))
            span.set_attribute(a.CHANNEL, a.name(author.channel))
        self._end_wait(wait, outcome)

    def _end_wait(self, wait: _Wait, outcome: str) -> None:
        span = wait.span
        span.set_attribute(a.REQUEST_OUTCOME, outcome)
        if outcome == "timeout":
            span.set_attribute(a.ERROR_TYPE, "timeout")
            span.set_status(Status(StatusCode.ERROR, "timeout"))
        span.end()
        t = wait.telemetry
        labels: Mapping[str, AttributeValue] = {a.REQUEST_KIND: wait.kind}
        t.wait.record(time.monotonic() - wait.started, {**labels, a.REQUEST_OUTCOME: outcome})
        t.pending.add(-1, labels)

    def _close_waits(self, run_id: str, outcome: str) -> None:
        for key in [k for k in self._waits if k[0] == run_id]:
            self._end_wait(self._waits.pop(key), outcome)
