"""``PostgresStore``'s point statements through libpq: the values a store reads back are the
types psycopg would give, failures are psycopg's exception classes, and what libpq alone
cannot send keeps psycopg's way."""

from __future__ import annotations

import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures)

psycopg = pytest.importorskip("psycopg")

from hpd_agent.store._pg_raw import NotPrepared, RawStatements  # noqa: E402


def test_values_come_back_typed_and_failures_as_psycopg_errors(fresh_postgres: str) -> None:  # noqa: F811
    with psycopg.connect(fresh_postgres, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE t (id text PRIMARY KEY, n integer, x double precision, ok boolean,"
            " note text)"
        )
        raw = RawStatements()
        insert = "INSERT INTO t VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING"
        rows = raw.run(conn.pgconn, insert, ("a", 7, 1.5, True, None))
        assert rows is not None and rows.rowcount == 1
        again = raw.run(conn.pgconn, insert, ("a", 8, 2.5, False, "x"))
        assert again is not None and again.rowcount == 0  # prepared once, run twice
        select = "SELECT id, n, x, ok, note, count(*) OVER () FROM t WHERE id = %s"
        got = raw.run(conn.pgconn, select, ("a",))
        assert got is not None
        assert got.fetchone() == ("a", 7, 1.5, True, None, 1)
        assert got.fetchone() is None
        assert raw.run(conn.pgconn, select, ("none",)).fetchall() == []  # type: ignore[union-attr]
        # Unicode and a value psycopg would read the same.
        raw.run(conn.pgconn, insert, ("é✓", -1, float("1e300"), False, "ü"))
        assert conn.execute("SELECT n, x, note FROM t WHERE id = 'é✓'").fetchone() == (
            -1,
            1e300,
            "ü",
        )
        with pytest.raises(psycopg.errors.UniqueViolation):
            raw.run(conn.pgconn, "INSERT INTO t (id) VALUES (%s)", ("a",))
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            raw.run(conn.pgconn, "SELECT %s::integer", ("not a number",))
        # Still usable after a failure.
        assert raw.run(conn.pgconn, select, ("a",)).fetchone()[1] == 7  # type: ignore[union-attr]


def test_what_only_psycopg_can_send_keeps_psycopgs_way(fresh_postgres: str) -> None:  # noqa: F811
    with psycopg.connect(fresh_postgres, autocommit=True) as conn:
        raw = RawStatements()
        assert raw.run(conn.pgconn, "SELECT %s = ANY(%s)", ("a", ["a", "b"])) is None
        assert raw.run(conn.pgconn, "SELECT '100%%' || %s", ("x",)) is None
        # A parameter whose type the server cannot tell is not prepared: psycopg's way.
        assert raw.run(conn.pgconn, "SELECT %s IS NULL", (None,)) is None


def test_a_statement_the_server_cannot_prepare_inside_a_transaction_is_not_run_there(
    fresh_postgres: str,  # noqa: F811
) -> None:
    # Its failed PREPARE failed the transaction: the caller must start it again, and it
    # goes psycopg's way from then on.
    with psycopg.connect(fresh_postgres, autocommit=True) as conn:
        raw = RawStatements()
        with pytest.raises(NotPrepared), conn.transaction():
            raw.run(conn.pgconn, "SELECT %s IS NULL", (None,))
        with conn.transaction():
            assert raw.run(conn.pgconn, "SELECT %s IS NULL", (None,)) is None
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_prepare_that_gave_up_is_tried_again(fresh_postgres: str) -> None:  # noqa: F811
    with (
        psycopg.connect(fresh_postgres, autocommit=True) as conn,
        psycopg.connect(fresh_postgres) as other,
    ):
        conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY)")
        conn.execute("SET lock_timeout = '5ms'")
        raw = RawStatements()
        insert = "INSERT INTO t (id) VALUES (%s)"
        other.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(NotPrepared, match="lock"):
            raw.run(conn.pgconn, insert, ("a",))
        other.commit()
        rows = raw.run(conn.pgconn, insert, ("a",))
        assert rows is not None and rows.rowcount == 1  # prepared now, and run
