"""The questions of a served turn (``_server``), each asked of the ACP client, and what that
client said of itself in ``initialize`` (``Client``).

A permission is a ``session/request_permission`` on the asking tool call; any other question
an ``elicitation/create`` form (``hosting.form_for``) to a client that declared forms, else
permission options when its answers are a few (``hosting.choices_of``), else it ends
unanswered. The reply is given to the run as the client's answer: its ``answered_by`` is the
client's name (the turn's, ``HostedRun.answered_by``), its channel ``acp``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..events import ClarificationRequest, PermissionRequest, format_path
from ..hosting import PERMISSION_OPTIONS, HostedRun, choices_of, decision_of, form_for
from ..permissions import Deny
from ..questions import Decline
from ..text import bounded
from ._rpc import ConnectionClosed, Peer, RPCError, as_object

__all__ = ["CHANNEL", "EDITOR", "Client", "Questions", "call_id_of", "meta", "title"]

CHANNEL = "acp"
"""The channel the client's answers are recorded on."""

EDITOR = "the editor"
"""Who a denial is by (``Deny.reason``: "denied by the editor")."""

_MAX_NAME = 200
"""The longest client name kept with each answer (it is the other side's to choose)."""

_log = logging.getLogger("hpd_agent.acp")


@dataclass(frozen=True)
class Client:
    """What the client said of itself in ``initialize``, kept for the connection.

    Attributes:
        forms: It declared ``clientCapabilities.elicitation.form``: questions that are not
            permissions are asked as forms.
        name: Who its answers are recorded as given by (``answered_by``): its
            ``clientInfo.name``, else ``CHANNEL``.
    """

    forms: bool = False
    name: str = CHANNEL

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Client:
        """The client of an ``initialize`` request's params."""
        caps = as_object(params.get("clientCapabilities"))
        form = as_object(caps.get("elicitation")).get("form")  # present and not null
        name = as_object(params.get("clientInfo")).get("name")
        if not isinstance(name, str) or not name.strip():
            name = CHANNEL
        return cls(isinstance(form, dict), bounded(name, _MAX_NAME))


def call_id_of(invocation_id: str, tool_call_id: str) -> str:
    """A tool call's id for the client: unique in the session (each agent call of each run has
    its own invocation id, its tool call ids are unique) and the same when a run replays."""
    return f"{invocation_id}/{tool_call_id}"


def meta(path: Sequence[str], **more: Any) -> dict[str, Any]:
    """The ``_meta`` of an update or a question: the agent path, for programs."""
    return {"hpd_agent": {"agent_path": list(path), **more}}


def title(path: Sequence[str], what: str) -> str:
    """What editors show: ``A > B: what``."""
    return f"{format_path(path)}: {what}"


class Questions:
    """One question of a turn asked of the client, and its reply given to the run."""

    def __init__(self, peer: Peer, session_id: str, hosted: HostedRun, client: Client) -> None:
        self.peer = peer
        self.session_id = session_id
        self.hosted = hosted
        self.client = client

    async def ask(self, request: ClarificationRequest | PermissionRequest, scope: Any) -> None:
        """Ask ``request`` until it is answered or ends (``scope`` is cancelled then)."""
        with scope:
            try:
                if isinstance(request, PermissionRequest):
                    await self._permission(request)
                elif self.client.forms:
                    await self._form(request)
                else:
                    await self._fallback(request)
            except ConnectionClosed:
                return  # nobody to ask any more: the run stops with the connection
            except RPCError as e:  # the client could not ask it: it ends unanswered
                _log.warning("acp: the client failed a question: %s", e.message)
                await self.hosted.cancel_request(request.request_id)

    def _tool_call(self, request: ClarificationRequest | PermissionRequest) -> str:
        if request.tool_call_id is None:
            return request.request_id
        return call_id_of(request.invocation_id, request.tool_call_id)

    async def _pick(
        self, request: ClarificationRequest | PermissionRequest, call: dict[str, Any], options: Any
    ) -> str | None:
        """A ``session/request_permission`` on the request's tool call: the option selected
        (``""`` for a malformed reply), None when it was dismissed."""
        call = {"toolCallId": self._tool_call(request), **call}
        params = {"sessionId": self.session_id, "toolCall": call, "options": list(options)}
        outcome = as_object(await self.peer.request("session/request_permission", params))
        picked = as_object(outcome.get("outcome"))
        if picked.get("outcome") != "selected":
            return None
        option = picked.get("optionId")
        return option if isinstance(option, str) else ""

    async def _permission(self, request: PermissionRequest) -> None:
        call = {
            "title": title(request.agent_path, request.tool_name),
            "rawInput": request.arguments,
            "_meta": meta(request.agent_path, tool_name=request.tool_name),
        }
        options = (
            {"optionId": o.id, "name": o.label, "kind": o.acp_kind} for o in PERMISSION_OPTIONS
        )
        picked = await self._pick(request, call, options)
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
            {
                "optionId": str(i),
                "name": name,
                "kind": "reject_once" if a is False else "allow_once",
            }
            for i, (name, a) in enumerate(choices)
        )
        picked = await self._pick(request, call, options)
        index = int(picked) if picked is not None and picked.isdigit() else -1
        if not 0 <= index < len(choices):
            await self.hosted.cancel_request(request.request_id)  # dismissed
            return
        answer = choices[index][1]
        await self.hosted.answer_request(request.request_id, lambda: answer)
