"""Remembered grants in SQL: the shipped stores' ``GrantBook`` (``StoreCapabilities.grants``).

One table on the store's side connection (``_side``), ``hpd_grants``: a grant per row (its
id, tool, agent path and argument match as JSON, who gave it and on which channel, the
request it answered, created, expires, revoked and by whom). A grant is never deleted:
revoking it stamps it, so ``hpd-agent grants list --all`` still shows who gave and who
revoked it. Every run on the
store finds the grants any process gave; what covers a call is the core's rule
(``Grant.covers``), applied to the live rows of that tool at that agent path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, cast

from ..exceptions import StoreCorruptError, UnknownGrantError
from ..permissions import Grant
from ._side import SideDB

__all__ = ["GRANT_TABLES", "SQLGrants"]

GRANT_TABLES = (
    """CREATE TABLE IF NOT EXISTS hpd_grants (
    id TEXT PRIMARY KEY,
    tool_name TEXT NOT NULL,
    agent_path TEXT NOT NULL,
    arg_match TEXT,
    granted_by TEXT,
    channel TEXT,
    request_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION,
    revoked_at DOUBLE PRECISION,
    revoked_by TEXT
)""",
    "CREATE INDEX IF NOT EXISTS hpd_grants_tool ON hpd_grants (tool_name, agent_path)",
)
"""The statements making the grants table (``SideDB``'s ``tables``)."""

_COLUMNS = (
    "id, tool_name, agent_path, arg_match, granted_by, channel, request_id, created_at,"
    " expires_at, revoked_at, revoked_by"
)
_LIVE = "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)"
_FIND = (
    f"SELECT {_COLUMNS} FROM hpd_grants WHERE tool_name = ? AND agent_path = ? AND {_LIVE}"
    " ORDER BY created_at, id"
)
_ADD = f"INSERT INTO hpd_grants ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING"
_GET = f"SELECT {_COLUMNS} FROM hpd_grants WHERE id = ?"
_LIST_LIVE = f"SELECT {_COLUMNS} FROM hpd_grants WHERE {_LIVE} ORDER BY created_at, id"
_LIST_ALL = f"SELECT {_COLUMNS} FROM hpd_grants ORDER BY created_at, id"
_REVOKE = "UPDATE hpd_grants SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL"


def _path_text(path: tuple[str, ...]) -> str:
    # One spelling of a path (ASCII JSON, no spaces), so the index finds it by equality.
    return json.dumps(list(path), separators=(",", ":"))


def _row(grant: Grant) -> tuple[Any, ...]:
    match = None if grant.match is None else json.dumps(dict(grant.match), sort_keys=True)
    return (
        grant.grant_id,
        grant.tool_name,
        _path_text(grant.agent_path),
        match,
        grant.granted_by,
        grant.channel,
        grant.request_id,
        grant.created_at,
        grant.until,
        grant.revoked_at,
        grant.revoked_by,
    )


def _grant(row: tuple[Any, ...]) -> Grant:
    """A row as a ``Grant``; ``StoreCorruptError`` naming it if it cannot be read."""
    gid, tool, path, match, by, channel, request_id, created, until, revoked, revoked_by = row
    try:
        names = json.loads(path)
        matched = None if match is None else json.loads(match)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):  # pyright: ignore[reportUnknownVariableType]
            raise ValueError("agent_path is not a list of names")
        if matched is not None and not (
            isinstance(matched, dict) and all(isinstance(v, str) for v in matched.values())  # pyright: ignore[reportUnknownVariableType]
        ):
            raise ValueError("arg_match is not an object of globs")
    except ValueError as e:
        raise StoreCorruptError(f"grant {gid!r} cannot be read: {e}") from None
    return Grant(
        grant_id=str(gid),
        tool_name=str(tool),
        agent_path=tuple(names),  # pyright: ignore[reportUnknownArgumentType]
        match=cast("dict[str, str] | None", matched),
        granted_by=by,
        channel=channel,
        request_id=request_id,
        created_at=float(created),
        until=None if until is None else float(until),
        revoked_at=None if revoked is None else float(revoked),
        revoked_by=revoked_by,
    )


class SQLGrants:
    """``GrantBook`` on a store's side connection.

    Args:
        db: The side connection (its ``tables`` include ``GRANT_TABLES``).
    """

    def __init__(self, db: SideDB) -> None:
        self.db = db

    async def find_grant(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        agent_path: tuple[str, ...],
        *,
        now: float | None = None,
    ) -> Grant | None:
        """The oldest grant covering the call, or None (``GrantBook``)."""
        clock = time.time() if now is None else now
        sql = self.db.sql(_FIND)
        key = (tool_name, _path_text(tuple(agent_path)), clock)

        def read(conn: Any) -> list[tuple[Any, ...]]:
            return conn.execute(sql, key).fetchall()

        for row in await self.db.read_now(read):
            grant = _grant(row)
            if grant.covers(tool_name, arguments, agent_path, clock):
                return grant
        return None

    async def add_grant(self, grant: Grant) -> Grant:
        """Keep ``grant`` unless its id is kept already; the kept one (``GrantBook``)."""
        db = self.db
        add, get = db.sql(_ADD), db.sql(_GET)
        row = _row(grant)

        def write(conn: Any) -> tuple[Any, ...]:
            with db.transaction(conn):
                conn.execute(add, row)
                return conn.execute(get, (grant.grant_id,)).fetchone()

        return _grant(await db.call(write))

    async def list_grants(self, *, ended: bool = False) -> list[Grant]:
        """Live grants, or every one with ``ended``, oldest first (``GrantBook``)."""
        sql = self.db.sql(_LIST_ALL if ended else _LIST_LIVE)
        args = () if ended else (time.time(),)

        def read(conn: Any) -> list[tuple[Any, ...]]:
            return conn.execute(sql, args).fetchall()

        return [_grant(row) for row in await self.db.read(read)]

    async def revoke_grant(self, grant_id: str, *, by: str | None = None) -> Grant:
        """Revoke a grant; once revoked it stays as it was (``GrantBook``).

        Raises:
            UnknownGrantError: No grant has that id.
        """
        db = self.db
        revoke, get = db.sql(_REVOKE), db.sql(_GET)

        def write(conn: Any) -> tuple[Any, ...] | None:
            with db.transaction(conn):
                conn.execute(revoke, (time.time(), by, grant_id))
                return conn.execute(get, (grant_id,)).fetchone()

        row = await db.call(write)
        if row is None:
            raise UnknownGrantError(f"no grant with id {grant_id!r} in the store")
        return _grant(row)
