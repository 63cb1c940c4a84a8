"""What a store needs, in one place: the store author kit (all of it also in ``hpd_agent.store``).

- The protocol and its records: ``Store``, ``Sessions`` (its ``open_session`` /
  ``resume_session``), ``StoreCapabilities`` and the protocols of its fields
  (``JournalWriteNow``, ``JournalBatches``, ``JournalSendAhead``, ``JournalGroups``,
  ``JournalBehind``,
  ``RunLeases``, ``ThreadTables`` with ``ThreadData``; ``MemoryThreadTables``,
  ``RequestFeed``; ``grants``, a ``GrantBook`` of ``Grant``s, remembered grants, with
  ``MemoryGrants``),
  ``RequestRecord``, ``RequestState``, ``JournalEntry``, ``RunRecord``, ``RunState``,
  ``Lease``, ``jsonable`` (an answer as the store keeps it).
- The lease as a fence: ``current_fence(run_id)`` is the ``Fence`` a write of that run must
  pass (its ``token`` must still be the stored lease's ``fence``, else ``fence.refuse()``).
- Leases: ``new_holder``, ``holder_gone`` (a holder whose process is gone: its lease is
  taken over at once), ``DEFAULT_LEASE_TTL``, ``check_lease_ttl``, ``LeaseRenewer`` /
  ``RenewIO`` (one renewer thread per store, for ``RunLeases``), ``BehindWriter`` /
  ``BehindIO`` (one writer thread per store for mode ``"async"``, for ``JournalBehind``).
- The errors a store raises: ``refusal`` (a request not pending), ``lease_refusal`` (a live
  lease), ``run_exists_refusal`` (a run id kept already); ``expire_stale`` is ``recover``.
- Locations: ``register_scheme(scheme, factory)`` (with ``StoreOptions``, ``StoreFactory``)
  so ``open_store`` and the ``hpd-agent`` commands open the store's locations.

``hpd_agent.testing.store_contract`` tests a store; docs/durability.md ("Writing a store")
walks through one written from scratch (examples/dict_store.py).
"""

from __future__ import annotations

from ..permissions import Grant, GrantBook, MemoryGrants
from ._answers import jsonable
from ._base import (
    JournalEntry,
    Lease,
    RequestRecord,
    RequestState,
    RunRecord,
    RunState,
    refusal,
)
from ._behind import BehindIO, BehindWriter
from ._fence import Fence, current_fence
from ._holder import holder_gone, new_holder
from ._lease import DEFAULT_LEASE_TTL, check_lease_ttl, lease_refusal
from ._protocol import (
    JournalBatches,
    JournalBehind,
    JournalGroups,
    JournalSendAhead,
    JournalWriteNow,
    RequestFeed,
    RunLeases,
    Store,
    StoreCapabilities,
    ThreadData,
    ThreadTables,
    expire_stale,
)
from ._renewer import LeaseRenewer, RenewIO
from ._schemes import StoreFactory, StoreOptions, register_scheme
from ._session import Sessions, run_exists_refusal
from ._threads import MemoryThreadTables

__all__ = [
    "DEFAULT_LEASE_TTL",
    "BehindIO",
    "BehindWriter",
    "Fence",
    "Grant",
    "GrantBook",
    "JournalBatches",
    "JournalBehind",
    "JournalEntry",
    "JournalGroups",
    "JournalSendAhead",
    "JournalWriteNow",
    "Lease",
    "LeaseRenewer",
    "MemoryGrants",
    "MemoryThreadTables",
    "RenewIO",
    "RequestFeed",
    "RequestRecord",
    "RequestState",
    "RunLeases",
    "RunRecord",
    "RunState",
    "Sessions",
    "Store",
    "StoreCapabilities",
    "StoreFactory",
    "StoreOptions",
    "ThreadData",
    "ThreadTables",
    "check_lease_ttl",
    "current_fence",
    "expire_stale",
    "holder_gone",
    "jsonable",
    "lease_refusal",
    "new_holder",
    "refusal",
    "register_scheme",
    "run_exists_refusal",
]
