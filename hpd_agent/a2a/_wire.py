"""What the client reads off the A2A wire and writes onto it (pure functions, no I/O).

Reading: a task status that waits for input becomes ``RemoteQuestion``s (``questions_of``):
the status message's text and metadata, or the metadata's ``"requests"`` list when the
remote has several questions pending (hpd_agent's own server does); a status that waits for
authentication becomes an action question on the URL it names. Everything read is
untrusted: a field of the wrong type or size is dropped, never raised on. The remote's
``request_id`` is the exception: it is kept verbatim, since the answer must name it exactly
(one longer than ``MAX_REQUEST_ID`` is refused by the caller, not cut); what is derived
from it here (``RemoteQuestion.key``) stays bounded.

Writing: the query and each answer as a user message in the remote's task and context; an
answer of text is a text part, any other answer (a bool, a list of options, JSON) one data
part; the remote's ``request_id`` goes back in the message's metadata.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Artifact, Message, Part, Role, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from ..questions import QUESTION_KINDS
from ..text import bounded, mend

__all__ = [
    "INTERRUPTED",
    "MAX_REQUEST_ID",
    "TERMINAL",
    "RemoteQuestion",
    "answer_message",
    "artifacts_text",
    "message_id",
    "message_text",
    "query_message",
    "questions_of",
    "state_name",
    "struct_dict",
]

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_CANCELED,
    }
)
INTERRUPTED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})

_MAX_QUESTION = 8_000
_MAX_OPTION = 500
_MAX_OPTIONS = 100
_MAX_NAME = 100
_MAX_PATH = 16
_MAX_KEY = 200
MAX_REQUEST_ID = 4_000
"""Longest remote request id carried back in an answer; a question with a longer one is
refused (an id cut short would never be recognised: the question would be asked again)."""
_MAX_REQUESTS = 100
_URL = re.compile(r"https?://[^\s<>\"')\]]+")
_DETAILS = ("url", "label", "multiple", "argument", "name", "payload", "context")
"""Keys of a question's metadata besides the issue's (kind-specific details, optional): the
flattened ones older servers send; a newer one nests the kind's details under ``data``."""
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
_MAX_LABEL = 200


@dataclass(frozen=True, slots=True)
class RemoteQuestion:
    """One question the remote task waits for.

    Attributes:
        key: Names the question stably and distinctly (``key_of`` the remote's request id,
            else a key ``derived_key`` makes from its status message's id): the relayed
            request's id derives from it.
        request_id: The remote's own id for it, verbatim, echoed in the answer's metadata;
            None when the remote gave none.
        status_id: The id of the status message it came with (an answer is for that one).
        question: Its text.
        kind: One of ``hpd_agent.questions.QUESTION_KINDS``, or a kind of the remote's own
            when it came with its answer ``schema``.
        options: The allowed answers, if any.
        schema: The JSON schema of the answer (a custom question's, or a kind of the
            remote's own), if any.
        path: The remote's agent path below the remote agent itself (its ``agent_path``
            without the first element).
        details: Kind-specific details the remote sent (url, label, multiple, argument,
            name, payload, context), nested under ``data`` or flattened.
        data: The details as the remote nested them (``data``), if it did.
        label: The label of a kind of the remote's own, if any.
        auth: It is the remote's authentication step (``TASK_STATE_AUTH_REQUIRED``).
    """

    key: str
    request_id: str | None
    status_id: str
    question: str
    kind: str = "text"
    options: tuple[str, ...] | None = None
    schema: dict[str, Any] | None = None
    path: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict[str, Any])
    data: dict[str, Any] | None = None
    label: str | None = None
    auth: bool = False


def struct_dict(struct: Struct) -> dict[str, Any]:
    """A protobuf ``Struct`` (metadata) as plain JSON data."""
    if not struct.fields:
        return {}
    return MessageToDict(struct)


def state_name(state: TaskState) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` as ``"input-required"`` (the protocol's spelling)."""
    try:
        name = TaskState.Name(state)
    except ValueError:
        return f"unknown state {int(state)}"
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def message_text(message: Message) -> str:
    """The text parts of a message, joined by newlines (data parts as JSON)."""
    return _parts_text(message.parts)


def artifacts_text(artifacts: Sequence[Artifact]) -> str:
    """The text of every artifact, in order, joined by newlines."""
    texts = [_parts_text(a.parts) for a in artifacts]
    return "\n".join(t for t in texts if t)


def _parts_text(parts: Sequence[Part]) -> str:
    texts: list[str] = []
    for part in parts:
        if part.HasField("text"):
            texts.append(part.text)
        elif part.HasField("data"):
            texts.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        elif part.HasField("url"):
            texts.append(part.url)
    return "\n".join(texts)


def message_id(*names: str) -> str:
    """A message id derived from ``names``: the same names, the same id (a resent message is
    recognisable as the same one)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "hpd-agent:" + "\x1f".join(names)))


def query_message(query: str, mid: str) -> Message:
    """The user message that starts a remote task."""
    return Message(role=Role.ROLE_USER, message_id=mid, parts=[new_text_part(query)])


def answer_message(
    answer: Any, *, task_id: str, context_id: str, request_id: str | None, mid: str
) -> Message:
    """A user message answering a question in the remote's task and context."""
    part = new_text_part(answer) if isinstance(answer, str) else new_data_part(answer)
    metadata = {"request_id": request_id} if request_id is not None else None
    return Message(
        role=Role.ROLE_USER,
        message_id=mid,
        task_id=task_id,
        context_id=context_id,
        parts=[part],
        metadata=metadata,
    )


# -- questions -------------------------------------------------------------------------------
def questions_of(status: TaskStatus, event_metadata: Mapping[str, Any]) -> list[RemoteQuestion]:
    """The questions a status that waits (input or authentication) asks; [] for others.

    The status message's metadata is read first, then the status update event's.
    """
    message = status.message if status.HasField("message") else Message()
    metadata = {**event_metadata, **struct_dict(message.metadata)}
    text = bounded(mend(message_text(message)), _MAX_QUESTION)
    status_id = _key(_text(message.message_id, None)) or _stamp(status)
    if status.state == TaskState.TASK_STATE_AUTH_REQUIRED:
        return [_auth_question(metadata, message, text, status_id)]
    if status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return []
    listed = metadata.get("requests")
    if isinstance(listed, list) and listed:
        entries = cast(list[Any], listed)[:_MAX_REQUESTS]
        found = [q for e in entries if (q := _listed(e, status_id)) is not None]
        if found:
            return found
    return [_question(metadata, text, status_id)]


def _listed(entry: Any, status_id: str) -> RemoteQuestion | None:
    if not isinstance(entry, dict):
        return None
    data = cast(dict[str, Any], entry)
    if _text(data.get("request_id"), None) is None:
        return None  # an entry nobody could answer by id
    question = bounded(mend(_text(data.get("question"), None) or ""), _MAX_QUESTION)
    return _question(data, question, status_id)


def _question(metadata: Mapping[str, Any], text: str, status_id: str) -> RemoteQuestion:
    request_id = _text(metadata.get("request_id"), None)
    kind = metadata.get("question_kind")
    schema = metadata.get("schema")
    schema = cast(dict[str, Any], schema) if isinstance(schema, dict) and schema else None
    details = {k: metadata[k] for k in _DETAILS if k in metadata}
    nested = metadata.get("data")
    data = cast(dict[str, Any], nested) if isinstance(nested, dict) else None
    details.update(data or {})
    if not isinstance(kind, str) or (
        # A kind of the remote's own is asked as such when its answer schema came with it.
        kind not in QUESTION_KINDS and (schema is None or _KIND.fullmatch(kind) is None)
    ):
        kind = "text"
    return RemoteQuestion(
        key=key_of(request_id) if request_id is not None else derived_key("s", status_id),
        request_id=request_id,
        status_id=status_id,
        question=text or "The remote agent needs your input.",
        kind=kind,
        options=_options(metadata.get("options")),
        schema=schema,
        path=_below(metadata.get("agent_path")),
        details=details,
        data=data,
        label=_text(metadata.get("kind_label"), _MAX_LABEL),
    )


def _auth_question(
    metadata: Mapping[str, Any], message: Message, text: str, status_id: str
) -> RemoteQuestion:
    # Whole: a URL cut short opens the wrong page (one too long is refused when asked).
    url = _text(metadata.get("url"), None) or _text(metadata.get("auth_url"), None)
    if url is None:
        url = next((p.url for p in message.parts if p.HasField("url")), None)
    if url is None:
        found = _URL.search(text)
        url = found.group() if found else None
    details: dict[str, Any] = {"label": "Sign in"}
    if url is not None:
        details["url"] = url
    return RemoteQuestion(
        key=derived_key("a", status_id),
        request_id=_text(metadata.get("request_id"), None),
        status_id=status_id,
        question=text or "The remote agent needs you to sign in.",
        kind="action",
        path=_below(metadata.get("agent_path")),
        details=details,
        auth=True,
    )


def _text(value: Any, limit: int | None) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value if limit is None else value[:limit]


def key_of(request_id: str) -> str:
    """The key of a question the remote names ``request_id``: the id itself when short and
    not starting with ``~``; ``~`` and the id when it does; a long one as ``~h:``, its head and
    a digest of the whole. No two ids share a key, and no id's key is a ``derived_key``
    (those start with ``~`` and a letter), so a remote cannot make two questions one."""
    if len(request_id) < _MAX_KEY:
        return "~" + request_id if request_id.startswith("~") else request_id
    digest = hashlib.blake2b(request_id.encode("utf-8", "surrogatepass"), digest_size=16)
    return f"~h:{request_id[: _MAX_KEY - 37]}#{digest.hexdigest()}"


def derived_key(kind: str, *parts: str) -> str:
    """A key made here, not named by the remote: ``~``, a one-letter ``kind`` (``s`` a status
    without request id, ``a`` an authentication step, ``r`` a question asked again), then the
    parts as a JSON list (so no two part lists share a key)."""
    return f"~{kind}:{json.dumps(parts)}"


def _key(value: str | None) -> str | None:
    """``value`` (a status message's id) as a bounded name: itself when short enough, else its
    head and a digest of the whole."""
    if value is None or len(value) <= _MAX_KEY:
        return value
    digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16)
    return f"{value[: _MAX_KEY - 34]}#{digest.hexdigest()}"


def _stamp(status: TaskStatus) -> str:
    if status.HasField("timestamp"):
        return f"at-{status.timestamp.seconds}.{status.timestamp.nanos:09d}"
    return f"state-{int(status.state)}"


def _options(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    found: list[str] = []
    for item in cast(list[Any], value)[:_MAX_OPTIONS]:
        if isinstance(item, str) and item and item not in found:
            found.append(mend(item[:_MAX_OPTION]))
    return tuple(found) or None


def _below(value: Any) -> tuple[str, ...]:
    """The remote's ``agent_path`` without its first element (the remote agent itself)."""
    if not isinstance(value, list):
        return ()
    names = cast(list[Any], value)[:_MAX_PATH]
    if not all(isinstance(n, str) and n for n in names):
        return ()
    return tuple(mend(str(n)[:_MAX_NAME]) for n in names[1:])
