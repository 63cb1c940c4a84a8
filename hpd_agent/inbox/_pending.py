"""The store's pending requests as the inbox holds them: each encoded once, as the listing
and the event streams send it, kept current by the store's request feed (``_changes``).

A listing is then the held requests joined, not the store read and every request shaped
again: 10,000 pending requests list in a few milliseconds of the server's time. The set is
as fresh as the feed (a change is heard within a second of its write, usually within
milliseconds) and read again from the store whenever the feed was lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from ..store import RequestRecord
from ._listing import Filter, inbox_item

__all__ = ["Pending", "PendingSet", "encoded_item"]


def encoded_item(record: RequestRecord) -> bytes:
    """``inbox_item(record)`` as JSON (non-ASCII escaped: any text, lone surrogates too)."""
    return json.dumps(inbox_item(record), separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Pending:
    """One pending request, as listed.

    Attributes:
        request_id: The request.
        created_at: When it was asked (the listing's order, oldest first).
        agent_path: Who asks (for the ``path`` filter).
        kind: Its kind (for the ``kind`` filter).
        item: Its ``inbox_item``, encoded.
    """

    request_id: str
    created_at: float
    agent_path: tuple[str, ...]
    kind: str
    item: bytes

    @classmethod
    def of(cls, record: RequestRecord) -> Pending:
        """The entry of a pending record (raises what ``inbox_item`` raises)."""
        return cls(
            record.request_id,
            record.created_at,
            record.agent_path,
            record.kind,
            encoded_item(record),
        )


class PendingSet:
    """The pending requests held, by id, listed oldest first."""

    def __init__(self) -> None:
        self._by_id: dict[str, Pending] = {}
        self._ordered = True  # the dict's order is the listing's
        self._last = (float("-inf"), "")

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._by_id

    def ids(self) -> list[str]:
        """The ids held."""
        return list(self._by_id)

    def replace(self, entries: Iterable[Pending]) -> None:
        """Hold ``entries`` (a fresh listing of the store), and nothing else."""
        self._by_id = {}
        self._ordered = True
        self._last = (float("-inf"), "")
        for entry in entries:
            self.add(entry)

    def add(self, entry: Pending) -> bool:
        """Hold ``entry``; False if its request is held already."""
        if entry.request_id in self._by_id:
            return False
        self._by_id[entry.request_id] = entry
        key = (entry.created_at, entry.request_id)
        if key < self._last:
            self._ordered = False  # asked earlier, committed later: sorted at the next listing
        else:
            self._last = key
        return True

    def remove(self, request_id: str) -> Pending | None:
        """Stop holding a request (it ended); its entry, or None if it was not held."""
        return self._by_id.pop(request_id, None)

    def listing(self, keep: Filter) -> bytes:
        """``{"requests": [...]}``: the held requests ``keep`` keeps, oldest first."""
        if not self._ordered:
            entries = sorted(self._by_id.values(), key=lambda e: (e.created_at, e.request_id))
            self._by_id = {e.request_id: e for e in entries}
            self._ordered = True
            if entries:
                self._last = (entries[-1].created_at, entries[-1].request_id)
        if keep.path or keep.kind is not None:
            items = [e.item for e in self._by_id.values() if keep.keeps(e.agent_path, e.kind)]
        else:
            items = [e.item for e in self._by_id.values()]
        return b'{"requests":[' + b",".join(items) + b"]}"
