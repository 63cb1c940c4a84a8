"""An ACP agent written with the official Python SDK (``acp`` 0.12.1, ``run_agent`` on stdio),
driven by its prompt: ``python acp_py_agent.py LOG``.

The prompt's text is JSON, ``{"steps": [...]}``; the steps (the TypeScript agent,
``node/agent.mjs``, takes the same ones):

- ``{"say": text}``: an ``agent_message_chunk``;
- ``{"permission": {"title", "rawInput", "path"?, "options"?: [kinds]}}``: a
  ``session/request_permission`` (options ``o-<kind>`` of every kind, or of those given;
  ``path`` goes in ``toolCall._meta.hpd_agent.agent_path``); says ``[permission <outcome>]``;
- ``{"elicit": {"message", "schema", "path"?, "mode"?}}``: an ``elicitation/create`` (form,
  session scope, or ``mode`` as given); says ``[elicit <result as JSON>]`` or the error;
- ``{"read": {"path", "line"?, "limit"?}}`` / ``{"write": {"path", "content"}}``: the file
  requests; say ``[read <content>]`` / ``[wrote]``, or ``[error <code> <message>]``;
- ``{"call": {"method", "params"}}``: any request; says ``[call <result>]`` or the error
  (``params`` gets ``sessionId`` unless it names ``requestId``: the TypeScript agent
  replaces that by the id of the ``session/prompt`` it serves);
- ``{"pid": true}``: says its pid; ``{"env": name}``: says that variable, or ``<unset>``;
  ``{"exit": n}``: exits at once with status n;
- ``{"wait_cancel": true}``: waits for ``session/cancel`` of its session, then ends the
  turn ``cancelled``; ``{"stop": reason}``: ends the turn with that stop reason.

Everything it receives is logged, one line each, to LOG: ``initialize <params>``,
``session/new <cwd>``, ``cancel <session>``, ``permission <outcome>``, ``elicit <result>``;
and each message as it arrives, to LOG.wire: its method, or ``response``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    update_agent_message_text,
)
from acp.schema import (
    AgentCapabilities,
    ElicitationFormSessionMode,
    ElicitationUrlSessionMode,
    Implementation,
    PermissionOption,
    ToolCallUpdate,
)

KINDS = ["allow_once", "allow_always", "reject_once", "reject_always"]


class ScriptAgent:
    def __init__(self, log: str) -> None:
        self.log_path = log
        self.conn: Any = None
        self.sessions = 0
        self.cancelled: dict[str, asyncio.Event] = {}

    def log(self, line: str) -> None:
        with open(self.log_path, "a") as f:
            f.write(line + "\n")

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = kwargs.get("client_capabilities")
        dumped = caps.model_dump(by_alias=True, exclude_none=True) if caps else None
        self.log(f"initialize {json.dumps({'protocolVersion': protocol_version, 'caps': dumped})}")
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="py-agent", version="1"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self.sessions += 1
        sid = f"py-{os.getpid()}-{self.sessions}"
        self.cancelled[sid] = asyncio.Event()
        self.log(f"session/new {cwd}")
        return NewSessionResponse(session_id=sid)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.log(f"cancel {session_id}")
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def say(self, sid: str, text: str) -> None:
        await self.conn.session_update(session_id=sid, update=update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        steps = json.loads(prompt[0].text)["steps"]
        for step in steps:
            stop = await self.step(session_id, step)
            if stop is not None:
                return PromptResponse(stop_reason=stop)
        return PromptResponse(stop_reason="end_turn")

    async def step(self, sid: str, step: dict[str, Any]) -> str | None:
        if "say" in step:
            await self.say(sid, step["say"])
        elif "permission" in step:
            await self.permission(sid, step["permission"])
        elif "elicit" in step:
            await self.elicit(sid, step["elicit"])
        elif "read" in step or "write" in step:
            await self.files(sid, step)
        elif "call" in step:
            await self.call(sid, step["call"])
        elif "pid" in step:
            await self.say(sid, str(os.getpid()))
        elif "env" in step:
            await self.say(sid, os.environ.get(step["env"], "<unset>"))
        elif "exit" in step:
            os._exit(step["exit"])
        elif "wait_cancel" in step:
            await self.cancelled[sid].wait()
            return "cancelled"
        elif "stop" in step:
            return step["stop"]
        return None

    async def permission(self, sid: str, p: dict[str, Any]) -> None:
        meta = {"hpd_agent": {"agent_path": p["path"]}} if "path" in p else None
        tool_call = ToolCallUpdate(
            tool_call_id="call-1",
            title=p.get("title"),
            raw_input=p.get("rawInput"),
            field_meta=meta,
        )
        options = [
            PermissionOption(option_id=f"o-{k}", name=k, kind=k) for k in p.get("options", KINDS)
        ]
        got = await self.conn.request_permission(
            session_id=sid, tool_call=tool_call, options=options
        )
        outcome = got.outcome
        said = outcome.option_id if outcome.outcome == "selected" else "cancelled"
        self.log(f"permission {said}")
        await self.say(sid, f"[permission {said}]")

    async def elicit(self, sid: str, e: dict[str, Any]) -> None:
        meta = {"hpd_agent": {"agent_path": e["path"]}} if "path" in e else None
        if e.get("mode") == "url":
            mode: Any = ElicitationUrlSessionMode(
                session_id=sid, elicitation_id="u1", url="https://example.com/x"
            )
        else:
            mode = ElicitationFormSessionMode(session_id=sid, requested_schema=e["schema"])
        try:
            # Its keyword arguments are the request's _meta.
            got = await self.conn.create_elicitation(
                message=e["message"], mode=mode, **(meta or {})
            )
        except RequestError as err:
            said = f"error {err.code}"
        else:
            said = json.dumps(got.model_dump(by_alias=True, exclude_none=True), sort_keys=True)
        self.log(f"elicit {said}")
        await self.say(sid, f"[elicit {said}]")

    async def call(self, sid: str, c: dict[str, Any]) -> None:
        params = c["params"] if "requestId" in c["params"] else {"sessionId": sid, **c["params"]}
        try:
            got = await self.conn._conn.send_request(c["method"], params)
        except RequestError as err:
            said = f"[error {err.code} {err}]"
        else:
            said = f"[call {json.dumps(got, sort_keys=True)}]"
        await self.say(sid, said)

    async def files(self, sid: str, step: dict[str, Any]) -> None:
        try:
            if "read" in step:
                r = step["read"]
                got = await self.conn.read_text_file(
                    session_id=sid, path=r["path"], line=r.get("line"), limit=r.get("limit")
                )
                said = f"[read {got.content}]"
            else:
                w = step["write"]
                await self.conn.write_text_file(
                    session_id=sid, path=w["path"], content=w["content"]
                )
                said = "[wrote]"
        except RequestError as err:
            said = f"[error {err.code} {err}]"
        await self.say(sid, said)


def arrival(log: str) -> Any:
    """Logs each incoming message as the connection reads it, in the order it came."""

    def observe(event: Any) -> None:
        if event.direction.value == "incoming":
            with open(log + ".wire", "a") as f:
                f.write(event.message.get("method", "response") + "\n")

    return observe


async def main() -> None:
    await run_agent(ScriptAgent(sys.argv[1]), observers=[arrival(sys.argv[1])])


if __name__ == "__main__":
    asyncio.run(main())
