"""A tiny protocol adapter over ``hpd_agent.hosting``, written with public names only: what
the next adapter (ACP, a chat bridge...) starts from.

The protocol: one JSON object per line, both ways.

- client → server: ``{"prompt": ..., "conversation": ...}`` starts the conversation's next
  turn; ``{"answer": request_id, "content": {...}}`` answers a question with a form's
  content; ``{"cancel": conversation}`` cancels the conversation's turn.
- server → client: ``{"text": ...}`` the root agent's text as it streams;
  ``{"question": request_id, "message": ..., "schema": {...}}`` a question (a permission
  too) as a form, sent as soon as it is asked; ``{"refused": ..., "question": request_id}``
  an answer that was not taken (the question stays open); ``{"busy": conversation}`` a
  prompt while its turn runs; ``{"end": status, "output": ..., "error": ...}`` how the turn
  ended.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream, TaskGroup

from hpd_agent import Agent, ConversationBusyError, RequestEvent, TextDelta
from hpd_agent.hosting import Form, HostedRun, RunHost, form_for


class LineServer:
    """Serves ``agent`` to one client over a pair of line streams."""

    def __init__(self, agent: Agent, send: ObjectSendStream[str]) -> None:
        self.agent = agent
        self._send = send
        self._asked: dict[str, tuple[HostedRun, Form]] = {}

    async def serve(self, receive: ObjectReceiveStream[str]) -> None:
        """Take the client's lines until it closes its stream; its runs end with it."""
        async with anyio.create_task_group() as tg:
            host = RunHost(self.agent, None, tg, HostedRun)
            async for line in receive:
                message: dict[str, Any] = json.loads(line)
                if "prompt" in message:
                    await self._prompt(host, tg, message["prompt"], message["conversation"])
                elif "answer" in message:
                    await self._answer(message["answer"], message.get("content"))
                elif "cancel" in message:
                    turn = host.turn(message["cancel"])
                    if turn is not None:
                        await turn.cancel("the client cancelled the turn")
            tg.cancel_scope.cancel()

    async def _prompt(self, host: RunHost, tg: TaskGroup, prompt: str, conversation: str) -> None:
        try:
            hosted = await host.start(prompt, conversation=conversation)
        except ConversationBusyError:
            await self._say(busy=conversation)
            return
        tg.start_soon(self._follow, hosted)

    async def _follow(self, hosted: HostedRun) -> None:
        async for event in hosted.events():
            if isinstance(event, TextDelta) and event.depth == 0:
                await self._say(text=event.text)
            elif isinstance(event, RequestEvent) and not event.replayed:
                await self._ask(hosted, form_for(event, by="the line client"))
        outcome = hosted.outcome
        await self._say(end=outcome.status, output=outcome.output, error=outcome.error)

    async def _ask(self, hosted: HostedRun, form: Form) -> None:
        self._asked[form.request_id] = (hosted, form)
        await self._say(question=form.request_id, message=form.message, schema=form.schema)

    async def _answer(self, request_id: str, content: Any) -> None:
        hosted, form = self._asked.pop(request_id)
        note = await hosted.answer_request(request_id, lambda: form.read(content))
        if note is not None:
            self._asked[request_id] = (hosted, form)
            await self._say(refused=note, question=request_id)

    async def _say(self, **fields: Any) -> None:
        await self._send.send(json.dumps(fields))
