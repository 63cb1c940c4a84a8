"""The ACP server: an agent tree served to a code editor over stdio (``serve_stdio``).

Each ACP session is a conversation (``hosting.RunHost``), each ``session/prompt`` a turn
whose events go out as they come: the root agent's text as ``agent_message_chunk``, every
tool call of the tree as a ``tool_call`` titled ``A > B: tool`` and its ``tool_call_update``.
Each question goes out as soon as it is asked (``Questions``; a permission's reply is given
as it is read, with no task waiting for it); the client's reply is its answer, given by its ``clientInfo.name`` on
channel ``acp``. With a store each session is kept in its thread tables (space ``acp``), and
a turn a stopped server left running is resumed by the session's next prompt.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.abc

from ..agent import Agent
from ..events import (
    ClarificationRequest,
    ClarificationResolved,
    Event,
    PermissionRequest,
    PermissionResolved,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..hosting import (
    PERMISSION_OPTIONS,
    HostedRun,
    Outcome,
    RunHost,
    UnknownRunError,
    choices_of,
    decision_of,
    form_for,
    outcome_of,
    protocol_stdio,
)
from ..permissions import Deny
from ..questions import Decline
from ..run import Run
from ..store import Store, ThreadData, ThreadTables, open_store
from ..version import __version__
from . import _rpc as rpc
from ._rpc import (
    CHANNEL,
    EDITOR,
    Client,
    ConnectionClosed,
    Peer,
    RPCError,
    as_object,
    call_id_of,
    meta,
    prompt_text,
    title,
)

__all__ = ["SPACE", "serve_stdio", "serve_streams"]

SPACE = "acp"
"""The sessions' thread-table space: a thread per session, rows ``session`` (its cwd) and
run id → the turn's status, an item per prompt and answer (what ``session/load`` replays)."""

PROTOCOL_VERSION = 1

_log = logging.getLogger("hpd_agent.acp")


async def serve_stdio(agent: Agent, *, store: Store | str | None = None) -> None:
    """Serve ``agent`` to an ACP client (a code editor) on this process's stdin and stdout;
    return once stdin ends (turns still running stop; with a store, their session's next
    prompt resumes them). Meanwhile descriptor 1 and ``sys.stdout`` are stderr: only
    protocol messages reach stdout.

    Args:
        agent: The served agent (its tree's questions and permissions reach the editor).
        store: A ``Store``, a SQLite path or a ``postgresql://`` DSN: runs are journaled and
            sessions kept there (``session/load``), so they survive a restart.

    Raises:
        StoreUnavailableError: ``store`` names a store that cannot be opened.
    """
    with protocol_stdio() as (receive, send):
        await serve_streams(agent, receive, send, store=store)


async def serve_streams(
    agent: Agent,
    receive: anyio.abc.ByteReceiveStream,
    send: anyio.abc.ByteSendStream,
    *,
    store: Store | str | None = None,
) -> None:
    """``serve_stdio`` on a pair of byte streams (a socket, a test's pipe)."""
    opened = open_store(store) if isinstance(store, str) else None
    served = opened if opened is not None else cast(Store | None, store)
    try:
        tables = None if served is None else served.capabilities().threads
        async with anyio.create_task_group() as tg:
            server = _Server(agent, served, tg, _Book(tables), (receive, send))
            await server.peer.serve()
            tg.cancel_scope.cancel()  # the turns still running stop (a store keeps them)
    finally:
        if opened is not None:
            with anyio.CancelScope(shield=True):
                await opened.aclose()


# -- sessions ---------------------------------------------------------------------------------
@dataclass(eq=False)
class _Session:
    """One ACP session on this connection."""

    id: str
    cwd: str
    items: int = 0  # items written to its thread: the next one's index
    busy: bool = False  # a session/prompt is being answered
    cancelled: bool = False  # session/cancel came meanwhile
    stored: bool = False  # opened from the store: a turn may have been left running
    turn: HostedRun | None = None

    @property
    def conversation(self) -> str:
        return f"acp:{self.id}"


class _Book:
    """Where sessions are kept: the store's thread tables (space ``SPACE``), or nowhere."""

    def __init__(self, tables: ThreadTables | None) -> None:
        self.tables = tables

    async def opened(self, session: _Session) -> None:
        if self.tables is not None:
            row = json.dumps({"cwd": session.cwd})
            await self.tables.write_thread(SPACE, session.id, rows={"session": row})

    async def read(self, session_id: str) -> ThreadData | None:
        thread = None if self.tables is None else await self.tables.read_thread(SPACE, session_id)
        return thread if thread is not None and "session" in thread.rows else None

    async def began(self, session: _Session, run_id: str, prompt: str) -> None:
        row = {"status": "running", "prompt": prompt}
        await self._write(session, run_id, row, [{"role": "user", "text": prompt}])

    async def ended(self, session: _Session, run_id: str, outcome: Outcome) -> None:
        answer = outcome.output if outcome.status == "completed" else None
        items = [{"role": "agent", "text": answer}] if answer else []
        await self._write(session, run_id, {"status": outcome.status}, items)

    async def unfinished(self, session: _Session) -> str | None:
        """The session's last turn if it is still marked running (its server stopped)."""
        thread = await self.read(session.id)
        runs = [(k, v) for k, v in (thread.rows.items() if thread else ()) if k != "session"]
        if not runs:
            return None
        run_id, value = runs[-1]
        return run_id if _loads(value).get("status") == "running" else None

    async def _write(
        self, session: _Session, run_id: str, row: dict[str, str], items: list[dict[str, str]]
    ) -> None:
        if self.tables is None:
            return
        rows, texts = {run_id: json.dumps(row)}, [json.dumps(item) for item in items]
        with anyio.CancelScope(shield=True):  # written as the server stops: a restart knows
            await self.tables.write_thread(
                SPACE, session.id, rows=rows, items=texts, first=session.items
            )
        session.items += len(items)


def _loads(text: str) -> dict[str, Any]:
    with contextlib.suppress(ValueError):
        return as_object(json.loads(text))
    return {}


# -- the server -------------------------------------------------------------------------------
class _Server:
    """Answers one connection's requests (``Peer``'s handler)."""

    def __init__(
        self,
        agent: Agent,
        store: Store | None,
        tg: anyio.abc.TaskGroup,
        book: _Book,
        streams: tuple[anyio.abc.ByteReceiveStream, anyio.abc.ByteSendStream],
    ) -> None:
        self.agent = agent
        self.tg = tg
        self.host: RunHost[_Turn] = RunHost(agent, store, tg, lambda run: _Turn(run, self))
        self.book = book
        self.sessions: dict[str, _Session] = {}
        self.client = Client()
        """What the client said of itself (``initialize``): forms, its name."""
        self.peer = Peer(*streams, on_request=self.handle, on_notification=self.notified)
        self._methods: dict[str, Callable[[dict[str, Any]], Any]] = {
            "initialize": self._initialize,
            "session/new": self._new,
            "session/load": self._load,
            "session/prompt": self._prompt,
        }

    async def handle(self, method: str, params: Any) -> Any:
        """Answer one request."""
        handler = self._methods.get(method)
        if method == "authenticate":
            return {}  # no methods are offered: there is nothing to do
        if handler is None:
            raise RPCError(rpc.METHOD_NOT_FOUND, f"method not found: {method}")
        if not isinstance(params, dict):
            raise RPCError(rpc.INVALID_PARAMS, f"{method}: params must be an object")
        return await handler(cast(dict[str, Any], params))

    async def notified(self, method: str, params: Any) -> None:
        """Take one notification: ``session/cancel``."""
        if method != "session/cancel":
            return
        session = self.sessions.get(str(as_object(params).get("sessionId")))
        if session is not None and session.busy:
            session.cancelled = True
            if session.turn is not None:
                session.turn.cancel_nowait("the editor cancelled the turn")

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.client = Client.of(params)
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": self.book.tables is not None,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            },
            "authMethods": [],
            "agentInfo": {"name": self.agent.name, "version": __version__},
        }

    async def _new(self, params: dict[str, Any]) -> dict[str, Any]:
        session = _Session(id=f"sess_{uuid.uuid4().hex}", cwd=_cwd(params))
        await self.book.opened(session)
        self.sessions[session.id] = session
        return {"sessionId": session.id}

    async def _load(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.book.tables is None:
            raise RPCError(rpc.INVALID_REQUEST, "session/load needs a store: serve with --store")
        session_id, cwd = _session_id(params), _cwd(params)
        thread = await self.book.read(session_id)
        if thread is None:
            raise RPCError(rpc.NOT_FOUND, f"no session {session_id!r} in the store")
        session = self.sessions.get(session_id)
        if session is None:
            session = _Session(session_id, cwd, len(thread.items), stored=True)
            self.sessions[session_id] = session
        session.cwd = cwd
        await self.book.opened(session)
        for item in thread.items:
            said = _loads(item)
            kind = "user_message_chunk" if said.get("role") == "user" else "agent_message_chunk"
            text = said.get("text")
            if isinstance(text, str):
                await self.update(session.id, _chunk(kind, text))
        return {}

    async def _session(self, params: dict[str, Any]) -> _Session:
        session_id = _session_id(params)
        session = self.sessions.get(session_id)
        if session is None:  # a session of the store, prompted without session/load
            thread = await self.book.read(session_id)
            if thread is not None:
                cwd = _loads(thread.rows["session"]).get("cwd")
                session = _Session(session_id, str(cwd), len(thread.items), stored=True)
                self.sessions[session_id] = session
        if session is None:
            raise RPCError(rpc.NOT_FOUND, f"no session {session_id!r}")
        return session

    async def _prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        session = await self._session(params)
        text = prompt_text(params.get("prompt"))
        if session.busy:
            raise RPCError(rpc.INVALID_REQUEST, "this session's turn is still running")
        session.busy, session.cancelled = True, False
        try:
            stop, left = "end_turn", None
            if session.stored:  # once: any turn this connection starts, it sees end
                session.stored, left = False, await self.book.unfinished(session)
            if left is not None and self.host.live(left) is None:
                stop = await self._resume(session, left)
            if not session.cancelled:
                stop = await self._turn(session, text)
            return {"stopReason": stop}
        finally:
            session.busy = False

    async def _turn(self, session: _Session, text: str) -> str:
        run_id = f"run_{uuid.uuid4().hex}"
        await self.book.began(session, run_id, text)
        conversation, driving = session.conversation, functools.partial(self._driving, session)
        hosted = self.host.run_here(text, conversation=conversation, run_id=run_id, started=driving)
        return _stop_reason(await self._drive(session, hosted))

    @staticmethod
    def _driving(session: _Session, hosted: HostedRun) -> None:
        """``hosted`` is ``session``'s turn now: ``session/cancel`` cancels it."""
        session.turn = hosted
        if session.cancelled:
            hosted.cancel_nowait("the editor cancelled the turn")

    async def _resume(self, session: _Session, run_id: str) -> str:
        """The turn a stopped server left running, resumed from the store and driven to its
        end; a failure is told as a message (the prompt's own content runs next)."""
        try:
            found = await self.host.reopen(run_id, conversation=session.conversation)
        except UnknownRunError:
            found = None
        if not isinstance(found, HostedRun):
            ended = outcome_of(found) if found is not None else Outcome("failed")
            await self.book.ended(session, run_id, ended)
            return "end_turn"
        outcome = await self._drive(session, found)
        if outcome.status == "failed" and outcome.error_type != "MaxTurnsExceededError":
            note = f"(The interrupted turn failed: {outcome.error or 'it stopped'})"
            await self.update(session.id, _chunk("agent_message_chunk", note))
            return "end_turn"
        return _stop_reason(outcome)

    async def _drive(self, session: _Session, turn: HostedRun | Awaitable[HostedRun]) -> Outcome:
        """Wait for the turn to end: resumed (a ``HostedRun``) or driven here (``run_here``,
        awaited). Its updates are sent as its events come (``_Turn``)."""
        try:
            if isinstance(turn, HostedRun):
                self._driving(session, turn)
                await turn.ended.wait()
            else:
                turn = await turn
        finally:
            session.turn = None
        await self.book.ended(session, turn.run_id, turn.outcome)
        return turn.outcome

    async def update(self, session_id: str, update: dict[str, Any]) -> None:
        """Send one ``session/update``; dropped once the editor has stopped reading (the turn
        goes on until the read side ends the server: a stopped turn stays resumable)."""
        sent = self.peer.notify_soon("session/update", {"sessionId": session_id, "update": update})
        if sent is not None:
            await sent


class _Turn(HostedRun):
    """A session's turn: the run, and the sink its host drives it with (each update sent as
    it comes; each question asked as it comes, withdrawn when it ends otherwise: a
    permission with no task waiting for its reply, a form in a task of the server's)."""

    def __init__(self, run: Run, server: _Server) -> None:
        # the editor's answers, by the name it gave when this turn began
        super().__init__(run, channel=CHANNEL, answered_by=server.client.name)
        self.server = server
        self._asking: dict[str, Callable[[], Awaitable[None] | None]] = {}
        self._running: dict[str, None] = {}

    @property
    def session_id(self) -> str:
        return (self.conversation or "").removeprefix("acp:")

    def take(self, event: Event) -> Awaitable[None] | None:
        """One event: its update sent, its question asked (nobody reads ``events()``)."""
        update = _update_of(event, self._running)
        if update is not None:  # written at once, unless another write is in progress
            params = {"sessionId": self.session_id, "update": update}
            return self.server.peer.notify_soon("session/update", params)
        if isinstance(event, ClarificationRequest | PermissionRequest):
            granted = isinstance(event, PermissionRequest) and event.grant_id is not None
            if not granted and any(r.request_id == event.request_id for r in self.run.pending):
                server = self.server
                questions = Questions(server.peer, self.session_id, self, server.client)
                if isinstance(event, PermissionRequest):  # no task: its reply answers it
                    self._asking[event.request_id], writing = questions.permission(event)
                    return writing
                scope = anyio.CancelScope()  # a form may be asked again: a task of its own
                self._asking[event.request_id] = scope.cancel
                server.tg.start_soon(questions.ask, event, scope)
        elif isinstance(event, ClarificationResolved | PermissionResolved):
            withdraw = self._asking.pop(event.request_id, None)
            if withdraw is not None and event.channel != CHANNEL:  # the client's reply ends it
                return withdraw()  # ended otherwise: the client's reply reaches nobody
        return None

    async def close(self, outcome: Outcome, raised: Exception | None) -> None:
        await super().close(outcome, raised)
        for withdraw in self._asking.values():
            writing = withdraw()
            if writing is not None:
                await writing
        for call_id in self._running:  # cut short (the turn was cancelled): said so
            await self.server.update(self.session_id, _call_update(call_id, "failed"))


# -- the turn's events as session updates -----------------------------------------------------
def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _call_update(call_id: str, status: str) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}


def _update_of(event: Event, running: dict[str, None]) -> dict[str, Any] | None:
    """The ``session/update`` an event is, if any; ``running`` tracks the open tool calls."""
    if isinstance(event, TextDelta):
        return _chunk("agent_message_chunk", event.text) if event.depth == 0 else None
    if isinstance(event, ToolCallStarted):
        call_id = call_id_of(event.invocation_id, event.tool_call_id)
        running[call_id] = None
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": title(event.agent_path, event.tool_name),
            "status": "in_progress",
            "rawInput": event.arguments,
            "_meta": meta(event.agent_path, tool_name=event.tool_name),
        }
    if isinstance(event, ToolCallFinished):
        call_id = call_id_of(event.invocation_id, event.tool_call_id)
        running.pop(call_id, None)
        update = _call_update(call_id, "failed" if event.is_error else "completed")
        update["content"] = [{"type": "content", "content": {"type": "text", "text": event.result}}]
        return update
    return None


def _stop_reason(outcome: Outcome) -> str:
    if outcome.status == "cancelled":
        return "cancelled"
    if outcome.status == "failed":
        if outcome.error_type == "MaxTurnsExceededError":
            return "max_turn_requests"
        raise RPCError(rpc.INTERNAL_ERROR, f"the run failed: {outcome.error or 'it stopped'}")
    return "end_turn"


# -- params -----------------------------------------------------------------------------------
def _session_id(params: dict[str, Any]) -> str:
    session_id = params.get("sessionId")
    if not isinstance(session_id, str):
        raise RPCError(rpc.INVALID_PARAMS, "sessionId must be a string")
    return session_id


def _cwd(params: dict[str, Any]) -> str:
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise RPCError(rpc.INVALID_PARAMS, "cwd must be an absolute path")
    return cwd


_Asked = ClarificationRequest | PermissionRequest
_OPTIONS = [{"optionId": o.id, "name": o.label, "kind": o.acp_kind} for o in PERMISSION_OPTIONS]


class Questions:
    """One question of a turn asked of the client, and its reply given to the run."""

    def __init__(self, peer: Peer, session_id: str, hosted: HostedRun, client: Client) -> None:
        self.peer = peer
        self.session_id = session_id
        self.hosted = hosted
        self.client = client

    def permission(
        self, request: PermissionRequest
    ) -> tuple[Callable[[], Awaitable[None] | None], Awaitable[None] | None]:
        """A permission asked now (``Peer.request_then``), its reply given to the run as
        read: what withdraws it, and what writes it if it was not written at once."""
        path, tool = request.agent_path, request.tool_name
        call = {"title": title(path, tool), "rawInput": request.arguments}
        call["_meta"] = meta(path, tool_name=tool)
        params = self._params(request, call, _OPTIONS)
        given = functools.partial(self._permitted, request)
        failed = functools.partial(self._failed, request)
        return self.peer.request_then("session/request_permission", params, given, failed)

    async def _failed(self, request: _Asked, error: RPCError) -> None:
        _log.warning("acp: the client failed a question: %s", error.message)
        await self.hosted.cancel_request(request.request_id)  # it ends unanswered

    async def ask(self, request: ClarificationRequest, scope: anyio.CancelScope) -> None:
        """Ask ``request`` as a form (or as permission options) until answered or ended
        (``scope``)."""
        with scope:
            try:
                if self.client.forms:
                    await self._form(request)
                else:
                    await self._fallback(request)
            except ConnectionClosed:
                return  # nobody to ask any more: the run stops with the connection
            except RPCError as e:  # the client could not ask it
                await self._failed(request, e)

    def _tool_call(self, request: _Asked) -> str:
        if request.tool_call_id is None:
            return request.request_id
        return call_id_of(request.invocation_id, request.tool_call_id)

    def _params(self, request: _Asked, call: dict[str, Any], options: Any) -> dict[str, Any]:
        call = {"toolCallId": self._tool_call(request), **call}
        return {"sessionId": self.session_id, "toolCall": call, "options": list(options)}

    async def _permitted(self, request: PermissionRequest, reply: Any) -> None:
        picked = _picked(reply)
        answer: Any = Decline() if picked is None else decision_of(picked, by=EDITOR)
        if answer is None:
            answer = Deny(reason=f"{EDITOR} picked an option that was not offered")
        await self.hosted.answer_request(request.request_id, lambda: answer)

    async def _form(self, request: ClarificationRequest) -> None:
        note: str | None = None
        while True:
            form = form_for(request, note, by=EDITOR)
            params: dict[str, Any] = {
                "sessionId": self.session_id,
                "mode": "form",
                "message": form.message,
                "requestedSchema": form.schema,
                "_meta": meta(request.agent_path),
            }
            if request.tool_call_id is not None:
                params["toolCallId"] = self._tool_call(request)
            reply = as_object(await self.peer.request("elicitation/create", params))
            action = reply.get("action")
            if action == "accept":
                content = reply.get("content")
                taken = cast(Mapping[str, Any], content) if isinstance(content, dict) else None
                note = await self.hosted.answer_request(
                    request.request_id, functools.partial(form.read, taken)
                )
                if note is None:
                    return
            elif action == "decline":
                await self.hosted.answer_request(request.request_id, Decline)
                return
            else:  # dismissed: this question ends, the turn goes on
                await self.hosted.cancel_request(request.request_id)
                return

    async def _fallback(self, request: ClarificationRequest) -> None:
        """A client without forms: a finite answer picked as a permission option."""
        choices = choices_of(request)
        if choices is None:
            await self.hosted.cancel_request(request.request_id)  # it cannot be asked
            return
        call = {"title": form_for(request, by=EDITOR).message, "_meta": meta(request.agent_path)}
        options = (
            {"optionId": str(i), "name": n, "kind": "reject_once" if a is False else "allow_once"}
            for i, (n, a) in enumerate(choices)
        )
        params = self._params(request, call, options)
        picked = _picked(await self.peer.request("session/request_permission", params))
        index = int(picked) if picked is not None and picked.isdigit() else -1
        if not 0 <= index < len(choices):
            await self.hosted.cancel_request(request.request_id)  # dismissed
            return
        answer = choices[index][1]
        await self.hosted.answer_request(request.request_id, lambda: answer)


def _picked(reply: Any) -> str | None:
    """The option a permission reply selected (``""``: malformed); None: dismissed."""
    picked = as_object(as_object(reply).get("outcome"))
    if picked.get("outcome") != "selected":
        return None
    option = picked.get("optionId")
    return option if isinstance(option, str) else ""
