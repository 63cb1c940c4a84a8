"""The store contract (``hpd_agent.testing.store_contract``) on every shipped store:
``MemoryStore``, ``SQLiteStore`` (a real file, both durabilities) and ``PostgresStore`` (a
real server on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

from hpd_agent.store import MemoryStore, SQLiteStore, Store, open_store
from hpd_agent.testing.store_contract import *  # noqa: F403  (the contract's tests)
from hpd_agent.testing.store_contract import StoreFactory


@pytest.fixture(params=["memory", "sqlite", "sqlite-os", "postgres"])
def contract_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    kind: str = request.param
    dsn = str(request.getfixturevalue("fresh_postgres")) if kind == "postgres" else ""

    def make(*, lease_ttl: float) -> Store:
        if kind == "memory":
            return MemoryStore(lease_ttl=lease_ttl)
        if kind == "postgres":
            return open_store(dsn, lease_ttl=lease_ttl)
        durability = "os" if kind == "sqlite-os" else "process"
        return SQLiteStore(tmp_path / "runs.db", durability=durability, lease_ttl=lease_ttl)

    return make
