"""``hpd-agent grants list|revoke``: the remembered grants of a store (``Approve(scope=
"always")`` answers), each with its id, tool, argument match, agent path, who gave it on
which channel (the "always" answer's author), when, and until when; ``revoke ID`` ends one
(a later call it covered asks again), recorded as revoked by ``--as NAME`` (default: the OS
user).

Failures are the store commands' (``cli_store.failure``): a store that cannot be opened 8,
an unreadable grant row 9, no grant with that id 14, a store keeping no grants 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from typing import TYPE_CHECKING, Any

from ..events import format_path
from ..text import bounded
from .cli_store import EXIT_FAILED, _Fail, _open, _show, answerer

if TYPE_CHECKING:
    from ..permissions import Grant, GrantBook
    from ..store import Store

__all__ = ["EXIT_UNKNOWN_GRANT", "add_grants_command"]

EXIT_UNKNOWN_GRANT = 14
"""``grants revoke``: no grant has that id."""

_CELL = 60
"""Most characters of one cell of ``grants list``'s table (``--json`` gives it whole)."""

_STORE_HELP = (
    "the store: a SQLite file (it must exist), a postgresql:// DSN, or a location of a "
    "registered scheme"
)


def add_grants_command(sub: Any) -> None:
    """Register ``hpd-agent grants list`` and ``hpd-agent grants revoke`` on the CLI."""
    grants = sub.add_parser(
        "grants",
        help="list or revoke the remembered grants of a store (approvals given 'always')",
        description=(
            "A permission approved 'always' (Approve(scope=\"always\")) is a grant kept in the "
            "store: later calls of that tool by that agent, in any run on the store, are "
            "approved without asking (answered by grant:ID) until it expires or is revoked."
        ),
    )
    verbs = grants.add_subparsers(dest="grants_command", metavar="{list,revoke}", required=True)
    listing = verbs.add_parser("list", help="the live grants (--all: revoked and expired too)")
    listing.add_argument("--store", "--db", dest="store", required=True, help=_STORE_HELP)
    listing.add_argument(
        "--all", action="store_true", help="revoked and expired grants too (with their status)"
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="a JSON list of objects (grant_id, tool_name, match, agent_path, granted_by, "
        "channel, request_id, created_at, until, revoked_at, revoked_by, status)",
    )
    listing.set_defaults(func=_cmd_list)
    revoke = verbs.add_parser("revoke", help="revoke a grant: the calls it covered ask again")
    revoke.add_argument("grant_id", metavar="ID")
    revoke.add_argument("--store", "--db", dest="store", required=True, help=_STORE_HELP)
    revoke.add_argument(
        "--as", dest="as_name", metavar="NAME", help="who revokes it (default: the OS user)"
    )
    revoke.set_defaults(func=_cmd_revoke)


def _book(store: Store) -> GrantBook:
    book = store.capabilities().grants
    if book is None:
        raise _Fail(
            EXIT_FAILED, f"{type(store).__name__} keeps no grants (StoreCapabilities.grants)"
        )
    return book


def _cmd_list(args: argparse.Namespace) -> int:
    import anyio

    async def main() -> list[Grant]:
        store = _open(args.store)
        try:
            return await _book(store).list_grants(ended=args.all)
        finally:
            await store.aclose()

    grants = anyio.run(main)
    now = time.time()
    if args.json:
        print(json.dumps([_item(g, now) for g in grants]))  # ASCII JSON: controls escaped
        return 0
    if not grants:
        print("no grants" if args.all else "no live grants (--all shows ended ones)")
        return 0
    header = ["ID", "TOOL", "MATCH", "PATH", "BY", "VIA", "CREATED", "UNTIL"]
    rows = [[_show(bounded(cell, _CELL)) for cell in _cells(g, now, args.all)] for g in grants]
    if args.all:
        header.append("STATUS")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


def _cmd_revoke(args: argparse.Namespace) -> int:
    import anyio

    from ..exceptions import UnknownGrantError

    by, _ = answerer(args)  # --as as `answer` takes it: a name, else the OS user

    async def main() -> tuple[Grant, bool]:
        started = time.time()
        store = _open(args.store)
        try:
            book = _book(store)
            try:
                grant = await book.revoke_grant(args.grant_id, by=by)
            except UnknownGrantError as e:
                raise _Fail(EXIT_UNKNOWN_GRANT, str(e)) from None
        finally:
            await store.aclose()
        # Stamped by this call, or by an earlier one (revoking twice changes nothing).
        return grant, grant.revoked_at is not None and grant.revoked_at >= started

    grant, here = anyio.run(main)
    where = f"{grant.tool_name} at {format_path(grant.agent_path)}"
    when = _when(grant.revoked_at or 0)
    if here:
        print(_show(f"revoked grant {grant.grant_id} ({where}): calls it covered ask again"))
    else:
        print(_show(f"grant {grant.grant_id} ({where}) was revoked already, at {when}"))
    return 0


def _status(grant: Grant, now: float) -> str:
    if grant.revoked_at is not None:
        return "revoked"
    return "live" if grant.live(now) else "expired"


def _status_cell(grant: Grant, now: float) -> str:
    status = _status(grant, now)
    if status == "revoked" and grant.revoked_by is not None:
        return f"revoked by {grant.revoked_by}"
    return status


def _item(grant: Grant, now: float) -> dict[str, Any]:
    return {
        "grant_id": grant.grant_id,
        "tool_name": grant.tool_name,
        "match": None if grant.match is None else dict(grant.match),
        "agent_path": list(grant.agent_path),
        "granted_by": grant.granted_by,
        "channel": grant.channel,
        "request_id": grant.request_id,
        "created_at": grant.created_at,
        "until": grant.until,
        "revoked_at": grant.revoked_at,
        "revoked_by": grant.revoked_by,
        "status": _status(grant, now),
    }


def _when(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).isoformat(timespec="seconds")


def _cells(grant: Grant, now: float, ended: bool) -> list[str]:
    match = " ".join(f"{name}={glob}" for name, glob in (grant.match or {}).items())
    cells = [
        grant.grant_id,
        grant.tool_name,
        match or "*",
        format_path(grant.agent_path),
        grant.granted_by or "-",
        grant.channel or "-",
        _when(grant.created_at),
        "never" if grant.until is None else _when(grant.until),
    ]
    if ended:
        cells.append(_status_cell(grant, now))
    return cells
