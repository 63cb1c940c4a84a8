"""Fixtures of the inbox tests: the store they run on (a SQLite file, a PostgreSQL server)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette", reason='needs the web extra: pip install -e ".[web]"')

from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store's location, SQLite and PostgreSQL in turn (empty)."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("fresh_postgres"))
