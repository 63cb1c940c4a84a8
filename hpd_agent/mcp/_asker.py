"""Who asks, across MCP: the asking agent's path travels in ``_meta``, beside the question.

A served agent's question goes to the MCP client as a form whose message names the asker
for any client (``Planner > Clarifier: Which database?``). Beside it goes the asker's path
in the served run (the served agent first), keyed by the question's request id there: on
2025-11-25 in the ``elicitation/create`` request's ``_meta`` (``hpd-agent/agent_path`` and
``hpd-agent/request_id``); on 2026-07-28, whose embedded input requests carry no ``_meta``,
in the ``InputRequiredResult``'s (``hpd-agent/agent_paths``: input request key to path).

An hpd_agent client reading it asks its human the question as A2A's relayed questions are
asked: from the remote path below the calling agent (``Orchestrator > Planner >
Clarifier``), the message without the path, under a request id derived from the remote one
and how often the call was asked it before (stable on a resume; a question the served run
asks again because it refused the answer is a new question, not the answered one). An
elicitation without it (any other server), or with one of the wrong shape or size, is asked
as the calling agent's, its message as it came.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types

from ..events import format_path
from ..hosting import Form
from ..text import mend
from ..tools import ToolContext

__all__ = [
    "PATHS_KEY",
    "PATH_KEY",
    "REQUEST_ID_KEY",
    "Asked",
    "asked_from",
    "params_meta",
    "result_meta",
]

PATH_KEY = "hpd-agent/agent_path"
"""An ``elicitation/create``'s ``_meta`` key: the asking agent's path in the served run."""
REQUEST_ID_KEY = "hpd-agent/request_id"
"""An ``elicitation/create``'s ``_meta`` key: the question's request id in the served run."""
PATHS_KEY = "hpd-agent/agent_paths"
"""An ``InputRequiredResult``'s ``_meta`` key: each input request's asker, by its key."""

_MAX_PATH = 16
_MAX_NAME = 100
_MAX_KEY = 4_000


def params_meta(form: Form) -> types.RequestParamsMeta:
    """The ``_meta`` of an ``elicitation/create`` asking ``form`` (2025-11-25)."""
    meta = {PATH_KEY: list(form.agent_path), REQUEST_ID_KEY: form.request_id}
    return cast(types.RequestParamsMeta, meta)  # its keys are open to any prefixed name


def result_meta(forms: Iterable[Form]) -> dict[str, Any]:
    """The ``_meta`` of an ``InputRequiredResult`` asking ``forms``, keyed by request id."""
    return {PATHS_KEY: {form.request_id: list(form.agent_path) for form in forms}}


def _path_in(value: Any) -> tuple[str, ...] | None:
    """``value`` as an agent path (1 to 16 names of 1 to 100 characters), else None."""
    if not isinstance(value, list) or not 0 < len(cast(list[Any], value)) <= _MAX_PATH:
        return None
    names = cast(list[Any], value)
    if not all(isinstance(n, str) and 0 < len(n) <= _MAX_NAME for n in names):
        return None
    return tuple(mend(str(n)) for n in names)


@dataclass(frozen=True, slots=True)
class Asked:
    """An elicitation as this side asks it.

    Attributes:
        ctx: The frame it is asked from: the calling tool's, or one relaying for the remote
            agents (``ToolContext.on_behalf_of``).
        question: Its text: the message, without the path a relayed one starts with.
    """

    ctx: ToolContext
    question: str


def asked_from(ctx: ToolContext, message: str, path: Any, key: Any, seen: dict[str, int]) -> Asked:
    """How an elicitation with ``message`` is asked from the calling tool's ``ctx``: relayed
    for the remote agent ``path`` under the remote request id ``key`` when both are of the
    right shape (read from ``_meta``: anything else is ignored), else as the calling
    agent's own question.

    ``seen`` counts the remote ids this call was asked (updated here): the served run asks
    a question again when it refused the answer, and that is a new request here (the
    answered one's id would replay the refused answer)."""
    names = _path_in(path)
    if names is None or not isinstance(key, str) or not 0 < len(key) <= _MAX_KEY:
        return Asked(ctx, message)
    times = seen.get(key, 0)
    seen[key] = times + 1
    prefix = f"{format_path(names)}: "
    question = message[len(prefix) :] if message.startswith(prefix) else message
    # "<times>:<key>": no two (times, key) share one (the count ends at the first colon).
    return Asked(ctx.on_behalf_of(*names, key=f"{times}:{key}"), question)
