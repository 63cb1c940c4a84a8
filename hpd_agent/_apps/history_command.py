"""``hpd-agent history RUN_ID --store URL [--json]``: a run's audit trail, every question and
permission request it raised (oldest first) with how it ended, its answer, who answered, on
which channel and when (``RequestRecord.answered_by`` / ``.channel`` / ``.answered_at``).

Failures are the store commands' (``cli_store.failure``): an unreadable row 9 (the readable
ones still listed), no such run 11.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import TYPE_CHECKING, Any

from ..events import format_path
from ..text import bounded
from .cli_store import EXIT_NO_RUN, EXIT_STORE_CORRUPT, EXIT_USAGE, _Fail, _open, _show

if TYPE_CHECKING:
    from ..store import RequestRecord

__all__ = ["ANSWER_CHARS", "add_history_command"]

ANSWER_CHARS = 200
"""Most characters of an answer ``history`` prints on its line (``--json`` gives it whole)."""


def add_history_command(sub: Any) -> None:
    """Register ``hpd-agent history`` on the CLI's subparsers."""
    history = sub.add_parser(
        "history",
        help="a run's audit trail: every question, its answer, who answered, on which channel",
        description=(
            "Every question and permission request of RUN_ID in the store, oldest first: how "
            "it ended, the answer, who answered (answered_by), on which channel and when. "
            "Nothing in it is ever overwritten."
        ),
    )
    history.add_argument("run_id", metavar="RUN_ID")
    history.add_argument(
        "--store",
        "--db",
        dest="store",
        help="the store: a SQLite file (it must exist), a postgresql:// DSN, or a location "
        "of a registered scheme",
    )
    history.add_argument(
        "--json",
        action="store_true",
        help="a JSON list of objects (request_id, agent_path, kind, question, status, "
        "answer, answered_by, channel, created_at, answered_at)",
    )
    history.set_defaults(func=_cmd_history)


def _cmd_history(args: argparse.Namespace) -> int:
    import anyio

    if not args.store:
        raise _Fail(EXIT_USAGE, "history: give the store with --store URL")
    return anyio.run(_history, args)


async def _history(args: argparse.Namespace) -> int:
    from ..exceptions import StoreCorruptError
    from ..store._sql import SQLStore

    store = _open(args.store)
    errors: list[StoreCorruptError] = []
    try:
        if isinstance(store, SQLStore):
            records = await store.list_requests(run_id=args.run_id, status=None, errors=errors)
        else:
            records = await store.list_requests(run_id=args.run_id, status=None)
        if not records and not errors and await store.get_run(args.run_id) is None:
            raise _Fail(EXIT_NO_RUN, f"no run {args.run_id!r} in the store")
    finally:
        await store.aclose()
    if args.json:
        print(json.dumps([_item(r) for r in records]))  # ASCII JSON: controls are escaped
    else:
        for r in records:
            print(_line(r))
        if not records and not errors:
            print(f"run {args.run_id} asked no questions", file=sys.stderr)
    for e in errors:
        print(f"error: {_show(str(e))}", file=sys.stderr)
    return EXIT_STORE_CORRUPT if errors else 0


def _item(r: RequestRecord) -> dict[str, Any]:
    return {
        "request_id": r.request_id,
        "agent_path": list(r.agent_path),
        "kind": r.kind,
        "question": r.question,
        "status": r.status,
        "answer": r.answer,
        "answered_by": r.answered_by,
        "channel": r.channel,
        "created_at": r.created_at,
        "answered_at": r.answered_at,
    }


def _when(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).isoformat(timespec="seconds")


def _line(r: RequestRecord) -> str:
    """One request on one line: when it was asked, where, what; how it ended, by whom."""
    asked = f"{_when(r.created_at)}  {r.request_id}  {format_path(r.agent_path)}  {r.kind}: "
    outcome = r.status
    if r.status == "answered":
        outcome += " " + bounded(json.dumps(r.answer, ensure_ascii=False), ANSWER_CHARS)
    if r.status in ("answered", "declined"):
        outcome += f" by {r.answered_by or '(unnamed)'} via {r.channel or '(unknown)'}"
    if r.answered_at is not None:
        outcome += f" at {_when(r.answered_at)}"
    return _show(asked + bounded(r.question, ANSWER_CHARS) + "  -> " + outcome)
