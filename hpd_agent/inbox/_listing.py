"""A request as the inbox shows it, and which requests a listing (or an event stream) keeps.

An item holds what a person needs to answer the request and nothing that opens a run: the
run is named by ``run_label``, its root agent's name and a short tag derived from the run
id (a web run's id is its secret: it is never shown).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..events import PATH_SEPARATOR
from ..store import RequestRecord
from ..web import request_value

__all__ = [
    "MAX_FILTER",
    "Filter",
    "FilterError",
    "author_of",
    "inbox_item",
    "resolved_item",
    "run_label",
]

MAX_FILTER = 1000
"""Longest ``path`` or ``kind`` a listing is asked for (characters)."""

_TAG = 6
"""Hex digits of the run id's SHA-256 in a run's label: a tag to tell runs apart, which
says nothing of the id."""


def run_label(record: RequestRecord) -> str:
    """The run of ``record`` as people read it: ``"Orchestrator #1a2b3c"``."""
    root = record.agent_path[0] if record.agent_path else "Run"
    tag = hashlib.sha256(record.run_id.encode(errors="surrogatepass")).hexdigest()[:_TAG]
    return f"{root} #{tag}"


def inbox_item(record: RequestRecord) -> dict[str, Any]:
    """A pending request as ``GET /inbox/requests`` lists it (and ``request_opened`` says).

    The issue's fields (``request_id``, ``agent_path``, ``question_kind``, ``question``,
    ``options``, ``schema``, ``tool_name``, ``arguments``, ``created_at``, ``expires_at``,
    ``run_label``) and what a question card shows besides: its kind's ``label``, the
    asker's ``context`` and the kind's details (``data``: an action's link, an input's
    argument, a custom question's payload).
    """
    value = request_value(record)
    return {
        "request_id": record.request_id,
        "agent_path": list(record.agent_path),
        "question_kind": record.kind,
        "question": record.question,
        "options": value["options"],
        "schema": value["responseSchema"],
        "tool_name": value.get("toolName"),
        "arguments": value.get("arguments"),
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "run_label": run_label(record),
        "label": value.get("label"),
        "context": value.get("context"),
        "data": value.get("data"),
    }


def author_of(record: RequestRecord) -> dict[str, Any]:
    """Who ended ``record``'s request and on which channel (None for a request nobody
    answered: expired, cancelled), as the audit trail keeps them."""
    return {"answered_by": record.answered_by, "channel": record.channel}


def resolved_item(record: RequestRecord) -> dict[str, Any]:
    """How a request that left ``pending`` ended, as ``request_resolved`` and ``GET
    /inbox/resolved`` say it (with its ``inbox_item``): its status and answer (None unless
    answered), when, who ended it and on which channel."""
    return {
        "request_id": record.request_id,
        "status": record.status,
        "answer": record.answer if record.status == "answered" else None,
        "answered_at": record.answered_at,
        **author_of(record),
        "run_label": run_label(record),
    }


class FilterError(ValueError):
    """A listing's filter cannot be read (the message says why)."""


@dataclass(frozen=True, slots=True)
class Filter:
    """Which requests a listing keeps.

    Attributes:
        path: An agent path the asker's path starts with, name by name (``("A", "B")``
            keeps ``A > B`` and ``A > B > C``, not ``A > Bee``); empty: any.
        kind: The question kind (``"permission"`` for permissions); None: any.
    """

    path: tuple[str, ...] = ()
    kind: str | None = None

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filter:
        """The filter of a query string: ``path`` written as people read a path
        (``A > B``), ``kind``.

        Raises:
            FilterError: A value longer than ``MAX_FILTER``.
        """
        path = query.get("path", "")
        kind = query.get("kind", "")
        if len(path) > MAX_FILTER or len(kind) > MAX_FILTER:
            raise FilterError(f"path and kind must be at most {MAX_FILTER} characters")
        names = tuple(n.strip() for n in path.split(PATH_SEPARATOR.strip())) if path else ()
        return cls(path=tuple(n for n in names if n), kind=kind or None)

    def keeps(self, agent_path: tuple[str, ...], kind: str) -> bool:
        """Whether the listing shows a request of ``kind`` asked at ``agent_path``."""
        if self.kind is not None and kind != self.kind:
            return False
        return agent_path[: len(self.path)] == self.path
