"""``ACPAgent``: an agent that speaks the Agent Client Protocol (an editor's agent such as
Claude Code's ACP adapter, Gemini CLI, or ``hpd-agent acp``) used as a sub-agent.

``ACPAgent(...).as_tool()`` is a ``Toolset`` giving one tool, ``{"query": str}``. Its process
is a resource of the root run, shared by the run's calls, each a session of its own whose
streamed text is the result. What the agent asks during a call reaches the root run's stream
as a request of the calling tool, relayed ``on_behalf_of`` the agent (and the path an hpd
tree names under itself in ``_meta.hpd_agent.agent_path``), keyed by what the agent sent, so
a resumed run that calls it again asks under the same ids. Files are served inside the
call's ``cwd`` only; terminals are not offered.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import anyio
import anyio.to_thread

from ..exceptions import HpdAgentError, QuestionNotAnswered, UserError
from ..permissions import Approve, Decision, Deny, PermissionSpec
from ..questions import CustomQuestion
from ..text import bounded, error_text, shown
from ..tools import RunResources, Tool, ToolContext, Toolset
from ..version import __version__
from ._rpc import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NOT_FOUND,
    Child,
    ConnectionClosed,
    RPCError,
    as_object,
    spawn,
)

__all__ = ["CLIENT_CAPABILITIES", "ELICITATION", "ACPAgent", "ACPAgentError"]

ELICITATION = "acp.elicitation"
"""``data["name"]`` of the custom question an ACP form elicitation becomes."""

PROTOCOL_VERSION = 1
CLIENT_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": False,
    "elicitation": {"form": {}},
}
"""What this client offers an agent in ``initialize``."""

_SAFE_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""This process's variables a spawned agent gets (as ``MCPTools.stdio``'s servers)."""
_START_WAIT = 120.0
"""Seconds an agent may take to answer ``initialize`` (``npx`` may download it first)."""
_TURN_GRACE = 3.0
"""Seconds a cancelled call gives the agent's turn to end after ``session/cancel``."""
_MAX_FILE = 16 << 20
"""Largest file read for the agent (bytes)."""
_MAX_TEXT = 1 << 20
"""Most characters of an agent's answer kept for the calling model."""
_MAX_PATH = 64
"""Most agent names taken from a remote's ``_meta.hpd_agent.agent_path``."""
_CANCELLED = {"outcome": {"outcome": "cancelled"}}
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_-]")


class ACPAgentError(HpdAgentError):
    """An ACP agent's call failed (it could not be started, it exited or broke the protocol,
    answered with an error, or ended its turn refused or cancelled): raised in the tool
    call, it is that call's error result, naming the agent; the run goes on."""


class ACPAgent:
    """An agent another program runs behind the Agent Client Protocol (ACP) on its
    stdin/stdout, used as one more sub-agent: ``Agent(tools=[ACPAgent(...).as_tool()])``.

    Nothing starts before a call. The first call in a root run starts the program; every
    call of that run (parallel ones too) shares it, each in a session of its own; the
    program is closed and reaped when the root run ends, before its result is available.
    Its permission requests and form elicitations reach the root run's stream as requests
    of the calling tool (``agent_path``: the caller's, then this agent's name, then the
    path an hpd agent tree reports below itself). See docs/acp.md.

    Args:
        command: The program (found on ``PATH``), e.g. ``"hpd-agent"`` or ``"npx"``.
        args: Its arguments.
        name: Its name in agent paths and the tool's default name; default: the command's
            base name without extension (characters a tool name cannot hold made ``_``).
        cwd: Its working directory and every session's ``cwd``, the only directory whose
            files it may read and write through this client (made absolute; default:
            this process's working directory).
        env: Environment variables for it, over the few safe ones it gets by default
            (``PATH``, ``HOME``, ...: not the whole of this process's environment).

    Raises:
        UserError: An empty command or name, arguments that are not a list of strings.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        name: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(command, str) or not command:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"ACPAgent needs a command, got {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"ACPAgent's args must be a list of strings, got {shown(args)}")
        if name is not None and not name:
            raise UserError("ACPAgent's name must not be empty")
        self.command = command
        self.args = tuple(args)
        self.name = name or _tool_name(os.path.splitext(os.path.basename(command))[0])
        self.cwd: str = os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())
        self.env = dict(env or {})

    def __repr__(self) -> str:
        return f"ACPAgent({self.command!r}, {list(self.args)!r}, name={self.name!r})"

    def as_tool(self, name: str | None = None, description: str | None = None) -> Toolset:
        """The agent as one tool taking ``{"query": str}``, for ``Agent(tools=[...])``.

        Args:
            name: The tool's name; default: the agent's name (made a valid tool name).
            description: For the calling model; default: one naming the agent.
        """
        return _Tools(
            self,
            name or _tool_name(self.name),
            description or f"Delegate a task to the agent {self.name} and get its answer.",
        )

    def environment(self) -> dict[str, str]:
        """The environment the program gets: the safe variables of this process, ``env``
        over them (a value starting ``()`` is a shell function: left out)."""
        found = {k: v for k in _SAFE_ENV if (v := os.environ.get(k)) and not v.startswith("()")}
        return {**found, **self.env}


class _Tools(Toolset):
    """What ``as_tool`` gives: one tool, calling the agent through the root run's process."""

    def __init__(self, agent: ACPAgent, name: str, description: str) -> None:
        self.agent = agent
        self.name = name
        self.description = description

    @property
    def label(self) -> str:
        return f"ACP agent {self.agent.name}"

    async def resolve(self, resources: RunResources) -> Sequence[Tool]:
        run = _Run(self.agent, resources)  # resolved once per root run: its process

        async def call_agent(ctx: ToolContext, query: str) -> str:
            """Send a task to the agent and get its answer.

            Args:
                query: The task or question for the agent, with every detail it needs.
            """
            return await (await run.connection()).call(ctx, query)

        tool = Tool(call_agent, name=self.name, description=self.description)
        tool.agent = self.agent
        return [tool]


class _Run:
    """One ACP agent in one root run: the process its calls share (a new one after a crash)
    and the tools the human approved for the run (asked again by a new session)."""

    def __init__(self, agent: ACPAgent, resources: RunResources) -> None:
        self.agent = agent
        self.resources = resources
        self.live: _Connection | None = None
        self.approved: set[tuple[tuple[str, ...], str]] = set()
        self._lock = anyio.Lock()

    async def connection(self) -> _Connection:
        async with self._lock:  # parallel first calls wait for one process, not start two
            if self.live is None or self.live.child.broken:
                agent, connection = self.agent, _Connection(self)
                try:
                    connection.child = await self.resources.enter(
                        spawn(
                            [agent.command, *agent.args],
                            cwd=agent.cwd,
                            env=agent.environment(),
                            on_request=connection.on_request,
                            on_notification=connection.on_notification,
                            before_close=connection.drain,
                        )
                    )
                except (OSError, RuntimeError) as e:
                    raise ACPAgentError(
                        f"{agent.name}: cannot start {agent.command!r}: {error_text(e)}"
                    ) from None
                await connection.initialize()
                self.live = connection
            return self.live


class _Connection:
    """One process of the agent, its JSON-RPC connection and the calls it serves."""

    child: Child
    """The process (set as it starts)."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.name = run.agent.name
        self.calls: dict[str, _Call] = {}
        """The calls in progress, by session id."""
        self.asking: dict[int, _Call] = {}
        """Our requests in flight, by JSON-RPC id: what a request-scoped message names."""
        self.running: set[_Call] = set()

    async def drain(self) -> None:
        """Wait (a few seconds at most) for the calls to end: a call cancelled with the run
        first ends its turn over the connection, then the process is closed."""
        with anyio.move_on_after(3 * _TURN_GRACE):
            for call in list(self.running):
                await call.finished.wait()

    async def initialize(self) -> None:
        """The handshake; a failure closes the process and raises ``ACPAgentError``."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "hpd-agent", "version": __version__},
        }
        problem = f"no answer to initialize within {_START_WAIT:g} seconds"
        with anyio.move_on_after(_START_WAIT):
            try:
                result = await self.child.peer.request("initialize", params)
                version = as_object(result).get("protocolVersion")
                ok = version == PROTOCOL_VERSION
                problem = "" if ok else f"it speaks ACP version {shown(version)}, not 1"
            except RPCError as e:
                problem = await self._failure("initialize", e)
        if problem:
            await self.child.close()
            raise ACPAgentError(f"{self.name}: {problem}")

    # -- a call -------------------------------------------------------------------------
    async def call(self, ctx: ToolContext, query: str) -> str:
        """One session, one prompt: the agent's answer (else ``ACPAgentError``)."""
        call = _Call(ctx, self)
        self.running.add(call)
        try:
            params: dict[str, Any] = {"cwd": call.cwd, "mcpServers": []}
            created = await self._request(call, "session/new", params)
            session = as_object(created).get("sessionId")
            if not isinstance(session, str) or session in self.calls:
                raise ACPAgentError(f"{self.name} answered session/new without a new sessionId")
            call.session = session
            self.calls[session] = call
            answered = await self._prompt(call, query)
        except RPCError as e:
            raise ACPAgentError(f"{self.name}: {await self._failure('the call', e)}") from None
        finally:
            self.calls.pop(call.session, None)
            call.end()
            self.running.discard(call)
            call.finished.set()
        return _result(self.name, as_object(answered).get("stopReason"), call.answer())

    async def _request(self, call: _Call, method: str, params: Any) -> Any:
        rid = self.child.peer.next_request_id
        self.asking[rid] = call
        try:
            return await self.child.peer.request(method, params)
        finally:
            self.asking.pop(rid, None)

    async def _prompt(self, call: _Call, query: str) -> Any:
        """``session/prompt``, sent from the connection's task group: cancelling the call
        sends ``session/cancel`` and gives the turn ``_TURN_GRACE`` seconds to end."""
        params = {"sessionId": call.session, "prompt": [{"type": "text", "text": query}]}
        done, scope = anyio.Event(), anyio.CancelScope(shield=True)  # outlives a cancelled run
        got: list[Any] = []

        async def send() -> None:
            try:
                with scope:
                    got.append(await self._request(call, "session/prompt", params))
            except RPCError as e:
                got.append(e)
            finally:
                done.set()

        if self.child.broken:
            raise ConnectionClosed()
        self.child.tg.start_soon(send)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._cancel_turn(call, done, scope)
            raise
        if not got or isinstance(got[0], RPCError):
            raise got[0] if got else ConnectionClosed()
        return got[0]

    async def _cancel_turn(self, call: _Call, done: anyio.Event, scope: anyio.CancelScope) -> None:
        call.ended = True
        with contextlib.suppress(RPCError), anyio.move_on_after(_TURN_GRACE):
            await self.child.peer.notify("session/cancel", {"sessionId": call.session})
        call.cancel_sent.set()
        call.end()  # its pending questions are answered cancelled
        with anyio.move_on_after(_TURN_GRACE):
            await done.wait()
        scope.cancel()

    async def _failure(self, what: str, error: RPCError) -> str:
        if not isinstance(error, ConnectionClosed):
            return f"it answered {what} with an error: {error.message} (code {error.code})"
        with anyio.move_on_after(2):  # its stdout closed as it exited: wait for its status
            await self.child.proc.exited.wait()
        status = (
            "" if self.child.proc.status is None else f" (exit status {self.child.proc.status})"
        )
        return f"the agent process ended during {what}{status}"

    # -- what the agent sends -----------------------------------------------------------
    async def on_request(self, method: str, params: Any) -> Any:
        handler = _HANDLERS.get(method)
        if handler is None:
            raise RPCError(METHOD_NOT_FOUND, f"{method} is not offered by this client")
        if not isinstance(params, dict):
            raise RPCError(INVALID_PARAMS, f"{method} needs its params as an object")
        fields = cast(dict[str, Any], params)
        session, rid = fields.get("sessionId"), fields.get("requestId")
        call = self.calls.get(session) if isinstance(session, str) else None
        if call is None and session is None and isinstance(rid, int):
            call = self.asking.get(rid)  # request scope: it names our session/prompt
        if call is None:
            raise RPCError(INVALID_PARAMS, f"no call of this client has session {shown(session)}")
        return await handler(call, fields)

    async def on_notification(self, method: str, params: Any) -> None:
        fields = as_object(params)
        if method != "session/update" or not isinstance(session := fields.get("sessionId"), str):
            return
        call = self.calls.get(session)
        update = as_object(fields.get("update"))
        if call is not None and update.get("sessionUpdate") == "agent_message_chunk":
            content = as_object(update.get("content"))
            if content.get("type") == "text" and isinstance(text := content.get("text"), str):
                call.add_text(text)


class _Call:
    """One call: its session, the text the agent streamed, the questions it has open, and
    how it answers what the agent asks during it."""

    def __init__(self, ctx: ToolContext, connection: _Connection) -> None:
        self.ctx = ctx
        self.name = connection.name
        self.run = connection.run
        self.cwd = connection.run.agent.cwd
        self.session = ""
        self.ended = False
        self.text: list[str] = []
        self.size = 0
        self.seen: dict[str, int] = {}
        self.scopes: set[anyio.CancelScope] = set()
        self.cancel_sent = anyio.Event()
        self.finished = anyio.Event()

    def add_text(self, text: str) -> None:
        if self.size < _MAX_TEXT:
            self.text.append(text[: _MAX_TEXT - self.size])
        self.size += len(text)

    def answer(self) -> str:
        text = "".join(self.text)
        return text if self.size <= _MAX_TEXT else f"{text} ... [truncated]"

    def end(self) -> None:
        self.ended = True
        for scope in self.scopes:
            scope.cancel()

    def frame(self, method: str, params: dict[str, Any], holder: dict[str, Any]) -> ToolContext:
        """The frame a request of the agent is asked from: on behalf of the agent (and of
        the path it names under itself), keyed by what it sent and how often it sent it."""
        what = {k: v for k, v in params.items() if k not in ("sessionId", "requestId")}
        data = json.dumps([method, what], sort_keys=True, separators=(",", ":"), default=str)
        digest = hashlib.blake2b(data.encode(), digest_size=8).hexdigest()
        n = self.seen[digest] = self.seen.get(digest, -1) + 1
        return self.ctx.on_behalf_of(self.name, *_remote_path(holder), key=f"{digest}.{n}")

    async def asking(self, question: Callable[[], Awaitable[Any]]) -> Any:
        """``question()``'s outcome; None when there is none (it ended unanswered, or the
        call ended first). While the run is cancelled, None comes once ``session/cancel``
        has gone out: ACP's order, the agent then knows why its question was cancelled."""
        answer = None
        if not self.ended:
            with anyio.CancelScope() as scope:
                self.scopes.add(scope)
                try:
                    answer = await question()
                finally:
                    self.scopes.discard(scope)
        if answer is None and self.ctx.cancelling:
            with anyio.move_on_after(_TURN_GRACE):
                await self.cancel_sent.wait()
        return answer

    # -- the agent's requests -----------------------------------------------------------
    async def permission(self, params: dict[str, Any]) -> Any:
        offered = _options(params.get("options"))
        tool_call = as_object(params.get("toolCall"))
        title = tool_call.get("title") or tool_call.get("toolCallId")
        tool_name = bounded(title, 500) if isinstance(title, str) else "tool"
        raw = tool_call.get("rawInput")
        arguments = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
        frame = self.frame("session/request_permission", params, tool_call)
        decision = await self.asking(lambda: self._decide(frame, tool_name, arguments))
        return _selected(offered, decision)

    async def _decide(
        self, frame: ToolContext, tool: str, arguments: dict[str, Any]
    ) -> Decision | None:
        """The human's decision (None: none came): a tool approved for the run is approved
        again without asking (each call of the agent is a new session of it)."""
        key = (frame.agent_path, tool)
        if key in self.run.approved:
            return Approve(scope="run")
        try:
            decision: Decision = await frame.request(PermissionSpec(tool, arguments))
        except QuestionNotAnswered as e:
            return Deny(reason="declined") if e.status == "declined" else None
        if isinstance(decision, Approve) and decision.scope != "once":
            self.run.approved.add(key)
        return decision

    async def elicit(self, params: dict[str, Any]) -> Any:
        if params.get("mode") != "form":
            raise RPCError(INVALID_PARAMS, "this client offers form elicitation only")
        schema, message = params.get("requestedSchema"), params.get("message")
        if not isinstance(schema, dict) or not isinstance(message, str):
            raise RPCError(INVALID_PARAMS, "a form needs a message and a requestedSchema object")
        form = cast(dict[str, Any], schema)
        try:
            spec = CustomQuestion(
                name=ELICITATION, question=message, payload={"agent": self.name}, schema=form
            )
        except UserError as e:
            raise RPCError(INVALID_PARAMS, f"the form cannot be asked: {e}") from None
        frame = self.frame("elicitation/create", params, params)
        return await self.asking(lambda: _fill(frame, spec, form)) or {"action": "cancel"}

    async def read(self, params: dict[str, Any]) -> Any:
        line, limit = _count(params, "line"), _count(params, "limit")
        path = params.get("path")
        return {"content": await anyio.to_thread.run_sync(_read, self.cwd, path, line, limit)}

    async def write(self, params: dict[str, Any]) -> Any:
        content, path = params.get("content"), params.get("path")
        if not isinstance(content, str):
            raise RPCError(INVALID_PARAMS, "fs/write_text_file needs its content as a string")
        await anyio.to_thread.run_sync(_write, self.cwd, path, content)
        return {}


_HANDLERS: dict[str, Callable[[_Call, dict[str, Any]], Awaitable[Any]]] = {
    "session/request_permission": _Call.permission,
    "elicitation/create": _Call.elicit,
    "fs/read_text_file": _Call.read,
    "fs/write_text_file": _Call.write,
}


async def _fill(frame: ToolContext, spec: CustomQuestion, schema: dict[str, Any]) -> Any:
    try:
        answer = await frame.request(spec)
    except QuestionNotAnswered as e:
        return {"action": "decline"} if e.status == "declined" else None
    declared = as_object(schema.get("properties"))
    given = as_object(answer)
    return {"action": "accept", "content": {k: v for k, v in given.items() if k in declared}}


def _selected(offered: list[tuple[str, str]], decision: Decision | None) -> Any:
    """The option standing for ``decision`` (the kind it maps to, else its neighbour)."""
    if decision is None:
        return _CANCELLED
    if isinstance(decision, Approve):
        kinds = ("allow_once", "allow_always")
        if decision.scope != "once":
            kinds = kinds[::-1]
    else:
        kinds = ("reject_once", "reject_always")
    for kind in kinds:
        for option_id, option_kind in offered:
            if option_kind == kind:
                return {"outcome": {"outcome": "selected", "optionId": option_id}}
    return _CANCELLED  # nothing offered says it


def _options(value: Any) -> list[tuple[str, str]]:
    options = [as_object(o) for o in cast(list[Any], value)] if isinstance(value, list) else []
    found = [(o.get("optionId"), o.get("kind")) for o in options]
    usable = [(i, k) for i, k in found if isinstance(i, str) and isinstance(k, str)]
    if not usable:
        raise RPCError(INVALID_PARAMS, "a permission request needs options with ids and kinds")
    return usable


def _result(name: str, stop: Any, text: str) -> str:
    """What the calling model gets of a turn that ended with ``stop``."""
    if stop == "end_turn":
        return text
    if stop in ("refusal", "cancelled"):
        said = f": {bounded(text, 2_000)}" if text else ""
        raise ACPAgentError(f"{name} ended its turn with {stop!r}{said}")
    note = f"(The agent {name} stopped early: {bounded(str(stop), 100)}.)"
    return f"{text}\n\n{note}" if text else note


def _remote_path(holder: dict[str, Any]) -> tuple[str, ...]:
    """The agents an hpd tree names under its root (``_meta.hpd_agent.agent_path``, its
    first name, the remote root, left out); anything else names none."""
    path = as_object(as_object(holder.get("_meta")).get("hpd_agent")).get("agent_path")
    if not isinstance(path, list):
        return ()
    names = cast(list[Any], path)[: _MAX_PATH + 1]
    if not all(isinstance(n, str) and 0 < len(n) <= 200 for n in names):
        return ()
    return tuple(cast(list[str], names[1:]))


def _count(params: dict[str, Any], key: str) -> int | None:
    value = params.get(key)
    if value is None or (type(value) is int and value >= 1):
        return value
    raise RPCError(INVALID_PARAMS, f"{key} must be a positive integer, got {shown(value)}")


def _inside(root: str, path: Any) -> str:
    """``path``'s real path when it is ``root`` or below it (symlinks resolved)."""
    if not isinstance(path, str) or not os.path.isabs(path):
        raise RPCError(INVALID_PARAMS, f"the path must be absolute, got {shown(path)}")
    try:
        real, base = os.path.realpath(path), os.path.realpath(root)
    except (ValueError, OSError) as e:
        raise RPCError(INVALID_PARAMS, f"{shown(path)} is no usable path: {e}") from None
    if os.path.commonpath([real, base]) != base:
        raise RPCError(INVALID_PARAMS, f"{shown(path)} is outside the working directory")
    return real


def _read(root: str, path: Any, line: int | None, limit: int | None) -> str:
    real = _inside(root, path)
    try:
        if os.path.getsize(real) > _MAX_FILE:
            raise RPCError(INVALID_PARAMS, f"{shown(path)} is larger than {_MAX_FILE} bytes")
        with open(real, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise RPCError(NOT_FOUND, f"{shown(path)} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RPCError(INVALID_PARAMS, f"cannot read {shown(path)}: {error_text(e)}") from None
    if line is None and limit is None:
        return text
    first = (line or 1) - 1
    lines = text.splitlines(keepends=True)
    return "".join(lines[first : None if limit is None else first + limit])


def _write(root: str, path: Any, content: str) -> None:
    real = _inside(root, path)
    try:
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "w", encoding="utf-8", newline="") as f:
            f.write(content)
    except (OSError, UnicodeEncodeError) as e:
        raise RPCError(INVALID_PARAMS, f"cannot write {shown(path)}: {error_text(e)}") from None


def _tool_name(name: str) -> str:
    return _NOT_A_NAME.sub("_", name)[:64] or "acp_agent"
