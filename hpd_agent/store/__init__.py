"""Durable requests and run journals: ``MemoryStore``, ``SQLiteStore`` (default), ``PostgresStore``.

Pass a store to ``Agent.run/stream(..., store=store)`` and the run journals as it goes; after
a crash ``await agent.resume(run_id, store=store)`` replays the journal (no model call and no
tool side effect runs twice) and continues. Any process holding the store can list pending
requests (``store.list_requests()``), answer them (``hpd_agent.store.respond``) and cancel a
run, even one another process drives (``hpd_agent.store.cancel_run``).

A store implements ``Store`` and declares what it offers beyond it with
``Store.capabilities()`` (a ``StoreCapabilities`` of ``JournalWriteNow``, ``JournalBatches``,
``JournalSendAhead``, ``JournalGroups`` and ``RunLeases``); ``Sessions`` gives any ``Store`` class its
``open_session`` / ``resume_session``. See docs/durability.md, "Writing a store".
Integrations that keep requests their own way (``hpd_agent.temporal``) reuse the record
type and its helpers: ``RequestRecord``, ``jsonable``, ``refusal`` and ``settlement``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from ._answers import CANCEL_REQUEST, jsonable, respond
from ._backend import settlement
from ._base import (
    JournalEntry,
    Lease,
    RequestRecord,
    RequestState,
    RunRecord,
    RunState,
    refusal,
)
from ._cancel import cancel_run
from ._journal import Journal
from ._protocol import (
    JournalBatches,
    JournalGroups,
    JournalSendAhead,
    JournalWriteNow,
    RunLeases,
    Store,
    StoreCapabilities,
)
from ._renewer import LeaseRenewer, RenewIO
from ._session import Sessions
from .memory import MemoryStore
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "CANCEL_REQUEST",
    "Journal",
    "JournalBatches",
    "JournalEntry",
    "JournalGroups",
    "JournalSendAhead",
    "JournalWriteNow",
    "Lease",
    "LeaseRenewer",
    "MemoryStore",
    "PostgresStore",
    "RenewIO",
    "RequestRecord",
    "RequestState",
    "RunLeases",
    "RunRecord",
    "RunState",
    "SQLiteStore",
    "Sessions",
    "Store",
    "StoreCapabilities",
    "cancel_run",
    "env_lease_ttl",
    "jsonable",
    "open_store",
    "refusal",
    "respond",
    "settlement",
]


def open_store(
    location: str | os.PathLike[str],
    *,
    lease_ttl: float | None = None,
    durability: Literal["process", "os"] | None = None,
) -> Store:
    """A store from a location: a ``postgresql://`` DSN opens a ``PostgresStore``; anything
    else is a SQLite file path.

    Args:
        location: The DSN or the file.
        lease_ttl: Seconds a run's lease lasts unless renewed; by default the environment
            variable ``HPD_AGENT_LEASE_TTL`` if set (so the ``hpd-agent`` commands and
            servers that open their store here can be told), else the store's default.
        durability: A SQLite file's ``durability`` (``"process"`` by default, or ``"os"``;
            see ``SQLiteStore`` and docs/durability.md). A PostgreSQL server's durability is
            the server's own setting: given with a DSN, it is refused.

    Raises:
        UserError: A bad ``HPD_AGENT_LEASE_TTL``, or ``durability`` with a DSN.
    """
    text = os.fspath(location)
    if lease_ttl is None:
        lease_ttl = env_lease_ttl()
    options: dict[str, Any] = {} if lease_ttl is None else {"lease_ttl": lease_ttl}
    if text.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        if durability is not None:
            from ..exceptions import UserError

            raise UserError(
                "durability is a SQLite store option; a PostgreSQL server's durability is "
                "its own setting (synchronous_commit)"
            )
        return PostgresStore(text, **options)
    if durability is not None:
        options["durability"] = durability
    return SQLiteStore(text, **options)


def env_lease_ttl() -> float | None:
    """The lease TTL the environment variable ``HPD_AGENT_LEASE_TTL`` sets, or None.

    Raises:
        UserError: It is not a number.
    """
    value = os.environ.get("HPD_AGENT_LEASE_TTL")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        from ..exceptions import UserError

        raise UserError(f"HPD_AGENT_LEASE_TTL must be a number of seconds, not {value!r}") from None


def __getattr__(name: str) -> Any:
    # psycopg is an optional extra: import it only when PostgresStore is asked for.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
