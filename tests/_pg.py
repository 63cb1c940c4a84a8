"""A private PostgreSQL server for the test session, on 127.0.0.1 and a free port.

Uses the server binaries that are installed (Debian's ``postgresql`` package: ``.ci/run``
installs it; the tests never install anything themselves), runs ``initdb`` and ``pg_ctl`` as the
``postgres`` user (``initdb`` refuses root) in a temporary directory, and stops the server at
the end. Without the binaries, the tests that need them skip and say what is missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


class ServerUnavailable(Exception):
    """PostgreSQL's server binaries are not installed."""


@contextlib.contextmanager
def private_server() -> Iterator[str]:
    """Start a private PostgreSQL cluster; yields its DSN and stops it on exit.

    Raises:
        ServerUnavailable: No server binaries (the message says what is missing).
    """
    bindir = _bindir()
    if bindir is None:
        raise ServerUnavailable(
            "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: "
            "apt-get install postgresql (.ci/run does)"
        )
    root = tempfile.mkdtemp(prefix="hpd-pg-")
    os.chmod(root, 0o755)
    data = os.path.join(root, "data")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    initdb = [f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]
    options = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    )
    start = [f"{bindir}/pg_ctl", "-D", data, "-o", options, "-l", f"{root}/log", "-w", "start"]
    try:
        subprocess.run(_as_postgres(initdb), check=True, capture_output=True, timeout=300)
        subprocess.run(_as_postgres(start), check=True, capture_output=True, timeout=120)
    except subprocess.CalledProcessError as e:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {e.stderr!r}") from e
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_postgres([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of a private PostgreSQL server (the session's own cluster)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip('psycopg is not installed: pip install -e ".[dev]"')
    try:
        with private_server() as dsn:
            yield dsn
    except ServerUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture
def fresh_postgres(postgres_dsn: str) -> str:
    """The session server's DSN with an empty ``public`` schema (each test starts clean)."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return postgres_dsn
