"""Durable requests and run journals: ``MemoryStore``, ``SQLiteStore`` (default), ``PostgresStore``.

Pass a store to ``Agent.run/stream(..., store=store)`` and the run journals as it goes; after
a crash ``await agent.resume(run_id, store=store)`` replays the journal (no model call and no
tool side effect runs twice) and continues. Any process holding the store can list pending
requests (``store.list_requests()``), answer them (``hpd_agent.store.respond``) and cancel a
run, even one another process drives (``hpd_agent.store.cancel_run``).

A store implements ``Store`` and declares what it offers beyond it with
``Store.capabilities()`` (a ``StoreCapabilities`` of ``JournalWriteNow``, ``JournalBatches``,
``JournalSendAhead``, ``JournalGroups``, ``JournalBehind``, ``RunLeases``, ``ThreadTables``, ``RequestFeed``,
every run's requests as they open and end: what ``hpd-agent inbox`` listens to, and a
``GrantBook`` of remembered grants, ``MemoryGrants`` in memory); ``Sessions`` gives
any ``Store`` class its ``open_session`` / ``resume_session``. The kit for writing one, all
here: the lease as a fence (``current_fence``, ``Fence``), lease holders (``new_holder``,
``holder_gone``), ``DEFAULT_LEASE_TTL`` / ``check_lease_ttl``, the errors a store raises
(``refusal``, ``lease_refusal``, ``run_exists_refusal``), ``expire_stale`` (``recover``),
``MemoryThreadTables``, and ``register_scheme`` so ``open_store`` and the ``hpd-agent``
commands open its locations (``hpd_agent.store.kit`` holds these names alone);
``hpd_agent.testing.store_contract`` tests it. See docs/durability.md, "Writing a store".
Integrations that keep requests their own way (``hpd_agent.temporal``) reuse the record
type and its helpers: ``RequestRecord``, ``jsonable``, ``refusal`` and ``settlement``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from ._answers import CANCEL_REQUEST, respond
from ._backend import settlement
from ._cancel import cancel_run
from ._journal import Journal
from ._schemes import open_location
from .kit import (
    DEFAULT_LEASE_TTL,
    BehindIO,
    BehindWriter,
    Fence,
    Grant,
    GrantBook,
    JournalBatches,
    JournalBehind,
    JournalEntry,
    JournalGroups,
    JournalSendAhead,
    JournalWriteNow,
    Lease,
    LeaseRenewer,
    MemoryGrants,
    MemoryThreadTables,
    RenewIO,
    RequestFeed,
    RequestRecord,
    RequestState,
    RunLeases,
    RunRecord,
    RunState,
    Sessions,
    Store,
    StoreCapabilities,
    StoreFactory,
    StoreOptions,
    ThreadData,
    ThreadTables,
    check_lease_ttl,
    current_fence,
    expire_stale,
    holder_gone,
    jsonable,
    lease_refusal,
    new_holder,
    refusal,
    register_scheme,
    run_exists_refusal,
)
from .memory import MemoryStore
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "CANCEL_REQUEST",
    "DEFAULT_LEASE_TTL",
    "BehindIO",
    "BehindWriter",
    "Fence",
    "Grant",
    "GrantBook",
    "Journal",
    "JournalBatches",
    "JournalBehind",
    "JournalEntry",
    "JournalGroups",
    "JournalSendAhead",
    "JournalWriteNow",
    "Lease",
    "LeaseRenewer",
    "MemoryGrants",
    "MemoryStore",
    "MemoryThreadTables",
    "PostgresStore",
    "RenewIO",
    "RequestFeed",
    "RequestRecord",
    "RequestState",
    "RunLeases",
    "RunRecord",
    "RunState",
    "SQLiteStore",
    "Sessions",
    "Store",
    "StoreCapabilities",
    "StoreFactory",
    "StoreOptions",
    "ThreadData",
    "ThreadTables",
    "cancel_run",
    "check_lease_ttl",
    "current_fence",
    "env_lease_ttl",
    "expire_stale",
    "holder_gone",
    "jsonable",
    "lease_refusal",
    "new_holder",
    "open_store",
    "refusal",
    "register_scheme",
    "respond",
    "run_exists_refusal",
    "settlement",
]


def open_store(
    location: str | os.PathLike[str],
    *,
    lease_ttl: float | None = None,
    durability: Literal["process", "os"] | None = None,
    create: bool = True,
) -> Store:
    """The store at a location: ``scheme:...`` opens the store registered for the scheme
    (``register_scheme``: ``postgresql://`` and ``postgres://`` a ``PostgresStore``,
    ``sqlite://`` a ``SQLiteStore``, ``memory:`` a ``MemoryStore``); anything else, and any
    ``os.PathLike``, is a SQLite file path.

    Args:
        location: The location.
        lease_ttl: Seconds a run's lease lasts unless renewed; by default the environment
            variable ``HPD_AGENT_LEASE_TTL`` if set (so the ``hpd-agent`` commands and
            servers that open their store here can be told), else the store's default.
        durability: A SQLite file's ``durability`` (``"process"`` by default, or ``"os"``;
            see ``SQLiteStore`` and docs/durability.md). A PostgreSQL server's durability is
            the server's own setting: given with a DSN, it is refused.
        create: False: an existing store only (a SQLite file that is missing is refused
            rather than made).

    Raises:
        UserError: A bad ``HPD_AGENT_LEASE_TTL``, or ``durability`` for a store without it.
        StoreUnavailableError: The store cannot be opened (a ``name://`` location whose
            scheme nobody registered too).
    """
    if lease_ttl is None:
        lease_ttl = env_lease_ttl()
    options = StoreOptions(lease_ttl=lease_ttl, durability=durability, create=create)
    if not isinstance(location, str):
        return open_location(os.fspath(location), options, path=True)
    return open_location(location, options)


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
