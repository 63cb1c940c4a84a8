"""``Tool`` and ``@tool``: functions the model can call.

A tool's JSON schema comes from the function's signature and its Google-style docstring;
pydantic validates the arguments the model sends. Malformed JSON or invalid arguments never
reach the function: the model gets an error result saying what was wrong, and the run goes on.
Arguments are untrusted: more than ``MAX_ARGUMENT_CHARS`` characters, nesting deeper than
the JSON parser's limit, or lone surrogates (``"\\ud800"``, which no store can encode) are
refused the same way, as that call's error result.

A parameter annotated ``ToolContext`` (or ``ToolContext[MyDeps]``) is not part of the
schema; the loop passes the call's context there (agent path, request helpers such as
``ctx.ask``, the run's ``ctx.deps``).

A ``Toolset`` stands for tools known only once a run starts (an MCP server's, listed when
it is reached): ``Agent(tools=[...])`` takes it beside plain tools, and each agent call
resolves it into ``Tool`` objects, once per root run, keeping what it opens (a connection,
a subprocess) in the root run's ``RunResources`` until the root run ends.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast, get_origin, get_type_hints, overload

import anyio.to_thread
import pydantic
import pydantic_core

from ._core.context import ToolContext
from ._values.arguments import MAX_ARGUMENT_CHARS
from ._values.arguments import SURROGATE as _SURROGATE
from .exceptions import ToolDefinitionError
from .models._base import ToolDefinition
from .text import bounded

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "ApprovalPolicy",
    "RunResources",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "Toolset",
    "tool",
]

_SURROGATE_HINT = (
    " A lone UTF-16 surrogate (e.g. \\ud800 without its low half) is not text: send valid Unicode."
)

ApprovalPolicy = bool | Callable[[dict[str, Any]], bool]
"""``True`` (always ask), ``False`` (never), or a callable deciding from the arguments."""

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SECTION_RE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Examples?|Notes?|Attributes)\s*:\s*$"
)
_ARG_RE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


# Built once: a subscripted Callable[...] in the call path costs ~1 µs per tool call.
_AsyncFunction = Callable[..., Awaitable[Any]]


class ToolArgumentsError(ValueError):
    """The model's arguments could not be used; the message is written for the model."""


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        m = _SECTION_RE.match(line)
        if m:
            section = m.group(1).lower()
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in ("args", "arguments", "parameters"):
            am = _ARG_RE.match(line)
            if am and (len(line) - len(line.lstrip())) <= 4:
                name = str(am.group(1)).lstrip("*")
                params[name] = str(am.group(3)).strip()
                current = name
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's auto titles: they cost tokens and tell the model nothing."""
    schema.pop("title", None)
    props = schema.get("properties")
    if isinstance(props, dict):
        for prop in cast(dict[str, dict[str, Any]], props).values():
            prop.pop("title", None)
    return schema


@dataclass(frozen=True, kw_only=True, slots=True)
class _Signature:
    validator: type[pydantic.BaseModel] | None
    parameters: dict[str, Any]
    context_param: str | None
    description: str


def _caller_namespace() -> dict[str, Any]:
    """Locals of the first frame outside hpd_agent: lets tools defined inside functions use
    types defined there, even under ``from __future__ import annotations``."""
    frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
    while frame is not None and frame.f_globals.get("__name__", "").startswith("hpd_agent."):
        frame = frame.f_back
    return dict(frame.f_locals) if frame is not None else {}


def _inspect_function(fn: Callable[..., Any], name: str) -> _Signature:
    try:
        sig = inspect.signature(fn)
        try:
            hints = get_type_hints(fn, include_extras=True)
        except NameError:
            hints = get_type_hints(fn, localns=_caller_namespace(), include_extras=True)
    except (TypeError, NameError, ValueError) as e:
        raise ToolDefinitionError(f"cannot read the signature of tool {name!r}: {e}") from e
    if hints.get("return") in (Tool, Toolset):
        # A factory such as ``ask_user`` passed uncalled: the model would call the factory.
        raise ToolDefinitionError(
            f"{name!r} makes a tool rather than being one: pass {name}() (what it returns)"
        )
    doc_description, doc_params = _parse_docstring(inspect.getdoc(fn))
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {name!r}: *args/**kwargs cannot be described to a model"
            )
        annotation = hints.get(pname, Any)
        if annotation is ToolContext or get_origin(annotation) is ToolContext:
            context_param = pname
            continue
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, pydantic.Field(default, description=doc_params.get(pname)))
    if not fields:
        return _Signature(
            validator=None,
            parameters={"type": "object", "properties": {}},
            context_param=context_param,
            description=doc_description,
        )
    try:
        model = pydantic.create_model(f"{name}_arguments", **fields)
        parameters = _clean_schema(model.model_json_schema())
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as e:
        raise ToolDefinitionError(f"tool {name!r}: unsupported parameter type: {e}") from e
    return _Signature(
        validator=model,
        parameters=parameters,
        context_param=context_param,
        description=doc_description,
    )


class Tool:
    """A function the model can call.

    Build one with ``@tool`` or ``Tool(fn, ...)``. Sync functions run in a worker thread so
    they cannot stall the other agents; async functions run on the event loop. A sync call
    that times out, or whose run is cancelled, ends at once (the result is the timeout text,
    or the cancellation goes on), but its thread cannot be killed: it keeps running until the
    function returns, and what it returns is dropped (see docs/guarantees.md, "Threads").

    Args:
        function: The function to call; sync or async.
        name: Tool name the model sees; defaults to the function's name.
        description: What the tool does; defaults to the docstring's summary.
        requires_approval: Ask the human before each call (``True``), never (``False``), or
            let a callable decide from the validated arguments.
        timeout: Seconds the call may take, not counting time spent waiting for a human
            (a sync function's thread is then abandoned, not stopped).
        parameters: Override the JSON schema (advanced; arguments are then passed unvalidated).
    """

    __slots__ = (
        "_blocking",
        "_context_param",
        "_is_async",
        "_validator",
        "agent",
        "definition",
        "description",
        "function",
        "name",
        "parameters",
        "requires_approval",
        "side_effects",
        "timeout",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        tool_name = name or getattr(function, "__name__", "")
        if not _NAME_RE.match(tool_name):
            raise ToolDefinitionError(
                f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-'"
            )
        sig = _inspect_function(function, tool_name)
        self.function = function
        self.name = tool_name
        self.description = description if description is not None else sig.description
        self.parameters: Mapping[str, Any] = (
            dict(parameters) if parameters is not None else sig.parameters
        )
        self._validator = None if parameters is not None else sig.validator
        self._context_param = sig.context_param
        self.requires_approval: ApprovalPolicy = requires_approval
        self.timeout = timeout
        self._is_async = inspect.iscoroutinefunction(function)
        self._blocking = not self._is_async
        self.side_effects = True
        """Whether the function may act outside the framework; False only for the
        framework's own tools (``Agent.as_tool``, ``ask_user``), which act through requests
        and nested tool calls (a durable run may then hold its journal writes until those)."""
        self.agent: object | None = None
        """The agent this tool runs (``Agent.as_tool`` sets it), else None: how an
        integration walks an agent tree (a workflow engine, a server listing sub-agents)
        without looking inside the function."""
        self.definition = ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    @property
    def takes_context(self) -> bool:
        """Whether the function takes a ``ToolContext``: it may ask the human or call nested
        tools through the run, so it can only run inside the run (an integration that runs
        tools elsewhere, as Temporal's activities do, leaves such a tool in place)."""
        return self._context_param is not None

    def validate_arguments(self, raw: str) -> dict[str, Any]:
        """Parse and validate the model's JSON arguments.

        Raises:
            ToolArgumentsError: With a message meant for the model (bounded in length).
        """
        _check_raw(self.name, raw)
        if self._validator is None:
            if raw in ("", "{}"):
                return {}
            try:
                # pydantic_core's parser has a nesting limit: no RecursionError on [[[[...
                value = pydantic_core.from_json(raw)
            except ValueError as e:
                raise ToolArgumentsError(
                    bounded(
                        _hint(
                            f"Invalid arguments for tool {self.name!r}: not valid JSON ({e}). "
                            "Send a JSON object."
                        )
                    )
                ) from None
            if not isinstance(value, dict):
                raise ToolArgumentsError(
                    f"Invalid arguments for tool {self.name!r}: expected a JSON object."
                )
            return cast(dict[str, Any], value)
        try:
            validated = self._validator.model_validate_json(raw or "{}")
        except pydantic.ValidationError as e:
            raise ToolArgumentsError(
                bounded(
                    _hint(
                        f"Invalid arguments for tool {self.name!r}: {_summarise(e)}. "
                        f"Expected arguments matching: {json.dumps(self.parameters)}"
                    )
                )
            ) from None
        return dict(validated)

    def needs_approval(self, arguments: dict[str, Any]) -> bool:
        """Whether this call must be approved by the human before it runs."""
        policy = self.requires_approval
        if isinstance(policy, bool):
            return policy
        return bool(policy(arguments))

    async def call(self, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        """Run the function with validated arguments (and the context, if it takes one)."""
        if self._context_param is not None:
            arguments = {**arguments, self._context_param: ctx}
        if self._is_async:
            return await cast(_AsyncFunction, self.function)(**arguments)
        if self._blocking:
            fn = self.function
            # abandon_on_cancel: a timeout or a cancelled run does not wait for the thread.
            # The thread itself cannot be stopped: it runs on until ``fn`` returns, and its
            # result is dropped.
            return await anyio.to_thread.run_sync(lambda: fn(**arguments), abandon_on_cancel=True)
        return self.function(**arguments)


def _check_raw(name: str, raw: str) -> None:
    """Refuse argument text too long to parse or holding lone surrogates, before parsing."""
    if len(raw) > MAX_ARGUMENT_CHARS:
        raise ToolArgumentsError(
            f"Invalid arguments for tool {name!r}: {len(raw):,} characters, more than the "
            f"{MAX_ARGUMENT_CHARS:,} allowed. Send shorter arguments."
        )
    if not raw.isascii() and _SURROGATE.search(raw) is not None:
        raise ToolArgumentsError(f"Invalid arguments for tool {name!r}:{_SURROGATE_HINT}")


def _hint(message: str) -> str:
    """The parser's message, with the surrogate hint when that is what it tripped on."""
    if "hex escape" in message or "surrogate" in message:
        return message + _SURROGATE_HINT
    return message


def _summarise(error: pydantic.ValidationError) -> str:
    parts: list[str] = []
    for err in error.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def result_to_text(value: Any) -> str:
    """The text a tool's return value becomes for the model: str as is, else JSON."""
    if isinstance(value, str):
        return value if value.isascii() else bounded(value, len(value))
    try:
        return pydantic_core.to_json(value).decode()
    except pydantic_core.PydanticSerializationError:
        return bounded(str(value), len(str(value)))


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: ApprovalPolicy = False,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: ApprovalPolicy = False,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a ``Tool``; use bare (``@tool``) or with options.

    Args:
        function: The function, when used bare.
        name: Tool name; defaults to the function name.
        description: Defaults to the docstring summary.
        requires_approval: See ``Tool``.
        timeout: Seconds the call may take, not counting time waiting for a human.

    Example:
        ```python
        @tool(requires_approval=True)
        async def write_file(path: str, text: str) -> str:
            \"\"\"Write a file.

            Args:
                path: Where to write.
                text: What to write.
            \"\"\"
        ```
    """

    def wrap(fn: Callable[..., Any]) -> Tool:
        return Tool(
            fn,
            name=name,
            description=description,
            requires_approval=requires_approval,
            timeout=timeout,
        )

    if function is not None:
        return wrap(function)
    return wrap


_T = TypeVar("_T")


class RunResources(Protocol):
    """What a root run keeps open for its toolsets, closed when the root run ends.

    A ``Toolset`` gets it in ``resolve``, and may keep it (its tools may open more later,
    e.g. one connection per concurrent call). Everything entered here is exited when the
    root run ends: completed, failed, interrupted or cancelled, before its ``RunFinished``.
    """

    @property
    def run_id(self) -> str:
        """The root run's id."""
        ...

    async def enter(self, resource: AbstractAsyncContextManager[_T]) -> _T:
        """Enter ``resource`` for the rest of the root run and return what it gives.

        It is entered and exited in a task the root run owns (not the caller's), so a
        context manager holding a task group or a cancel scope (a client session, a
        subprocess) may be entered from any tool call or agent call of the run. An error
        while entering is raised here; one after (the resource failing on its own) does
        not end the run: the resource's users see it fail.
        """
        ...


class Toolset(ABC):
    """Tools known only when a run starts: resolved per agent call, once per root run.

    Pass one to ``Agent(tools=[...])`` beside plain tools (``hpd_agent.mcp.MCPTools`` is
    one). When an agent call starts, its toolsets are resolved in order (each at most
    once per root run, however many agents and calls share it) and their tools are added
    to the agent's own for that call; a name used twice fails the agent call with
    ``UserError``. What ``resolve`` opens goes into ``resources`` and is closed when the
    root run ends.

    An agent with a toolset cannot run on Temporal (``hpd_agent.temporal`` refuses it).
    """

    @property
    def label(self) -> str:
        """What the toolset is, for error messages (default: its class name)."""
        return type(self).__name__

    @abstractmethod
    async def resolve(self, resources: RunResources) -> Sequence[Tool]:
        """The tools for this root run.

        Args:
            resources: The root run's resources: enter there what must stay open while
                the tools are used (``await resources.enter(client)``).
        """
