"""Remembered grants: an "always" approval kept beyond its run, and where grants are kept.

A person who answers a permission request with ``Approve(scope="always")`` gives a *grant*:
the tool, at that agent path, may run without asking, for every call whose arguments fit
the grant's ``match`` (``{"arg": "glob"}``), until the grant expires (``ttl``) or is revoked.
A ``GrantBook`` keeps them: a store's (``StoreCapabilities.grants``: every run on that
store sees them), else, for a run kept nowhere, ``PROCESS_GRANTS`` (this process's memory).
What covers a call is decided here, once, for every book (``Grant.covers``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from .._values.records import Author
from ..events import format_path
from ..exceptions import UnknownGrantError

__all__ = [
    "GRANT_CHANNEL",
    "MAX_MATCH_ARGS",
    "PROCESS_GRANTS",
    "Grant",
    "GrantBook",
    "MemoryGrants",
    "check_match",
    "check_ttl",
    "grant_author",
    "grant_id_for",
    "new_grant_id",
]

GRANT_CHANNEL = "grant"
"""The channel of an answer a grant gave."""

MAX_MATCH_ARGS = 64
"""Most arguments a grant's ``match`` may name."""

MAX_GLOB_CHARS = 1000
"""Longest glob a grant's ``match`` may hold for one argument."""


def grant_author(grant_id: str) -> Author:
    """The author of an answer a remembered grant gave: ``grant:<id>`` on channel
    ``"grant"`` (kept with the answer, on its resolved event and the trace, as any
    author)."""
    return Author(f"grant:{grant_id}", GRANT_CHANNEL)


def grant_id_for(request_id: str) -> str:
    """The id of the grant an "always" answer to ``request_id`` gives: derived from the
    request, so a replayed run records the same grant again (nothing twice)."""
    return hashlib.blake2b(request_id.encode(), digest_size=6).hexdigest()


def new_grant_id() -> str:
    """A fresh grant id (for a grant given by code, not by answering a request)."""
    return secrets.token_hex(6)


def check_match(match: object) -> dict[str, str] | None:
    """``match`` as a grant keeps it (a new dict), or ``ValueError`` saying what is wrong.

    A match names tool arguments, each with a glob (``fnmatch``, case-sensitive) the
    argument's value must fit; None covers any arguments.
    """
    if match is None:
        return None
    if not isinstance(match, Mapping):
        raise ValueError(f'match must be {{"argument": "glob", ...}}, not {type(match).__name__}')
    pairs: Mapping[Any, Any] = match  # pyright: ignore[reportUnknownVariableType]
    if not pairs:
        raise ValueError("match must name at least one argument (or be None: any arguments)")
    if len(pairs) > MAX_MATCH_ARGS:
        raise ValueError(f"match names {len(pairs)} arguments, more than {MAX_MATCH_ARGS}")
    kept: dict[str, str] = {}
    for name, glob in pairs.items():
        if not isinstance(name, str) or not name:
            raise ValueError("match's argument names must be non-empty text")
        if not isinstance(glob, str):
            raise ValueError(f"match[{name!r}] must be a glob (text), not {type(glob).__name__}")
        if len(glob) > MAX_GLOB_CHARS:
            raise ValueError(f"match[{name!r}] is longer than {MAX_GLOB_CHARS} characters")
        kept[name] = glob
    return kept


def check_ttl(ttl: object) -> float | None:
    """``ttl`` (seconds a grant lasts) as a float, or ``ValueError``; None: until revoked."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise ValueError(f"ttl must be a number of seconds, not {type(ttl).__name__}")
    if not (0 < ttl < math.inf):
        raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
    return float(ttl)


def _argument_text(value: Any) -> str:
    """An argument's value as a glob is matched against: text as it is, anything else as
    its JSON text (``5``, ``true``, ``["a"]``)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Grant:
    """A remembered approval: ``tool_name`` may run at ``agent_path`` without asking.

    Attributes:
        grant_id: Its id (what ``hpd-agent grants revoke`` takes; answers it gives are by
            ``grant:<grant_id>``).
        tool_name: The tool it approves.
        agent_path: The agent path it was given at; it covers that agent's calls only.
        match: Argument name to glob, every one of which a call's arguments must fit
            (a value that is not text is matched as its JSON text); None: any arguments.
        granted_by: Who gave it (the author of the "always" answer), when known.
        channel: The channel that answer came on (``console``, ``cli``, ``web``, ...),
            when known.
        request_id: The permission request it was given in answer to, if any.
        created_at: When it was given (seconds since the epoch).
        until: When it expires (seconds since the epoch); None: until revoked.
        revoked_at: When it was revoked; None while it stands.
        revoked_by: Who revoked it, when known.
    """

    grant_id: str
    tool_name: str
    agent_path: tuple[str, ...]
    match: Mapping[str, str] | None = None
    granted_by: str | None = None
    channel: str | None = None
    request_id: str | None = None
    created_at: float
    until: float | None = None
    revoked_at: float | None = None
    revoked_by: str | None = None

    def live(self, now: float | None = None) -> bool:
        """Whether it stands at ``now`` (default: the current time): not revoked, not expired."""
        if self.revoked_at is not None:
            return False
        return self.until is None or (time.time() if now is None else now) < self.until

    def covers(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        agent_path: tuple[str, ...],
        now: float | None = None,
    ) -> bool:
        """Whether it approves a call of ``tool_name`` with ``arguments`` at ``agent_path``
        at ``now``: live, the same tool at the same path, every matched argument present and
        fitting its glob."""
        if tool_name != self.tool_name or tuple(agent_path) != self.agent_path:
            return False
        if not self.live(now):
            return False
        for name, glob in (self.match or {}).items():
            if name not in arguments:
                return False
            if not fnmatch.fnmatchcase(_argument_text(arguments[name]), glob):
                return False
        return True

    @property
    def author(self) -> Author:
        """Who answers the requests it approves: ``grant:<grant_id>`` on channel
        ``"grant"``."""
        return grant_author(self.grant_id)

    def __str__(self) -> str:
        return f"grant {self.grant_id} ({self.tool_name} at {format_path(self.agent_path)})"


@runtime_checkable
class GrantBook(Protocol):
    """Where grants are kept and found: a store's (``StoreCapabilities.grants``), or this
    process's memory (``MemoryGrants``). All methods are async and anyio-safe."""

    async def find_grant(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        agent_path: tuple[str, ...],
        *,
        now: float | None = None,
    ) -> Grant | None:
        """The oldest grant that covers the call (``Grant.covers``) at ``now`` (default:
        the current time), or None."""
        ...

    async def add_grant(self, grant: Grant) -> Grant:
        """Keep ``grant``; if its id is kept already, return the kept one unchanged (a
        replayed run gives the same grant again)."""
        ...

    async def list_grants(self, *, ended: bool = False) -> list[Grant]:
        """Grants, oldest first: the live ones, or with ``ended`` every one kept (revoked
        and expired too)."""
        ...

    async def revoke_grant(self, grant_id: str, *, by: str | None = None) -> Grant:
        """Revoke a grant: from now on it covers nothing (it stays listed with ``ended``).
        Revoking it again changes nothing and returns it as it is.

        Raises:
            UnknownGrantError: No grant has that id.
        """
        ...


class MemoryGrants:
    """A ``GrantBook`` in this process's memory, gone with the object (``PROCESS_GRANTS``
    for runs kept nowhere; ``MemoryStore`` has one of its own)."""

    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        # The ids of the grants of each (tool, agent path): a lookup reads only those (a
        # book of many grants is not scanned for each permission request).
        self._by_call: dict[tuple[str, tuple[str, ...]], list[str]] = {}

    async def find_grant(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        agent_path: tuple[str, ...],
        *,
        now: float | None = None,
    ) -> Grant | None:
        """The oldest grant covering the call, or None (``GrantBook``)."""
        ids = self._by_call.get((tool_name, tuple(agent_path)))
        if not ids:
            return None
        clock = time.time() if now is None else now
        for grant in _oldest_first(self._grants[i] for i in ids):
            if grant.covers(tool_name, arguments, agent_path, clock):
                return grant
        return None

    async def add_grant(self, grant: Grant) -> Grant:
        """Keep ``grant`` unless its id is kept already (``GrantBook``)."""
        kept = self._grants.setdefault(grant.grant_id, grant)
        if kept is grant:
            self._by_call.setdefault((grant.tool_name, grant.agent_path), []).append(grant.grant_id)
        return kept

    async def list_grants(self, *, ended: bool = False) -> list[Grant]:
        """Live grants, or every one with ``ended``, oldest first (``GrantBook``)."""
        clock = time.time()
        return [g for g in _oldest_first(self._grants.values()) if ended or g.live(clock)]

    async def revoke_grant(self, grant_id: str, *, by: str | None = None) -> Grant:
        """Revoke a grant (``GrantBook``)."""
        grant = self._grants.get(grant_id)
        if grant is None:
            raise UnknownGrantError(f"no grant with id {grant_id!r}")
        if grant.revoked_at is None:
            grant = replace(grant, revoked_at=time.time(), revoked_by=by)
            self._grants[grant_id] = grant
        return grant

    def clear(self) -> None:
        """Forget every grant (tests; a process that starts over)."""
        self._grants.clear()
        self._by_call.clear()


def _oldest_first(grants: Iterable[Grant]) -> list[Grant]:
    return sorted(grants, key=lambda g: (g.created_at, g.grant_id))


PROCESS_GRANTS = MemoryGrants()
"""The grants of runs kept nowhere (no store): an "always" approval lasts for the process."""
